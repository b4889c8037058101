"""The workflows run under act (``nox -s workflows``): each test runs a lane of .github/workflows on a snapshot of
this checkout and reads the run's report (tritonpt_ci.workflows).

A snapshot is the working tree as git sees it (tracked files and untracked ones it does not ignore), committed once
on a branch ``main`` in a fresh repository: a push of exactly what is here, whatever branch the checkout is on. A
fault that is a bad change is one more commit on top of it, as a developer would push it.

The lanes start together as the tier begins (``@pytest.mark.lanes``: :class:`Started`), a lane that needs another's
run the moment that one ends (:class:`Then`); each test waits for its own, or cancels it.
"""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from tritonpt_ci.workflows import actions
from tritonpt_ci.workflows.runner import Lane, Result, Running, start

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


@dataclass(frozen=True, kw_only=True)
class Then:
    """A lane that needs another's run first (its cache saves, say): started the moment ``after``'s act ends, on the
    checkout ``repo`` makes from the snapshot (a bad commit on top, say)."""

    lane: Lane
    after: Lane
    repo: Callable[[Path, Path], Path]  # (the snapshot, a folder of its own) -> the checkout to run on

    @property
    def name(self) -> str:
        return self.lane.name


class Started:
    """The lanes the selected tests name (``@pytest.mark.lanes(lane, ...)``), all started when the tier begins, and
    each :class:`Then` as soon as its first lane ends: act's jobs mostly wait (on a server, on a merge's shards, on
    a GPU preflight that fails), so lanes that do not wait on each other run side by side. A test then takes its
    lane's result, or (to cancel it) its run."""

    def __init__(
        self,
        lanes: Sequence[Lane | Then],
        *,
        repo: Path,
        actions_folder: Path | None,
        folder: Callable[[str], Path],
    ) -> None:
        self._actions = actions_folder
        self._results: dict[str, Result] = {}
        self._running = {
            lane.name: start(lane, repo=repo, reports=REPORTS, actions_folder=actions_folder)
            for lane in lanes
            if isinstance(lane, Lane)
        }
        self._lock = threading.Lock()
        self._stopped = False
        self._failed: dict[str, BaseException] = {}
        self._chains = [
            threading.Thread(target=self._then, args=(then, repo, folder(then.name)), daemon=True)
            for then in lanes
            if isinstance(then, Then)
        ]
        for chain in self._chains:
            chain.start()

    def _then(self, then: Then, snapshot_repo: Path, folder: Path) -> None:
        try:
            self._running[then.after.name].process.wait()
            checkout = then.repo(snapshot_repo, folder)
            with self._lock:  # not once the tier is over: nothing may start after it
                if not self._stopped:
                    self._running[then.name] = start(
                        then.lane, repo=checkout, reports=REPORTS, actions_folder=self._actions
                    )
        except BaseException as exc:  # said by running(), in the test that waits for this lane
            self._failed[then.name] = exc

    def running(self, lane: Lane, *, timeout: float = 3600) -> Running:
        """The lane's run, as it goes (a chained lane: once it has started)."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                if lane.name in self._running:
                    return self._running[lane.name]
            if lane.name in self._failed:
                raise self._failed[lane.name]
            if time.monotonic() > deadline:
                pytest.fail(f"the lane {lane.name} did not start within {timeout:.0f} s")
            time.sleep(0.5)

    def result(self, lane: Lane, *, timeout: float) -> Result:
        """The lane's result (cancelled if it has not ended within ``timeout`` seconds of this call)."""
        if lane.name not in self._results:
            self._results[lane.name] = self.running(lane, timeout=timeout).wait(timeout=timeout)
        return self._results[lane.name]

    def keep(self, lane: Lane, result: Result) -> None:
        """A result a test took itself (a run it cancelled)."""
        self._results[lane.name] = result

    def cancel_the_rest(self) -> None:
        with self._lock:
            self._stopped = True
            left = {n: r for n, r in self._running.items() if n not in self._results}
        for running in left.values():
            if running.process.poll() is None:
                running.wait(timeout=0)
        for chain in self._chains:  # each ends once its first lane has (cancelled just now, if it still ran)
            chain.join()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "lanes(*lanes): act runs the test reads, started with the tier's others"
    )


@pytest.fixture(scope="session", autouse=True)
def started(
    request: pytest.FixtureRequest,
    checkout: Path,
    actions_folder: Path | None,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Started]:
    """Every lane a selected test names, started as the tier begins (a chained one when its first lane ends)."""
    lanes: dict[str, Lane | Then] = {}
    for item in request.session.items:
        for marker in item.iter_markers("lanes"):
            lanes.update({lane.name: lane for lane in marker.args})
    runs = Started(
        list(lanes.values()), repo=checkout, actions_folder=actions_folder, folder=tmp_path_factory.mktemp
    )
    yield runs
    runs.cancel_the_rest()


def job_lines(result: Result, job_id: str) -> str:
    """Everything a job's report holds as text (errors, summary), for the assertions to look in."""
    jobs = result.report.jobs_named(job_id)
    return "\n".join([*(e for j in jobs for e in j.errors), *(j.summary for j in jobs)])
