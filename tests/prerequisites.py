"""What a test needs from the machine (a tool, the pinned sources, a package, a Docker engine), said in one way.

    missing(what, fix)      skip: ``what`` is not on this machine, and ``fix`` is how to get it
    docker_engine()         a client of the Docker engine, or missing() saying how to start one

On a person's machine a missing prerequisite skips its tests, saying what to install. Under ``CI=true`` it fails
them with the same sentence: CI (``.ci/run``, ci.yml) must provide everything the tests need, so a CI whose
environment broke cannot pass by skipping. Other skips (a GPU this machine has not, a selection's own choice) are
plain ``pytest.skip`` and stay skips everywhere.

A pytest plugin: tests/conftest.py loads it.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any, NoReturn

import pytest

from tritonpt import image
from tritonpt.errors import DockerUnavailable


class Missing(pytest.skip.Exception):
    """A skip for a prerequisite this machine lacks."""


def in_ci() -> bool:
    """``CI=true``, as GitHub Actions, act and ``.ci/run``'s callers set it."""
    return os.environ.get("CI", "").lower() == "true"


def missing(what: str, fix: str) -> NoReturn:
    """Skip (a failure under CI=true): ``what`` is missing here, ``fix`` says how to get it."""
    msg = f"{what} is missing: {fix}"
    raise Missing(msg)


@contextlib.contextmanager
def docker_engine() -> Iterator[Any]:
    """A docker-py client of the engine at DOCKER_HOST (or the local socket), closed after; else missing()."""
    try:
        client = image.docker_client()
    except DockerUnavailable as exc:
        missing(
            f"a Docker engine at {image.docker_host()}",
            f"start one with `sudo bash .ci/docker-engine.sh` ({exc})",
        )
    with contextlib.closing(client):
        yield client


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[pytest.TestReport]:
    report: pytest.TestReport = yield
    if call.excinfo is not None and call.excinfo.errisinstance(Missing) and in_ci():
        report.outcome = "failed"
        report.longrepr = f"CI=true, and {call.excinfo.value.msg} (CI must provide what the tests need)"
    return report
