"""Faults of a local Triton while `the matrix (python -m tritonpt.matrix)` runs, and Ctrl-C of that run.

A dead server must end the run within 10 s with one paragraph (what died, how, the last log lines, a Hint:),
no traceback, the reports written saying "aborted", and nothing left behind. The moments are checks the matrix
holds at (tritonpt.stopping.hold_at): its first check ("at start", the server up and watched) and its first parity
check ("mid-matrix", after the backend, bad-request and health checks).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from ..helpers import matrix_command, server_pids
from .injector import MATRIX_MOMENTS, FaultRun, Outcome

pytestmark = pytest.mark.slow

START_TIMEOUT_S = 240.0
DEAD_BOUND_S = 10.0
"""The goal: a dead server ends the run within 10 s."""
CTRL_C_BOUND_S = 15.0
"""Ctrl-C: pytest's teardown stops the server (SIGTERM; Triton unloads the models and exits)."""
HUNG_BOUND_S = 20.0
"""A server that stops answering ends the run (five missed probes, at most about 7.5 s, then SIGKILL)."""
MOMENTS = MATRIX_MOMENTS


def _matrix_run(run: FaultRun, *args: str, moment: str | None = None) -> Path:
    """The matrix on the fault's repository; with ``moment``, held there until the fault comes."""
    assert run.repository is not None
    reports = run.folder / "reports"
    if moment is not None:
        run.hold(MOMENTS[moment])
    run.start(matrix_command(run.repository, reports, "--target", "local", *args))
    if moment is not None:
        run.wait_held(START_TIMEOUT_S)
    return reports


def _signal_server(run: FaultRun, sig: signal.Signals) -> None:
    assert run.repository is not None
    pids = server_pids(str(run.repository))
    run.require(bool(pids), "the matrix's tritonserver was not found")
    for pid in pids:
        os.kill(pid, sig)


@pytest.mark.parametrize("moment", MOMENTS, ids=[m.replace(" ", "-") for m in MOMENTS])
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_a_local_server_that_dies_ends_the_run(
    fault: Callable[..., FaultRun], record: Callable[[Outcome], Outcome], sig: signal.Signals, moment: str
) -> None:
    run = fault(f"{sig.name} of tritonserver", f"matrix, {moment} (local)", DEAD_BOUND_S)
    reports = _matrix_run(run, moment=moment)
    run.inject(lambda: _signal_server(run, sig))
    outcome = run.finish(expected_exit=(1,))
    verdict = (
        "was killed by signal SIGKILL" if sig == signal.SIGKILL else "sent the server SIGTERM"
    )  # the hint
    summary = reports / "summary.md"
    outcome.extra_ok = (
        verdict in outcome.output
        and "Hint:" in outcome.output
        and summary.is_file()
        and "The run was aborted" in summary.read_text(encoding="utf-8")
    )
    record(outcome)
    assert outcome.passed, outcome.explain()


@pytest.mark.parametrize("moment", ["during server start", "mid-matrix"])
def test_ctrl_c_of_the_matrix_stops_its_server(
    fault: Callable[..., FaultRun], record: Callable[[Outcome], Outcome], moment: str
) -> None:
    run = fault(
        "Ctrl-C of the matrix (python -m tritonpt.matrix)", f"matrix, {moment} (local)", CTRL_C_BOUND_S
    )
    if moment == "during server start":
        reports = _matrix_run(run)
        # The log exists once the process runs; the models load before the HTTP service starts.
        run.wait_file(reports / "tritonserver.log", "loading: ", START_TIMEOUT_S)
    else:
        _matrix_run(run, moment=moment)
    run.interrupt()
    outcome = record(run.finish(expected_exit=(1, 2)))
    assert outcome.passed, outcome.explain()


def test_a_local_server_that_stops_answering_is_killed_and_the_run_ends(
    fault: Callable[..., FaultRun], record: Callable[[Outcome], Outcome]
) -> None:
    """SIGSTOP, as a deadlock looks from outside: the process runs, nothing answers. It must not outlive the run
    (on a GPU runner it would hold the GPU and its ports for the next job), and the paragraph says what it did."""
    run = fault("SIGSTOP of tritonserver", "matrix, mid-matrix (local)", HUNG_BOUND_S)
    _matrix_run(run, moment="mid-matrix")
    run.inject(lambda: _signal_server(run, signal.SIGSTOP))
    outcome = run.finish(expected_exit=(1,))
    outcome.extra_ok = (
        "as the Triton server stopped answering" in outcome.output
        and "It is killed now (SIGKILL" in outcome.output
        and "died" not in outcome.output.split("The run was aborted", 1)[-1].splitlines()[0]
    )
    record(outcome)
    assert outcome.passed, outcome.explain()


STOP_SIGNALS = {"SIGTERM": (signal.SIGTERM, 2), "SIGHUP": (signal.SIGHUP, 2)}
"""What `timeout`, systemd, a cancelled CI step or a closed terminal send; pytest exits 2 on the interrupt."""


@pytest.mark.parametrize("name", STOP_SIGNALS)
def test_a_stop_signal_to_the_matrix_stops_its_server(
    fault: Callable[..., FaultRun], record: Callable[[Outcome], Outcome], name: str
) -> None:
    sig, code = STOP_SIGNALS[name]
    run = fault(
        f"{name} of the matrix (python -m tritonpt.matrix)", "matrix, mid-matrix (local)", CTRL_C_BOUND_S
    )
    _matrix_run(run, moment="mid-matrix")
    run.signal(sig)
    outcome = record(run.finish(expected_exit=(code,)))
    assert outcome.passed, outcome.explain()


def test_a_sigkilled_matrix_takes_its_server_along(
    fault: Callable[..., FaultRun], record: Callable[[Outcome], Outcome]
) -> None:
    """Nothing of pytest runs after SIGKILL: the server's parent-death signal ends it (prctl PR_SET_PDEATHSIG)."""
    run = fault(
        "SIGKILL of the matrix (python -m tritonpt.matrix)", "matrix, mid-matrix (local)", DEAD_BOUND_S
    )
    _matrix_run(run, moment="mid-matrix")
    run.signal(signal.SIGKILL)
    outcome = record(run.finish(expected_exit=(-signal.SIGKILL,)))
    assert outcome.passed, outcome.explain()
