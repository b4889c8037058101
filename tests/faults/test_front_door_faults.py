"""Ctrl-C of the front doors as a person runs them (`invoke export`, `invoke build-backend`, `invoke serve`),
and a server that dies under `invoke serve`.

Ctrl-C is SIGINT to the front door's process group, as a terminal sends it: cmake, make and the compiler get it
too; tritonserver runs in a session of its own and is stopped by the front door.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tritonpt import backend
from tritonpt.validate import validate_repository

from ..helpers import invoke_command, server_pids
from .injector import FaultRun, Outcome

pytestmark = pytest.mark.slow

FREE = ("--http-port", "0", "--grpc-port", "0", "--metrics-port", "0")
"""`invoke serve` on free ports: Triton's own (its default) may be another test's or this machine's."""

EXPORT_BOUND_S = 10.0
"""Ctrl-C of an export: the step in progress stops, its staging folder goes."""
BUILD_BOUND_S = 15.0
"""Ctrl-C of a build: cmake, make and c++ end on SIGINT; the staging folder (the unpacked sources) is removed."""
SERVE_BOUND_S = 15.0
"""Ctrl-C of `invoke serve`: the server gets SIGTERM, unloads its models and exits."""
DEAD_BOUND_S = 10.0
"""A server that dies under `invoke serve` (its loop looks every second)."""
STARTUP_S = 240.0


# --- invoke export ---------------------------------------------------------------------------------------------

# Steps of `invoke export` it holds at, and what it exports: the built-in set (resnet18 first; the repository holds
# only the small models) while resnet18 builds and while it is traced, and one small model re-exported over the one
# the repository holds (--force, quicker to get there) as its staged folder is validated. Its cache is empty, so
# resnet18 is exported, not copied from the export cache.
EXPORT_MOMENTS = {
    "while the model builds": ("[resnet18] building the model", ()),
    "while tracing": ("[resnet18] tracing", ()),
    "as a staged folder is validated": (
        "[multi_io] validating the staged model folder",
        ("--only", "multi_io", "--force"),
    ),
}


@pytest.mark.parametrize("moment", EXPORT_MOMENTS)
def test_ctrl_c_of_invoke_export_leaves_the_repository_as_it_was(
    fault: Callable[..., FaultRun], record: Callable[[Outcome], Outcome], tmp_path: Path, moment: str
) -> None:
    run = fault("Ctrl-C of invoke export", f"export, {moment}", EXPORT_BOUND_S, cache=tmp_path / "cache")
    assert run.repository is not None
    before = sorted(p.name for p in run.repository.iterdir())
    step, only = EXPORT_MOMENTS[moment]
    run.hold(step).start(invoke_command("export", "--repository", str(run.repository), *only))
    run.wait_held(STARTUP_S)
    run.interrupt()
    outcome = run.finish(expected_exit=(1, 130))
    errors = [p for p in validate_repository(run.repository) if p.severity == "error"]
    outcome.extra_ok = sorted(p.name for p in run.repository.iterdir()) == before and not errors
    record(outcome)
    assert outcome.passed, outcome.explain()


# --- the main job: the matrix with --export-builtin --------------------------------------------------------------


def test_a_stop_of_the_matrix_alone_while_it_exports_stops_the_export_and_its_build(
    fault: Callable[..., FaultRun], record: Callable[[Outcome], Outcome], tmp_path: Path
) -> None:
    """`nox -s integration` runs `python -m tritonpt.matrix --export-builtin`, and nox passes a CI cancel on as
    Ctrl-C to that process alone: the export it started (and the cold backend build beside it) must stop, with
    nothing half-written and no traceback. Its cache is empty, so resnet18 is built and the backend build is cold."""
    run = fault(
        "Ctrl-C of the matrix alone, while it exports",
        "check --export-builtin, while the model builds",
        BUILD_BOUND_S,
        cache=tmp_path / "cache",
    )
    run.hold("[resnet18] building the model")
    run.start([sys.executable, "-m", "tritonpt.matrix", "--export-builtin", "-q"], cwd=run.folder)
    run.wait_held(STARTUP_S)
    run.signal(signal.SIGINT)
    outcome = record(run.finish(expected_exit=(130,)))
    assert outcome.passed, outcome.explain()


# --- invoke build-backend ------------------------------------------------------------------------------------

BUILD_MOMENTS = {
    "while unpacking the sources": "unpacking 6 sources",
    "while cmake configures": "configuring pytorch_backend",
    "while c++ compiles": "] building ",
}


@pytest.mark.parametrize("moment", BUILD_MOMENTS)
def test_ctrl_c_of_a_cold_backend_build_leaves_no_partial_cache_entry(
    fault: Callable[..., FaultRun], record: Callable[[Outcome], Outcome], tmp_path: Path, moment: str
) -> None:
    sources = backend.sources_folder()
    if sources is None:
        pytest.skip("$TRITONPT_SOURCES is unset: a cold build in an empty cache would download every source")
    cache = tmp_path / "cache"
    run = fault("Ctrl-C of invoke build-backend", f"backend build, {moment}", BUILD_BOUND_S, cache=cache)
    run.hold(BUILD_MOMENTS[moment]).start(invoke_command("build-backend", "--sources", str(sources)))
    run.wait_held(STARTUP_S)
    run.interrupt()
    outcome = run.finish(expected_exit=(1, 130))
    outcome.extra_ok = not (cache / "backends").is_dir() or not any((cache / "backends").iterdir())
    record(outcome)
    assert outcome.passed, outcome.explain()


