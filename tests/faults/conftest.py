"""The fault tier: what each fault test shares, the fault table at the end, and the `faults` reliability part.

Each test starts a front door (`the matrix (python -m tritonpt.matrix)`, `invoke export|build-backend|serve`) as a person
runs it, injects one fault, and records an :class:`~tests.faults.injector.Outcome`: the time from the fault to
the exit, the exit, and what was left (processes, containers, temporary folders, staging folders, partial files
and partial cache entries). The table is printed at the end and written to reports/reliability/parts/faults.json.

Every fault that was collected is a row, whether it ran or not: a fault test (one that asks for the ``fault``
fixture) that was skipped, deselected, or gave up before its fault (a precondition that failed) is a row that did
not run, with pytest's reason; one whose test failed after the fault did not survive. The part also holds
pytest's exit status, so the reliability report reads "met" only when every collected fault ran and survived and
pytest passed.

Under pytest-xdist (`nox -s faults` runs the faults side by side: each is marked by its own environment, folder and
repository, so what one leaves is never counted as another's) each worker hands its rows to the controller, which
keeps, per fault, what the worker that ran it said, and alone prints the table and writes the part. The faults
that use the Docker engine are in one file (test_container_faults.py), so on one worker: one of them stops it.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from tritonpt.errors import ImageError
from tritonpt.reporting.reliability import PARTS, write_part
from tritonpt_ci import standin
from tritonpt_ci.contracts import LEFTOVER_KINDS

from .. import prerequisites
from .injector import FaultRun, Outcome

OUTCOMES = pytest.StashKey[dict[str, Outcome]]()  # test id -> the fault's outcome, once it was injected
FAULTS = pytest.StashKey[dict[str, str]]()  # test id of every collected fault -> what pytest said of it
FROM_WORKERS = pytest.StashKey[
    list[list[dict[str, Any]]]
]()  # under xdist, the controller's: each worker's rows
WORKER_ROWS = "fault_rows"
"""The key of a worker's rows in xdist's ``workeroutput``."""


def pytest_configure(config: pytest.Config) -> None:
    config.stash[OUTCOMES] = {}
    config.stash[FAULTS] = {}
    config.stash[FROM_WORKERS] = []


def _is_fault(item: pytest.Item) -> bool:
    return "fault" in getattr(item, "fixturenames", ())


def pytest_deselected(items: Sequence[pytest.Item]) -> None:
    for item in items:
        if _is_fault(item):
            item.config.stash[FAULTS][item.nodeid] = "not run: deselected"


def pytest_collection_finish(session: pytest.Session) -> None:
    for item in session.items:
        if _is_fault(item):
            session.config.stash[FAULTS][item.nodeid] = "not run: not reached (the run ended before it)"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[pytest.TestReport]:
    """What pytest said of each fault test: skipped (and why), failed, an error, or passed."""
    report: pytest.TestReport = yield
    said = item.config.stash[FAULTS]
    if item.nodeid not in said:
        return report
    if report.skipped and report.when in ("setup", "call"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        said[item.nodeid] = f"not run: skipped: {reason.removeprefix('Skipped: ')}"
    elif report.failed and not said[item.nodeid].startswith(("failed", "error")):
        message = getattr(getattr(report.longrepr, "reprcrash", None), "message", "") or str(report.longrepr)
        first = (message.strip().splitlines() or ["no message"])[0]
        said[item.nodeid] = (
            f"{'failed' if report.when == 'call' else f'error in {report.when}'}: {first[:300]}"
        )
    elif report.when == "call" and report.passed:
        said[item.nodeid] = "passed"
    return report


@pytest.fixture
def record(request: pytest.FixtureRequest) -> Callable[[Outcome], Outcome]:
    """Add a fault's outcome to the table (whether its test then passes or not)."""

    def add(outcome: Outcome) -> Outcome:
        request.config.stash[OUTCOMES][request.node.nodeid] = outcome
        return outcome

    return add


@pytest.fixture
def fault_repository(exported_small: Path, tmp_path: Path) -> Path:
    """The small built-in models, copied for this fault (readable by the container's user, uid 1000)."""
    target = tmp_path / "repository"
    shutil.copytree(exported_small, target)
    target.chmod(0o755)
    return target


@pytest.fixture
def fault(tmp_path: Path, fault_repository: Path) -> Callable[..., FaultRun]:
    """A FaultRun in this test's folder, on its own repository copy."""

    def make(fault: str, stage: str, bound_s: float, **options: Any) -> FaultRun:
        options.setdefault("repository", fault_repository)
        return FaultRun(fault=fault, stage=stage, bound_s=bound_s, folder=tmp_path, **options)

    return make


