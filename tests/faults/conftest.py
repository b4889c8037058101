"""The fault tier: what each fault test shares, the fault table at the end, and the `faults` reliability part.

Each test starts a front door (`pytest tests/integration`, `invoke export|build-backend|serve`) as a person
runs it, injects one fault, and records an :class:`~tests.faults.injector.Outcome`: the time from the fault to
the exit, the exit, and what was left (processes, containers, temporary folders, staging folders, partial cache
entries). The table is printed at the end and written to reports/reliability/parts/faults.json.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tritonpt import image
from tritonpt.errors import DockerUnavailable, ImageError
from tritonpt.testing import standin
from tritonpt.testing.parts import PARTS, write_part

from .injector import FaultRun, Outcome

OUTCOMES = pytest.StashKey[list[Outcome]]()


def pytest_configure(config: pytest.Config) -> None:
    config.stash[OUTCOMES] = []


@pytest.fixture
def record(request: pytest.FixtureRequest) -> Callable[[Outcome], Outcome]:
    """Add a fault's outcome to the table (whether its test then passes or not)."""

    def add(outcome: Outcome) -> Outcome:
        request.config.stash[OUTCOMES].append(outcome)
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
    try:
        client = image.docker_client()
    except DockerUnavailable as exc:
        pytest.skip(
            f"no Docker engine answers at {image.docker_host()}; start one with .ci/docker-engine.sh ({exc})"
        )
    yield client
    client.close()


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


def _table(outcomes: list[Outcome]) -> list[str]:
    header = ("fault", "stage", "bound", "time to exit", "exit", "leftovers", "tb", "ok")
    rows = [
        (
            o.fault,
            o.stage,
            f"{o.bound_s:g} s",
            f"{o.exit_s:.2f} s",
            o.exit,
            ", ".join(f"{k} {v}" for k, v in o.leftovers.items() if v) or "0",
            str(o.tracebacks),
            "yes" if o.passed else "NO",
        )
        for o in outcomes
    ]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) for row in [header, *rows]]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    outcomes = config.stash[OUTCOMES]
    if not outcomes:
        return
    terminalreporter.write_sep(
        "=", f"faults injected: {len(outcomes)}, survived: {sum(o.passed for o in outcomes)}"
    )
    for line in _table(outcomes):
        terminalreporter.write_line(line)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    outcomes = session.config.stash.get(OUTCOMES, [])
    if not outcomes:
        return
    write_part(
        "faults",
        {"tracebacks": sum(o.tracebacks for o in outcomes), "faults": [o.row() for o in outcomes]},
        folder=session.config.rootpath / PARTS,
    )
