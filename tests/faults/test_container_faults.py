"""Faults of the container lane: `the matrix (python -m tritonpt.matrix) --target container` on our ngc recipe built on the
offline stand-in, while its container is killed, runs out of memory, is stopped, its run gets Ctrl-C, or the
Docker engine itself stops.

Needs a Docker engine and the stand-in images (`nox -s container` builds them); each test skips, saying so,
without them. The engine-stop fault is marked ``stops_docker``: it stops the engine of this machine and starts it
again with .ci/docker-engine.sh, so it runs only as root, on the local engine, when no container but its own
runs there (see :func:`_engine_stop_is_safe`); deselect it with ``-m "not stops_docker"`` on a shared machine.
Every test of the tier that uses the engine is in this file (the leftover count's container check too), so that
run side by side (`nox -s faults`: each file whole on one worker) none of them runs while the engine stops.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.http as httpclient

from tritonpt import image

from ..helpers import ROOT, matrix_command
from .injector import MATRIX_MOMENTS, FaultRun, Outcome, marked_processes
from .test_leftovers import planted_repository

pytestmark = pytest.mark.slow

STARTUP_S = 240.0
DEAD_BOUND_S = 10.0
"""The goal: a dead server ends the run within 10 s (a killed or OOM-killed container, an engine that stops)."""
CTRL_C_BOUND_S = 20.0
"""Ctrl-C: pytest's teardown stops the container (docker stop: SIGTERM, Triton unloads and exits) and removes it."""
MEMORY_LIMIT = "512m"
"""The OOM fault's limit: the four small models are served in about 180 MB; one token_encoder request of
OOM_TOKENS tokens needs several times the limit (its embedding alone is 128 bytes a token)."""
OOM_TOKENS = 4_000_000
REAPER_S = 30.0
"""How long the engine-stop fault waits, once the engine is back, for the reaper to remove the container."""
DOCKER_PID = Path("/var/run/docker.pid")
ENGINE_SCRIPT = ROOT / ".ci" / "docker-engine.sh"


def _container_run(run: FaultRun, lane: tuple[str, list[str]], *args: str, moment: str | None = None) -> Path:
    """The matrix in a container of the lane's image; with ``moment``, held there until the fault comes."""
    assert run.repository is not None
    tag, mounts = lane
    reports = run.folder / "reports"
    command = matrix_command(
        run.repository, reports, "--target", "container", "--image", tag, "--gpus", "none", *mounts, *args
    )
    if moment is not None:
        run.hold(MATRIX_MOMENTS[moment])
    run.start(command)
    if moment is not None:
        run.wait_held(STARTUP_S)
    return reports


def _the_container(run: FaultRun, timeout: float = STARTUP_S) -> Any:
    """The fault's container once it exists (created by the run, found by the repository it mounts)."""
    deadline = time.monotonic() + timeout
    while True:
        found = run.containers()
        if found:
            return found[0]
        run.require(
            run.process is not None and run.process.poll() is None, "the run ended before its container"
        )
        run.require(time.monotonic() < deadline, "no container appeared")
        time.sleep(0.1)


def _aborted(outcome: Outcome, reports: Path, verdict: str) -> bool:
    summary = reports / "summary.md"
    return (
        verdict in outcome.output
        and "Hint:" in outcome.output
        and "Last " in outcome.output  # the log lines
        and summary.is_file()
        and "The run was aborted" in summary.read_text(encoding="utf-8")
    )


# --- the container dies ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("how", "moment"),
    [("SIGKILL", "at start"), ("SIGKILL", "mid-matrix"), ("SIGTERM", "mid-matrix")],
    ids=["kill-at-start", "kill-mid-matrix", "term-mid-matrix"],
)
def test_a_container_that_is_killed_ends_the_run(
    fault: Callable[..., FaultRun],
    record: Callable[[Outcome], Outcome],
    container_lane: tuple[str, list[str]],
    docker_engine: Any,
    how: str,
    moment: str,
) -> None:
    run = fault(
        f"docker kill -s {how} of the container",
        f"matrix, {moment} (container)",
        DEAD_BOUND_S,
        docker=docker_engine,
    )
    reports = _container_run(run, container_lane, moment=moment)
    container = _the_container(run)
    run.inject(lambda: container.kill(signal=how))
    outcome = run.finish(expected_exit=(1,))
    # SIGTERM: Triton closes its ports, unloads and exits 0; the watchdog sees the exit or the silence first,
    # and the hint names SIGTERM from the log's "Signal (15) received".
    verdict = (
        "was killed by signal SIGKILL (exit code 137)" if how == "SIGKILL" else "sent the server SIGTERM"
    )
    outcome.extra_ok = _aborted(outcome, reports, verdict)
    record(outcome)
    assert outcome.passed, outcome.explain()


