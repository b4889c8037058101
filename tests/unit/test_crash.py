"""tritonpt.testing.crash: which ended runs CI may run once more (the server crashed on its own), and no other."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tritonpt.testing.crash import KEPT, crash_of, keep_crashed

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