@pytest.fixture(scope="session")
def docker_engine() -> Iterator[Any]:
    """A docker-py client, or a skip saying how to get an engine."""
    with prerequisites.docker_engine() as client:
        yield client


@pytest.fixture(scope="session")
def container_lane(docker_engine: Any) -> tuple[str, list[str]]:
    """The container lane's image (docker/ngc.Dockerfile on the offline stand-in) and its --mount arguments."""
    try:
        base = standin.base_tag(standin.debian_mirror())
    except ImageError as exc:
        pytest.skip(f"no Debian mirror to name the stand-in base: {exc}")
    if not docker_engine.images.list(name=base):
        pytest.skip(f"the stand-in base {base} is not built; `nox -s container` (as root) builds it")
    built = {b.role: b for b in standin.build_all(docker_engine)}
    mounts = [f"--mount={m.volume()}" for m in standin.host_mounts()]
    return built["ngc"].tag, mounts


# --- the table and the part ------------------------------------------------------------------------------------


def rows(faults: dict[str, str], outcomes: dict[str, Outcome]) -> list[dict[str, Any]]:
    """A row per collected fault, in collection order: its outcome where the fault was injected (survived only if
    its test passed too), else a row that did not run, saying why."""
    found = []
    for test, said in faults.items():
        outcome = outcomes.get(test)
        if outcome is None:
            found.append(
                {
                    "fault": test.split("::", 1)[-1],
                    "stage": "not run",
                    "bound_s": 0.0,
                    "exit_s": 0.0,
                    "exit": said if said.startswith("not run") else f"not run: {said}",
                    "leftovers": dict.fromkeys(LEFTOVER_KINDS, 0),
                    "tracebacks": 0,
                    "passed": False,
                    "ran": False,
                    "test": test,
                    "pytest": said,
                }
            )
            continue
        row = outcome.row()
        row.update(passed=outcome.passed and said == "passed", ran=True, test=test, pytest=said)
        found.append(row)
    return found


def _table(found: list[dict[str, Any]]) -> list[str]:
    header = ("fault", "stage", "bound", "time to exit", "exit", "leftovers", "tb", "ok")
    lines = [
        (
            r["fault"],
            r["stage"],
            f"{r['bound_s']:g} s",
            f"{r['exit_s']:.2f} s",
            r["exit"][:80],
            ", ".join(f"{k} {v}" for k, v in r["leftovers"].items() if v) or "0",
            str(r["tracebacks"]),
            "yes" if r["passed"] else "NO",
        )
        for r in found
    ]
    widths = [max(len(r[i]) for r in [header, *lines]) for i in range(len(header))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) for row in [header, *lines]]


def merged(workers: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """One row per fault from the rows of xdist's workers, in collection order. Every worker collects every fault,
    so each has a row for each: the row of the worker that injected it, else one that says why it did not run
    (skipped, failed before its fault), else "not reached" (no worker ran it: the run ended first)."""

    def rank(row: dict[str, Any]) -> int:
        return 2 if row["ran"] else 0 if "not reached" in row["pytest"] else 1

    best: dict[str, dict[str, Any]] = {}
    for found in workers:
        for row in found:
            if row["test"] not in best or rank(row) > rank(best[row["test"]]):
                best[row["test"]] = row
    return list(best.values())


def _found(config: pytest.Config) -> list[dict[str, Any]]:
    """The fault table's rows: this process's, or on xdist's controller, its workers' merged."""
    if config.stash.get(FROM_WORKERS, []):
        return merged(config.stash[FROM_WORKERS])
    return rows(config.stash.get(FAULTS, {}), config.stash.get(OUTCOMES, {}))


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """xdist's controller, as a worker ends: its rows."""
    found = getattr(node, "workeroutput", {}).get(WORKER_ROWS)
    if found:
        node.config.stash[FROM_WORKERS].append(found)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    if _is_worker(config):
        return
    found = _found(config)
    if not found:
        return
    ran = [r for r in found if r["ran"]]
    terminalreporter.write_sep(
        "=",
        f"faults collected: {len(found)}, injected: {len(ran)}, survived: {sum(r['passed'] for r in found)}",
    )
    for line in _table(found):
        terminalreporter.write_line(line)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _is_worker(session.config):  # the controller writes the part, from every worker's rows
        found = rows(session.config.stash.get(FAULTS, {}), session.config.stash.get(OUTCOMES, {}))
        session.config.workeroutput[WORKER_ROWS] = found  # type: ignore[attr-defined]
        return
    found = _found(session.config)
    if not found:
        return
    write_part(
        "faults",
        {
            "tracebacks": sum(int(r["tracebacks"]) for r in found),
            "pytest_exit": int(exitstatus),
            "collected": len(found),
            "faults": found,
        },
        folder=session.config.rootpath / PARTS,
    )