HUNG_BOUND_S = 20.0
"""A container that stops answering: five missed probes (at most about 7.5 s), then docker kill and removal."""


def _stop_tritonserver(container: Any) -> None:
    """SIGSTOP to the container's tritonserver, by its host pid (``docker top``): it runs, and answers nothing."""
    processes = container.top()["Processes"]
    pids = [int(p[1]) for p in processes if "tritonserver" in p[-1]]
    assert pids, processes
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)


def test_a_container_that_stops_answering_is_killed_and_removed(
    fault: Callable[..., FaultRun],
    record: Callable[[Outcome], Outcome],
    container_lane: tuple[str, list[str]],
    docker_engine: Any,
) -> None:
    run = fault(
        "SIGSTOP of tritonserver in the container",
        "matrix, mid-matrix (container)",
        HUNG_BOUND_S,
        docker=docker_engine,
    )
    reports = _container_run(run, container_lane, moment="mid-matrix")
    container = _the_container(run)
    run.inject(lambda: _stop_tritonserver(container))
    outcome = run.finish(expected_exit=(1,))
    outcome.extra_ok = (
        _aborted(outcome, reports, "stopped answering")
        and "as the Triton server stopped answering" in outcome.output
    )
    record(outcome)
    assert outcome.passed, outcome.explain()


def _allocate(endpoint: str) -> None:
    """One token_encoder request far larger than the container's memory limit (its answer never comes)."""
    tokens = httpclient.InferInput("INPUT__0", [1, OOM_TOKENS], "INT64")
    tokens.set_data_from_numpy(np.zeros((1, OOM_TOKENS), dtype=np.int64), binary_data=True)
    try:
        with httpclient.InferenceServerClient(endpoint, network_timeout=60) as client:
            client.infer("token_encoder", [tokens])
    except Exception:  # noqa: S110 - the server is meant to die under it
        pass


def test_a_container_killed_for_memory_ends_the_run_saying_oom(
    fault: Callable[..., FaultRun],
    record: Callable[[Outcome], Outcome],
    container_lane: tuple[str, list[str]],
    docker_engine: Any,
) -> None:
    run = fault(
        "OOM kill of the container",
        f"matrix, mid-matrix (container, --memory {MEMORY_LIMIT})",
        DEAD_BOUND_S,
        docker=docker_engine,
    )
    reports = _container_run(run, container_lane, "--memory", MEMORY_LIMIT, moment="mid-matrix")
    container = _the_container(run)
    container.reload()
    port = container.ports["8000/tcp"][0]["HostPort"]
    sender = threading.Thread(target=_allocate, args=(f"127.0.0.1:{port}",), daemon=True)
    run.inject(sender.start)
    outcome = run.finish(expected_exit=(1,))
    outcome.extra_ok = _aborted(outcome, reports, "was killed for lack of memory (OOMKilled, exit code 137)")
    record(outcome)
    assert outcome.passed, outcome.explain()


# --- Ctrl-C ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("moment", ["during container start", "mid-matrix"])
def test_ctrl_c_of_the_container_lane_removes_its_container(
    fault: Callable[..., FaultRun],
    record: Callable[[Outcome], Outcome],
    container_lane: tuple[str, list[str]],
    docker_engine: Any,
    moment: str,
) -> None:
    run = fault(
        "Ctrl-C of the matrix (python -m tritonpt.matrix)",
        f"matrix, {moment} (container)",
        CTRL_C_BOUND_S,
        docker=docker_engine,
    )
    if moment == "during container start":
        _container_run(run, container_lane)
        _the_container(run)
    else:
        _container_run(run, container_lane, moment=moment)
    run.interrupt()
    outcome = record(run.finish(expected_exit=(1, 2)))
    assert outcome.passed, outcome.explain()


# --- the Docker engine stops -----------------------------------------------------------------------------------


def _engine_stop_is_safe(docker_engine: Any) -> str | None:
    """Why stopping this machine's engine is not safe here, or None when it is."""
    host = os.environ.get("DOCKER_HOST", "")
    if host not in ("", "unix:///var/run/docker.sock"):
        return f"DOCKER_HOST={host} is not this machine's engine"
    if os.geteuid() != 0:
        return "stopping and starting dockerd needs root"
    if not DOCKER_PID.is_file():
        return f"no {DOCKER_PID}: this engine was not started as .ci/docker-engine.sh starts it"
    others = docker_engine.containers.list()
    if others:
        return f"{len(others)} other container(s) run on this engine ({', '.join(c.name for c in others)})"
    return None


