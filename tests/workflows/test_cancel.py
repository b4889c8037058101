"""A cancelled run leaves nothing behind: cancelled while a job's Triton serves, or while its container runs.

Cancelling is what GitHub does when a newer push supersedes a run (ci.yml's concurrency group) or a person presses
the button: act is sent SIGINT, and each job's processes with it. Everything of a run carries its marker in its
environment (tritonpt_ci.workflows.host); what still carries it afterwards, or a harness container that mounts
the run's folder, is a leftover.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tritonpt_ci.workflows import host
from tritonpt_ci.workflows.runner import Lane, until

from ..prerequisites import missing
from .conftest import Started

CI = Path(".github/workflows/ci.yml")


SERVING = Lane(workflow=CI, job="integration", matrix=("shard:1",), name="ci-cancel-server", proofs=False)
CONTAINER = Lane(
    workflow=CI,
    job="docker",
    matrix=("session:container",),
    name="ci-cancel-container",
    proofs=False,  # the container session must run, to be cancelled while its container runs
)


@pytest.mark.lanes(SERVING)
def test_a_run_cancelled_while_its_server_serves_leaves_no_server(started: Started) -> None:
    running = started.running(SERVING)

    def serving() -> bool:
        return any("tritonserver" in command for _, command in host.marked(running.marker))

    assert until(running, serving, timeout=1200, poll=0.2), (
        "no tritonserver of the run started within 20 minutes"
    )
    running.cancel()
    result = running.wait()
    started.keep(SERVING, result)
    assert result.cancelled
    assert not result.left, result.left
    assert not host.marked(running.marker)


@pytest.mark.lanes(CONTAINER)
def test_a_run_cancelled_while_its_container_runs_leaves_no_container(started: Started) -> None:
    if shutil.which("sudo") is None:
        missing("sudo", "install it (.ci/run does): the docker job runs `sudo`")
    running = started.running(CONTAINER)

    def container_up() -> bool:
        return any(c.status == "running" for c in host.containers(running.work))

    if not until(running, container_up, timeout=1500, poll=0.2):
        pytest.fail(f"no container of the run started within 25 minutes: {running.folder / 'act.jsonl'}")
    running.cancel()
    result = running.wait()
    started.keep(CONTAINER, result)
    assert result.cancelled
    assert not result.left, result.left
    assert not host.containers(running.work)
