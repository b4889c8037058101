"""tritonpt.matrix.crash: which ended runs CI may run once more (the server crashed on its own), and no other."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tritonpt.matrix.crash import (
    KEPT,
    KNOWN,
    Run,
    crash_in,
    crash_in_log,
    crash_of,
    describe,
    findings,
    keep_crashed,
    record_run,
    reruns,
)

HEAP = [
    'I1201 17:08:36.669425 1 libtorch.cc:2636] "TRITONBACKEND_ModelInstanceFinalize: delete instance state"',
    "malloc_consolidate(): unaligned fastbin chunk detected",
    "Signal (6) received.",
]


def _run(folder: Path, *, aborted: str | None, log: list[str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "summary.json").write_text(json.dumps({"aborted": aborted, "outcomes": {}}), encoding="utf-8")
    (folder / "summary.md").write_text("# Triton integration report\n", encoding="utf-8")
    (folder / "tritonserver.log").write_text("\n".join(["I1201 started", *log]) + "\n", encoding="utf-8")
    return folder


def test_an_aborted_run_whose_server_aborted_itself_is_a_crash(tmp_path: Path) -> None:
    crash = crash_of(_run(tmp_path, aborted="the Triton container ... stopped answering", log=HEAP))
    assert crash == "\n".join(HEAP)


@pytest.mark.parametrize("number", [4, 6, 7, 8, 11])
def test_each_signal_a_process_raises_against_itself_counts(tmp_path: Path, number: int) -> None:
    assert crash_of(_run(tmp_path, aborted="died", log=[f"Signal ({number}) received."])) is not None


@pytest.mark.parametrize(
    ("aborted", "log"),
    [
        (None, HEAP),  # not aborted: a check failed, the crash came after; that run's failure stands
        ("", HEAP),
        ("killed by signal SIGKILL", ["I1201 serving"]),  # killed from outside: nothing in the log
        ("sent the server SIGTERM", ["Signal (15) received."]),  # asked to stop
        ("got SIGINT", ["Signal (2) received."]),
        ("died", ['I1201 "no Signal (6) received. here"']),  # the words inside another line
    ],
    ids=["not-aborted", "empty-aborted", "sigkill", "sigterm", "sigint", "quoted"],
)
def test_other_ends_are_not_crashes(tmp_path: Path, aborted: str | None, log: list[str]) -> None:
    assert crash_of(_run(tmp_path, aborted=aborted, log=log)) is None


def test_missing_or_broken_reports_are_not_crashes(tmp_path: Path) -> None:
    assert crash_of(tmp_path) is None
    folder = _run(tmp_path / "r", aborted="died", log=HEAP)
    (folder / "summary.json").write_text("{not json", encoding="utf-8")
    assert crash_of(folder) is None


def test_keep_crashed_copies_the_run_and_replaces_an_earlier_copy(tmp_path: Path) -> None:
    folder = _run(tmp_path, aborted="died", log=HEAP)
    (folder / KEPT).mkdir()
    (folder / KEPT / "stale.txt").write_text("old", encoding="utf-8")
    kept = keep_crashed(folder)
    assert kept == folder / KEPT
    assert sorted(p.name for p in kept.iterdir()) == ["summary.json", "summary.md", "tritonserver.log"]
    assert (kept / "tritonserver.log").read_text(encoding="utf-8") == (folder / "tritonserver.log").read_text(
        encoding="utf-8"
    )
    assert crash_of(kept) == "\n".join(HEAP)


# The end of a real server 2.51.0 log: the stock PT2 build (r26.05) answering an FP16-declared output of an FP32
# package (tests/system/test_pt2_backend.py::test_an_output_data_type_other_than_the_packages), paths shortened.
STOCK_PT2_DTYPE = [
    'I1202 21:57:57.192854 26600 http_server.cc:362] "Started Metrics Service at 127.0.0.1:34683"',
    "Signal (11) received.",
    " 0# 0x000055DD08E4F52D in /venv/pytriton/tritonserver/bin/tritonserver",
    " 1# 0x00007F213145A050 in /lib/x86_64-linux-gnu/libc.so.6",
    " 2# 0x00007F2131585AD8 in /lib/x86_64-linux-gnu/libc.so.6",
    " 3# std::basic_ostream<char, std::char_traits<char> >& std::operator<< <std::char_traits<char> >"
    "(std::basic_ostream<char, std::char_traits<char> >&, char const*) in /lib/x86_64-linux-gnu/libstdc++.so.6",
    " 4# 0x00007F212C59D715 in /cache/served/r25.10+r26.05/pt2/libtriton_pt2.so",
    " 5# TRITONBACKEND_ModelInstanceExecute in /cache/served/r25.10+r26.05/pt2/libtriton_pt2.so",
    " 6# 0x00007F2131DA70B4 in /venv/nvidia_pytriton.libs/libtritonserver-717102f0.so",
]


def test_a_crash_keeps_the_crashing_threads_backtrace_and_names_the_known_crash(tmp_path: Path) -> None:
    crash = crash_in(_run(tmp_path, aborted="died", log=[*STOCK_PT2_DTYPE, "I1202 after the frames"]))
    assert crash is not None
    assert crash.backtrace == tuple(line.strip() for line in STOCK_PT2_DTYPE[2:])
    assert crash.known is not None
    assert crash.known.name == "pt2-output-dtype-crash"
    assert crash.known.reproduction is not None
    assert (Path(__file__).parents[2] / crash.known.reproduction).is_file()
    assert reruns(crash)


def test_every_known_crash_names_a_reproduction_that_exists_or_none() -> None:
    root = Path(__file__).parents[2]
    for known in KNOWN:
        assert known.marks, known
        assert known.reproduction is None or (root / known.reproduction).is_file(), known


def test_a_crash_without_a_reproduction_is_not_rerun(tmp_path: Path) -> None:
    crash = crash_in(_run(tmp_path, aborted="died", log=HEAP))
    assert crash is not None
    assert crash.known is not None
    assert crash.known.reproduction is None
    assert not reruns(crash)
    assert "whose cause is not found yet" in describe(crash, tmp_path / KEPT)


def test_a_new_crash_fails_with_one_paragraph_naming_its_backtrace_and_where_it_is_kept(
    tmp_path: Path,
) -> None:
    log = ["I1202 unloading", "Signal (7) received.", " 0# 0x0000000000401000 in /opt/mine/libnew.so"]
    crash = crash_in(_run(tmp_path, aborted="died", log=log))
    assert crash is not None
    assert crash.known is None
    assert not reruns(crash)
    said = describe(crash, tmp_path / KEPT)
    assert "matches no known one" in said
    assert "0# 0x0000000000401000 in /opt/mine/libnew.so" in said
    assert str(tmp_path / KEPT) in said
    assert "\n\n" not in said


def test_a_run_is_recorded_beside_the_matrix_parts_of_its_reports(tmp_path: Path) -> None:
    reports = tmp_path / "reports" / "shard-1-of-2"
    written = record_run(Run(reports=str(reports), first="passed"))
    assert written == reports / "reliability" / "parts" / "matrix-runs.json"
    record_run(Run(reports=str(reports), first="passed"))  # the same folder again: replaced, not added
    data = json.loads(written.read_text(encoding="utf-8"))
    assert data["part"] == "matrix-runs"
    assert [r["reports"] for r in data["runs"]] == [str(reports)]


ASAN = [
    "I1203 08:00:00.000 model_lifecycle.cc:473] unloading: token_encoder:1",
    "=================================================================",
    "==4242==ERROR: AddressSanitizer: heap-use-after-free on address 0x602000001234 at pc 0x7f01 bp 0x7f02 sp 0x7f03",
    "READ of size 8 at 0x602000001234 thread T17",
    "    #0 0x7f0000001000 in triton::backend::pytorch::ModelState::~ModelState() src/model_state.cc:88",
    "    #1 0x7f0000002000 in TRITONBACKEND_ModelFinalize src/libtorch.cc:120",
    "SUMMARY: AddressSanitizer: heap-use-after-free src/model_state.cc:88 in ModelState::~ModelState()",
    "==4242==ABORTING",
    "Signal (6) received.",
    " 0# 0x00005555 in /opt/tritonserver/bin/tritonserver",
]


def test_an_asan_report_is_carried_into_the_crash_and_its_paragraph(tmp_path: Path) -> None:
    crash = crash_in_log(ASAN)
    assert crash is not None
    assert crash.report[0].startswith("==4242==ERROR: AddressSanitizer: heap-use-after-free")
    assert crash.report[-1].startswith("SUMMARY: AddressSanitizer")
    assert crash.known is None  # a new crash, named by the sanitizer
    said = describe(crash, tmp_path)
    assert "src/model_state.cc:88" in said
    assert "matches no known one" in said


def test_findings_are_asan_summaries_and_ubsan_runtime_errors_once_each() -> None:
    ubsan = "src/libtorch.cc:300:12: runtime error: load of misaligned address 0x01 for type 'int'"
    log = [*ASAN, ubsan, "I1203 fine", ubsan]
    assert findings(log) == (ASAN[6], ubsan)
    assert findings(["I1203 fine", "E1203 runtime error in a message, no file:line"]) == ()