def _start_engine() -> None:
    done = subprocess.run(
        ["bash", str(ENGINE_SCRIPT)], capture_output=True, text=True, check=False, timeout=120
    )
    assert done.returncode == 0, f"the engine did not come back:\n{done.stdout}\n{done.stderr}"


@pytest.mark.stops_docker
def test_a_docker_engine_that_stops_ends_the_run(
    fault: Callable[..., FaultRun],
    record: Callable[[Outcome], Outcome],
    container_lane: tuple[str, list[str]],
    docker_engine: Any,
) -> None:
    """dockerd gets SIGTERM mid-matrix (as `systemctl stop docker` sends it), and is started again afterwards."""
    unsafe = _engine_stop_is_safe(docker_engine)
    if unsafe:
        pytest.skip(f"not stopping the Docker engine: {unsafe}")
    run = fault("SIGTERM of dockerd", "matrix, mid-matrix (container)", DEAD_BOUND_S, docker=docker_engine)
    reports = _container_run(run, container_lane, moment="mid-matrix")
    _the_container(run)
    dockerd = int(DOCKER_PID.read_text().strip())
    try:
        run.inject(lambda: os.kill(dockerd, 15))
        outcome = run.finish(expected_exit=(1,), before_count=lambda: _restart(dockerd, run))
    finally:
        if not _engine_answers():
            _start_engine()
    # The engine first stops its containers (SIGTERM), then closes its API: the watchdog sees whichever comes
    # first, so the paragraph names the engine that went away, or the SIGTERM of an engine that is stopping.
    outcome.extra_ok = _aborted(outcome, reports, "went away with its Docker engine") or _aborted(
        outcome, reports, "a Docker engine that is stopping"
    )
    if run.docker is not docker_engine:
        run.docker.close()
    record(outcome)
    assert outcome.passed, outcome.explain()
    # The engine started again is the machine's, not this run's: it carries nothing of the environment that
    # started it (a CI job's variables, the marker `nox -s workflows` counts a run's leftovers by).
    environ = Path(f"/proc/{DOCKER_PID.read_text().strip()}/environ").read_bytes().split(b"\0")
    carried = sorted(e.split(b"=", 1)[0].decode() for e in environ if e)
    assert carried == ["PATH"], f"the restarted Docker engine carries {carried}"


def _engine_answers() -> bool:
    try:
        image.docker_client(timeout=5).close()
    except Exception:  # any failure means: it does not answer
        return False
    return True


def _restart(dockerd: int, run: FaultRun) -> None:
    """Wait for the old dockerd to end (it stops its containers first), start it again, count with a new client."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            os.kill(dockerd, 0)
        except ProcessLookupError:
            break
        time.sleep(0.2)
    _start_engine()
    run.docker = image.docker_client()
    # The aborted run left a process (ContainerServer.reap_later) to remove its container once the engine is
    # back: give it the seconds it needs (it tries every second), then count.
    waiting = [name for _, name in marked_processes(run.marker)] + [c.status for c in run.containers()]
    deadline = time.monotonic() + REAPER_S
    while time.monotonic() < deadline and (marked_processes(run.marker) or run.containers()):
        time.sleep(0.2)
    note = f"once the engine answered again: {waiting or 'nothing left'}; {REAPER_S - (deadline - time.monotonic()):.1f} s later: "
    note += f"{[n for _, n in marked_processes(run.marker)] + [c.status for c in run.containers()] or 'nothing left'}\n"
    (run.folder / "after-restart.txt").write_text(note, encoding="utf-8")


def test_a_container_left_mounting_the_repository_is_counted(docker_engine: Any, tmp_path: Path) -> None:
    """The leftover count's own check (tests/faults/test_leftovers.py) for a container: here, with every other test
    that uses the engine, since one of them stops it."""
    images = [tag for image in docker_engine.images.list() for tag in image.tags]
    if not images:
        pytest.skip(
            "the Docker engine holds no image to create a container from (`nox -s container` builds some)"
        )
    repository = planted_repository(tmp_path)
    run = FaultRun(
        fault="planted", stage="x", bound_s=1, folder=tmp_path, repository=repository, docker=docker_engine
    )
    container = docker_engine.containers.create(
        images[0],
        command=["true"],
        labels={image.LABEL_HARNESS: "leftover-test"},
        volumes={str(repository): {"bind": "/models", "mode": "ro"}},
    )
    try:
        counts, left = run.count_leftovers()
    finally:
        container.remove(force=True)
    assert counts["containers"] == 1, left
