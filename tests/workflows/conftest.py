"""The workflows run under act (``nox -s workflows``): each test runs a lane of .github/workflows on a snapshot of
this checkout and reads the run's report (tritonpt.testing.workflows).

A snapshot is the working tree as git sees it (tracked files and untracked ones it does not ignore), committed once
on a branch ``main`` in a fresh repository: a push of exactly what is here, whatever branch the checkout is on. A
fault that is a bad change is one more commit on top of it, as a developer would push it.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from tritonpt.testing.workflows import actions
from tritonpt.testing.workflows.runner import Lane, Result, Running, start

from ..helpers import ROOT

REPORTS = ROOT / "reports" / "workflows"
GIT = ("git", "-c", "user.name=tritonpt", "-c", "user.email=tritonpt@localhost", "-c", "commit.gpgsign=false")
MAIN = {"ref": "refs/heads/main"}
"""The push event's payload: a push to main (the branch ci.yml saves the shards' costs on)."""


def snapshot(into: Path) -> Path:
    """This checkout's working tree, as one commit on ``main`` in a new repository at ``into``."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, check=True,
    ).stdout.split(b"\0")  # fmt: skip
    for name in filter(None, (n.decode() for n in listed)):
        source = ROOT / name
        if source.is_file():
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, into / name, follow_symlinks=False)
    subprocess.run([*GIT, "init", "-q", "-b", "main"], cwd=into, check=True)
    subprocess.run([*GIT, "add", "-A"], cwd=into, check=True)
    subprocess.run([*GIT, "commit", "-q", "-m", "snapshot of the checkout under test"], cwd=into, check=True)
    return into


def commit(repo: Path, message: str) -> None:
    subprocess.run([*GIT, "commit", "-q", "-a", "-m", message], cwd=repo, check=True)


@pytest.fixture(scope="session")
def actions_folder() -> Path | None:
    """The pinned actions' tarballs (None: act fetches them from GitHub, which this machine cannot reach)."""
    return actions.folder(ROOT)


@pytest.fixture(scope="session")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return snapshot(tmp_path_factory.mktemp("checkout"))


class Started:
    """The lanes the selected tests name (``@pytest.mark.lanes(lane, ...)``), all started when the tier begins: act's
    jobs mostly wait (on a server, on a merge's shards, on a GPU preflight that fails), so independent lanes run
    side by side; each test then waits for its own lane's result."""

    def __init__(self, lanes: Sequence[Lane], *, repo: Path, actions_folder: Path | None) -> None:
        self._running = {
            lane.name: start(lane, repo=repo, reports=REPORTS, actions_folder=actions_folder)
            for lane in lanes
        }
        self._results: dict[str, Result] = {}

    def result(self, lane: Lane, *, timeout: float) -> Result:
        """The lane's result (cancelled if it has not ended within ``timeout`` seconds of this call)."""
        if lane.name not in self._results:
            self._results[lane.name] = self._running[lane.name].wait(timeout=timeout)
        return self._results[lane.name]

    def cancel_the_rest(self) -> None:
        for name, running in self._running.items():
            if name not in self._results and running.process.poll() is None:
                running.wait(timeout=0)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "lanes(*lanes): act runs the test reads, started with the tier's others"
    )


@pytest.fixture(scope="session", autouse=True)
def started(request: pytest.FixtureRequest, checkout: Path, actions_folder: Path | None) -> Iterator[Started]:
    """Every lane a selected test names, started at once as the tier begins."""
    lanes: dict[str, Lane] = {}
    for item in request.session.items:
        for marker in item.iter_markers("lanes"):
            lanes.update({lane.name: lane for lane in marker.args})
    runs = Started(list(lanes.values()), repo=checkout, actions_folder=actions_folder)
    yield runs
    runs.cancel_the_rest()


Launch = Callable[..., Running]


@pytest.fixture
def launch(actions_folder: Path | None, checkout: Path) -> Iterator[Launch]:
    """``launch(lane, repo=...)``: a run started on the snapshot (or ``repo``); cancelled if the test ends first."""
    started: list[Running] = []

    def go(lane: Lane, *, repo: Path = checkout) -> Running:
        running = start(lane, repo=repo, reports=REPORTS, actions_folder=actions_folder)
        started.append(running)
        return running

    yield go
    for running in started:
        if running.process.poll() is None:
            running.wait(timeout=0)


def job_lines(result: Result, job_id: str) -> str:
    """Everything a job's report holds as text (errors, summary), for the assertions to look in."""
    jobs = result.report.jobs_named(job_id)
    return "\n".join([*(e for j in jobs for e in j.errors), *(j.summary for j in jobs)])
