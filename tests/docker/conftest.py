"""What the Docker tests share: one engine client and the offline stand-in images, built once per session.

Every test in this folder needs a Docker engine; without one each is skipped, saying how to start one. The
stand-in base is made with debootstrap the first time (root and debootstrap needed, else the tests that need
it are skipped, saying which is missing); later runs reuse every image, as their tags hash their inputs.

The lock-down checks (test_lockdown.py) become the reliability part ``lockdown`` when the session ends: one
entry per test, passed or not, written only when at least one of them ran.
"""

from __future__ import annotations

from collections.abc import Iterator
from importlib.util import find_spec
from typing import Any

import pytest

from tritonpt.reporting.reliability import count_tracebacks, write_part
from tritonpt_ci import standin

from .. import prerequisites
from ..prerequisites import missing

LOCKDOWN_MODULE = "test_lockdown.py"
LOCKDOWN_CHECKS = pytest.StashKey[dict[str, dict[str, Any]]]()
LOCKDOWN_OUTPUTS = pytest.StashKey[list[str]]()


@pytest.fixture(scope="session", autouse=True)
def docker_client() -> Iterator[Any]:
    """A docker-py client for the engine at DOCKER_HOST (or the local socket); every test here needs one."""
    with prerequisites.docker_engine() as client:
        yield client


@pytest.fixture(scope="session")
def standin_base(docker_client: Any) -> str:
    """The debootstrap Debian bookworm base of the stand-ins (built here when root and debootstrap allow)."""
    reason = standin.why_not_base(docker_client)
    if reason:
        pytest.skip(reason)
    return standin.build_base(docker_client).tag


@pytest.fixture(scope="session")
def standin_images(docker_client: Any, standin_base: str) -> dict[str, standin.StandinImage]:
    """Base, Triton stand-in and docker/ngc.Dockerfile on it, by role; reused when their inputs did not change."""
    if find_spec("pytriton") is None:
        missing(
            "nvidia-pytriton", "install the project's dependencies (the stand-in takes its server from it)"
        )
    return {b.role: b for b in standin.build_all(docker_client)}


@pytest.fixture(scope="session")
def lockdown_outputs(pytestconfig: pytest.Config) -> list[str]:
    """What the lock-down checks read (docker exec, zizmor); the part counts the tracebacks in it."""
    return pytestconfig.stash.setdefault(LOCKDOWN_OUTPUTS, [])


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[pytest.TestReport]:
    report: pytest.TestReport = yield
    if item.path.name == LOCKDOWN_MODULE and (report.when == "call" or not report.passed):
        checks = item.config.stash.setdefault(LOCKDOWN_CHECKS, {})
        known = checks.get(item.name)
        if known is None or known["passed"]:  # a failing teardown after a passing call still fails the check
            name = item.name.removeprefix("test_")
            checks[item.name] = {"check": name, "passed": report.passed, "outcome": report.outcome}
    return report


def pytest_sessionfinish(session: pytest.Session) -> None:
    checks = list(session.config.stash.get(LOCKDOWN_CHECKS, {}).values())
    if any(c["outcome"] != "skipped" for c in checks):
        outputs = session.config.stash.get(LOCKDOWN_OUTPUTS, [])
        write_part("lockdown", {"tracebacks": count_tracebacks(outputs), "checks": checks})