# --- invoke serve ----------------------------------------------------------------------------------------------


def _serve(run: FaultRun, *, sigint_ignored: bool = False) -> Path:
    """`invoke serve` from the fault's folder (its reports/ go there), on the fault's repository."""
    assert run.repository is not None
    run.start(
        invoke_command("serve", "--repository", str(run.repository), *FREE),
        cwd=run.folder,
        sigint_ignored=sigint_ignored,
    )
    return run.folder / "reports" / "tritonserver.log"


@pytest.mark.parametrize("moment", ["during server start", "while serving"])
def test_ctrl_c_of_invoke_serve_stops_the_server(
    fault: Callable[..., FaultRun], record: Callable[[Outcome], Outcome], moment: str
) -> None:
    run = fault("Ctrl-C of invoke serve", f"serve, {moment}", SERVE_BOUND_S)
    log = _serve(run)
    if moment == "during server start":
        run.wait_file(log, "loading: ", STARTUP_S)
    else:
        run.wait_output("Ctrl-C stops", STARTUP_S)
    run.interrupt()
    outcome = record(run.finish(expected_exit=(1, 130)))
    assert outcome.passed, outcome.explain()


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_a_server_that_dies_under_invoke_serve_ends_it_with_one_paragraph(
    fault: Callable[..., FaultRun], record: Callable[[Outcome], Outcome], sig: signal.Signals
) -> None:
    run = fault(f"{sig.name} of tritonserver", "serve, while serving", DEAD_BOUND_S)
    _serve(run)
    run.wait_output("Ctrl-C stops", STARTUP_S)
    assert run.repository is not None
    pids = server_pids(str(run.repository))
    run.require(bool(pids), "the served tritonserver was not found")
    run.inject(lambda: [os.kill(pid, sig) for pid in pids])
    outcome = run.finish(expected_exit=(1,))
    verdict = "was killed by signal SIGKILL" if sig == signal.SIGKILL else "exited with code 0"
    outcome.extra_ok = "while serving (it stopped on its own)" in outcome.output and verdict in outcome.output
    record(outcome)
    assert outcome.passed, outcome.explain()


# What stops a front door besides a terminal's Ctrl-C: `timeout`, systemd, `docker stop` and a cancelled CI step
# send SIGTERM, a closed terminal SIGHUP, and `kill -INT` of a background job (started with SIGINT ignored, as a
# non-interactive shell starts `invoke serve &`) SIGINT. Each must stop the server as Ctrl-C does: 128 + signal.
STOPS = {
    "SIGTERM": (signal.SIGTERM, False, 143),
    "SIGHUP": (signal.SIGHUP, False, 129),
    "SIGINT, ignored on entry": (signal.SIGINT, True, 130),
}


@pytest.mark.parametrize("name", STOPS)
def test_a_stop_signal_to_invoke_serve_stops_its_server(
    fault: Callable[..., FaultRun], record: Callable[[Outcome], Outcome], name: str
) -> None:
    sig, ignored, code = STOPS[name]
    run = fault(f"{name} of invoke serve", "serve, while serving", SERVE_BOUND_S)
    _serve(run, sigint_ignored=ignored)
    run.wait_output("Ctrl-C stops", STARTUP_S)
    run.signal(sig)
    outcome = record(run.finish(expected_exit=(code,)))
    assert outcome.passed, outcome.explain()


def test_a_sigkilled_invoke_serve_takes_its_server_along(
    fault: Callable[..., FaultRun], record: Callable[[Outcome], Outcome]
) -> None:
    """invoke gets no chance to stop anything: the server's parent-death signal (SIGKILL) ends it."""
    run = fault("SIGKILL of invoke serve", "serve, while serving", DEAD_BOUND_S)
    _serve(run)
    run.wait_output("Ctrl-C stops", STARTUP_S)
    run.signal(signal.SIGKILL)
    outcome = record(run.finish(expected_exit=(-signal.SIGKILL,)))
    assert outcome.passed, outcome.explain()


# --- the bench ---------------------------------------------------------------------------------------------------


def test_sigterm_of_the_bench_stops_its_server_and_perf_analyzer(
    fault: Callable[..., FaultRun], record: Callable[[Outcome], Outcome]
) -> None:
    """The bench (and the tune, through the same front-door code) under SIGTERM while perf_analyzer loads its
    server: both go (perf_analyzer is fetched into the cache first if it is not there yet)."""
    run = fault("SIGTERM of python -m tritonpt.bench", "bench, while perf_analyzer runs", SERVE_BOUND_S)
    assert run.repository is not None
    bench = [sys.executable, "-m", "tritonpt.bench", "--smoke", "--model", "multi_io"]
    run.start([*bench, "--repository", str(run.repository), "--reports", str(run.folder / "bench")])
    run.wait_output("(perf_analyzer)", STARTUP_S)
    run.signal(signal.SIGTERM)
    outcome = record(run.finish(expected_exit=(143,)))
    assert outcome.passed, outcome.explain()
