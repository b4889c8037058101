"""The fault table: every collected fault is a row, whether it ran or not, and only a fault that was injected and
whose test passed survived. (The hooks that fill it are held by the tier's own run: its part names every fault
that did not run.)"""

from __future__ import annotations

from .conftest import merged, rows
from .injector import Outcome


def _outcome(fault: str, *, passed: bool) -> Outcome:
    return Outcome(
        fault=fault,
        stage="matrix",
        bound_s=10.0,
        exit_s=0.5,
        returncode=1 if passed else 0,
        output="",
        leftovers={"processes": 0},
        expected_exit=(1,),
    )


def test_every_collected_fault_is_a_row_and_only_an_injected_passing_one_survived() -> None:
    faults = {
        "t.py::test_ran_and_passed": "passed",
        "t.py::test_ran_then_its_check_failed": "failed: AssertionError: the paragraph did not say what died",
        "t.py::test_gave_up_before_its_fault": "failed: SIGKILL of tritonserver: the matrix's tritonserver was not found",
        "t.py::test_skipped": "not run: skipped: no Docker engine answers",
        "t.py::test_deselected": "not run: deselected",
    }
    outcomes = {
        "t.py::test_ran_and_passed": _outcome("a", passed=True),
        "t.py::test_ran_then_its_check_failed": _outcome("b", passed=True),
    }
    found = {r["test"]: r for r in rows(faults, outcomes)}
    assert list(found) == list(faults)
    assert [r["test"] for r in found.values() if r["passed"]] == ["t.py::test_ran_and_passed"]
    assert [r["test"] for r in found.values() if r["ran"]] == list(outcomes)
    assert found["t.py::test_gave_up_before_its_fault"]["exit"].startswith("not run: failed: SIGKILL")
    assert found["t.py::test_skipped"]["exit"] == "not run: skipped: no Docker engine answers"
    assert all(set(r["leftovers"]) >= {"processes", "partial_cache"} for r in found.values() if not r["ran"])


def test_side_by_side_each_fault_keeps_the_row_of_the_worker_that_ran_it() -> None:
    """Under xdist every worker collects every fault and reports a row for each; the table keeps what the worker
    that ran a fault said, else why it did not run, and "not reached" only where no worker reached it."""
    unreached = "not run: not reached (the run ended before it)"
    collected = ["t.py::test_injected", "t.py::test_skipped", "t.py::test_never_reached"]
    first = rows(dict.fromkeys(collected, unreached), {})
    second = rows(
        {
            "t.py::test_injected": "passed",
            "t.py::test_skipped": "not run: skipped: no Docker engine answers",
            "t.py::test_never_reached": unreached,
        },
        {"t.py::test_injected": _outcome("a", passed=True)},
    )
    for workers in ([first, second], [second, first]):
        found = {r["test"]: r for r in merged(workers)}
        assert sorted(found) == sorted(collected)
        assert found["t.py::test_injected"]["ran"]
        assert found["t.py::test_injected"]["passed"]
        assert found["t.py::test_skipped"]["exit"] == "not run: skipped: no Docker engine answers"
        assert found["t.py::test_never_reached"]["exit"] == unreached
