"""The reliability report's merge, on parts written here by hand (JSON as the tiers' contract describes it)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tritonpt.matrix import crash
from tritonpt.reporting.reliability import folder_in
from tritonpt_ci import contracts, reliability

CLEAN = dict.fromkeys(contracts.LEFTOVER_KINDS, 0)


def _part(reports: Path, name: str, data: dict[str, Any]) -> Path:
    folder = reports / "reliability" / "parts"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def _fault(name: str, exit_s: float, *, passed: bool = True, ran: bool = True, **left: int) -> dict[str, Any]:
    return {
        "fault": name,
        "stage": "matrix" if ran else "not run",
        "exit_s": exit_s,
        "exit": "code 1" if ran else "not run: skipped: no Docker engine answers",
        "leftovers": {**CLEAN, **left},
        "ran": ran,
        "passed": passed and ran,
    }


def _faults(rows: list[dict[str, Any]], *, pytest_exit: int = 0, tracebacks: int = 0) -> dict[str, Any]:
    return {
        "part": "faults",
        "tracebacks": tracebacks,
        "collected": len(rows),
        "pytest_exit": pytest_exit,
        "faults": rows,
    }


SOAK = {
    "part": "soak",
    "tracebacks": 0,
    "requests_sent": 10000,
    "failures": 2,
    "mismatches": 1,
    "counts": {
        "multi_io": {
            "sent": 6000,
            "request_success": 5998,
            "inference_count": 9000,
            "expected_inference_count": 9000,
        },
        "fixed_shape": {
            "sent": 4000,
            "request_success": 4000,
            "inference_count": 4000,
            "expected_inference_count": 4000,
        },
    },
    "rss_start_mb": 300.0,
    "rss_end_mb": 340.5,
    "rss_bound_mb": 64.0,
    "smoke": False,
}


def test_faults_and_soak_are_merged_and_the_rest_named_not_run(tmp_path: Path) -> None:
    rows = [_fault("SIGKILL", 0.4), _fault("Ctrl-C", 3.5, passed=False, containers=1, temp_dirs=2)]
    _part(tmp_path, "faults", _faults(rows, pytest_exit=1, tracebacks=1))
    _part(tmp_path, "soak", SOAK)
    result = reliability.merge(tmp_path)
    assert result.parts_run == ["faults", "soak"]
    assert result.parts_not_run == [
        "fuzz",
        "export-contract",
        "bad-requests",
        "lockdown",
        "triton-qa",
        "matrix-runs",
    ]
    assert result.tracebacks == {"faults": 1, "soak": 0}
    assert result.leftovers == {**CLEAN, "containers": 1, "temp_dirs": 2}
    goals = {g.what: g for g in result.goals}
    assert goals["tracebacks seen"].value == "1"
    assert not goals["tracebacks seen"].met
    assert goals["faults collected / injected / survived"].value == "2 / 2 / 1, pytest exit 1"
    assert not goals["faults collected / injected / survived"].met  # fewer than 20, and one failed
    assert goals["leftovers after the faults"].value == "3"
    assert goals["slowest time to exit"].value == "3.5 s"
    assert goals["soak: requests sent / lost"].value == "10000 / 3"
    assert goals["soak: server counters"].value == "differ"  # multi_io: 5998 of 6000 succeeded
    assert goals["soak: RSS growth"].value == "+40 MB"
    assert goals["soak: RSS growth"].met
    assert not result.all_met


def test_twenty_clean_faults_meet_the_goals(tmp_path: Path) -> None:
    rows = [_fault(f"fault {i}", 1.0 + i / 10) for i in range(20)]
    _part(tmp_path, "faults", _faults(rows))
    result = reliability.merge(tmp_path)
    assert result.all_met
    assert result.leftovers == CLEAN
    assert {g.what: g.value for g in result.goals}["slowest time to exit"] == "2.9 s"


@pytest.mark.parametrize(
    ("change", "why"),
    [
        pytest.param({"ran": False}, "a fault that did not run", id="skipped"),
        pytest.param({"passed": False}, "a fault that did not survive", id="failed"),
    ],
)
def test_a_fault_that_did_not_run_or_survive_fails_the_goal_and_is_named(
    tmp_path: Path, change: dict[str, bool], why: str
) -> None:
    rows = [_fault(f"fault {i}", 1.0) for i in range(24)]
    rows[3] = _fault("SIGKILL of the container", 0.0, **change)  # type: ignore[arg-type]
    _part(tmp_path, "faults", _faults(rows, pytest_exit=1))
    result = reliability.merge(tmp_path)
    goal = {g.what: g for g in result.goals}["faults collected / injected / survived"]
    assert not goal.met, why
    assert not result.all_met
    markdown = reliability.to_markdown(result)
    section = markdown.split("## Faults that did not run or did not survive", 1)[1].split("##", 1)[0]
    assert "SIGKILL of the container" in section
    assert section.count("- ") == 1


def test_every_fault_surviving_is_not_met_while_pytest_failed(tmp_path: Path) -> None:
    rows = [_fault(f"fault {i}", 1.0) for i in range(21)]
    _part(tmp_path, "faults", _faults(rows, pytest_exit=1))
    goal = {g.what: g for g in reliability.merge(tmp_path).goals}["faults collected / injected / survived"]
    assert goal.value == "21 / 21 / 21, pytest exit 1"
    assert not goal.met


def test_fewer_rows_than_collected_faults_is_not_met(tmp_path: Path) -> None:
    rows = [_fault(f"fault {i}", 1.0) for i in range(21)]
    _part(tmp_path, "faults", {**_faults(rows), "collected": 22})
    assert not {g.what: g for g in reliability.merge(tmp_path).goals}[
        "faults collected / injected / survived"
    ].met


def test_the_report_files_hold_the_tables(tmp_path: Path) -> None:
    _part(
        tmp_path,
        "faults",
        _faults([_fault("SIGTERM of dockerd", 2.33)]),
    )
    fuzz = {
        "part": "fuzz",
        "tracebacks": 0,
        "cases": {"config_text": 500, "reference_files": 200, "layouts": 100},
        "crashes": 0,
    }
    _part(tmp_path, "fuzz", fuzz)
    assert reliability.main(["--reports", str(tmp_path)]) == 0
    markdown = (tmp_path / "reliability.md").read_text(encoding="utf-8")
    assert "| SIGTERM of dockerd | matrix | 2.33 s | code 1 | none | yes |" in markdown
    assert "| fuzz cases tried / crashes | 800 / 0 | 0 crashes | yes |" in markdown
    assert "- `soak`: no reports/reliability/parts/soak.json" in markdown
    data = json.loads((tmp_path / "reliability.json").read_text(encoding="utf-8"))
    assert data["parts_not_run"] == [
        "soak",
        "export-contract",
        "bad-requests",
        "lockdown",
        "triton-qa",
        "matrix-runs",
    ]
    assert data["faults"][0]["fault"] == "SIGTERM of dockerd"
    assert data["fuzz"]["cases"]["layouts"] == 100


def test_no_parts_at_all_is_a_report_of_nothing_run(tmp_path: Path) -> None:
    assert reliability.main(["--reports", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "reliability.json").read_text(encoding="utf-8"))
    assert data["parts_run"] == []
    assert data["parts_not_run"] == list(reliability.PARTS)


@pytest.mark.parametrize(
    ("name", "text", "words"),
    [
        pytest.param("soak", "{not json", "is not JSON", id="not-json"),
        pytest.param(
            "soak",
            json.dumps({**SOAK, "failures": "2"}),
            "'failures' is \"2\", expected an integer",
            id="str-count",
        ),
        pytest.param(
            "soak", json.dumps({**SOAK, "smoke": 1}), "'smoke' is 1, expected true/false", id="int-bool"
        ),
        pytest.param(
            "faults", json.dumps({"part": "faults", "tracebacks": 0}), "has no 'faults' field", id="no-rows"
        ),
        pytest.param(
            "faults",
            json.dumps(_faults([{**_fault("x", 1.0), "leftovers": {"processes": 0}}])),
            "faults[0].leftovers has no 'containers' field",
            id="short-leftovers",
        ),
        pytest.param(
            "lockdown",
            json.dumps({"part": "soak", "tracebacks": 0}),
            "says it is part 'soak'",
            id="wrong-name",
        ),
        pytest.param(
            "fuzz",
            json.dumps({"part": "fuzz", "tracebacks": True, "cases": {}, "crashes": 0}),
            "'tracebacks' is true",
            id="bool-count",
        ),
    ],
)
def test_a_part_that_breaks_its_contract_is_named_and_the_merge_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, text: str, words: str
) -> None:
    path = _part(tmp_path, name, {})
    path.write_text(text, encoding="utf-8")
    _part(
        tmp_path, "bad-requests", {"part": "bad-requests", "tracebacks": 0, "cases": []}
    )  # a good one beside
    assert reliability.main(["--reports", str(tmp_path)]) == 1
    error = capsys.readouterr().err
    assert str(path) in error
    assert words in error
    assert "Traceback" not in error
    data = json.loads((tmp_path / "reliability.json").read_text(encoding="utf-8"))
    assert str(path) in data["unreadable"]
    assert name not in data["parts_not_run"]  # it ran; its file is what is wrong
    assert data["parts_run"] == ["bad-requests"]  # the good part beside it is still merged


def _crash(reports: Path, known: str) -> crash.Crash:
    lines = {
        "malloc-consolidate": [
            "malloc_consolidate(): unaligned fastbin chunk detected",
            "Signal (6) received.",
        ],
        "core-warmup-failure": ["E failed to run warmup sample 'zero': boom", "Signal (11) received."],
        "new": ["Signal (11) received."],
    }[known]
    found = crash.crash_in_log(["I1203 model loaded", *lines])
    assert found is not None
    return found


@pytest.mark.parametrize(
    ("known", "rerun", "met"),
    [
        ("core-warmup-failure", "passed", True),  # known, reproduced upstream, rerun passed
        ("core-warmup-failure", "failed", False),
        ("malloc-consolidate", "", False),  # known, cause not found: no rerun, the run failed
        ("new", "", False),
    ],
)
def test_each_matrix_run_and_its_crash_and_rerun_are_named(
    tmp_path: Path, known: str, rerun: str, met: bool
) -> None:
    parts = folder_in(tmp_path)
    crash.record_run(crash.Run(reports="reports/container", first="passed"), parts)
    crash.record_run(crash.Run(reports="reports", first="passed"), parts)
    found = _crash(tmp_path, known)
    crash.record_run(crash.Run.crashed(Path("reports"), found, Path("reports/crashed-run"), rerun), parts)
    result = reliability.merge(tmp_path)
    assert [r["reports"] for r in result.matrix_runs] == [
        "reports/container",
        "reports",
    ]  # replaced, not added
    (goal,) = [g for g in result.goals if g.what.startswith("matrix runs")]
    assert goal.met is met
    assert goal.value.startswith("2 / 1 / " + ("1" if rerun else "0"))
    assert f"reports: {known}" in goal.value
    text = reliability.to_markdown(result)
    assert "## Matrix runs" in text
    row = next(line for line in text.splitlines() if line.startswith("| reports | crashed |"))
    assert f"| {known} |" in row


def test_matrix_runs_that_all_passed_meet_the_goal(tmp_path: Path) -> None:
    parts = folder_in(tmp_path)
    crash.record_run(crash.Run(reports="reports", first="passed"), parts)
    (goal,) = [g for g in reliability.merge(tmp_path).goals if g.what.startswith("matrix runs")]
    assert (goal.value, goal.met) == ("1 / 0 / 0", True)
