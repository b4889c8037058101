"""The README's first command, as written, on a stock Debian 12 and 13 (tritonpt_ci.stock).

A new user arrives with a Debian whose Python refuses `pip install` outside a venv (PEP 668), and with only what
the README tells them to install. So the machine is Debian from debootstrap (minbase, python3, ca-certificates)
with git and the packages of the README's own `apt-get install` line, and the command is read from the README's
code block: an edit of either is what gets tested. It runs as this user in a fresh clone of HEAD (the README as
committed, which CI's clean clone is).

Debian 13's Python is 3.13 (Ubuntu 24.04's 3.12 is the same case), and every session runs on 3.11: there uv
fetches its own CPython 3.11 (python-build-standalone, from GitHub), as the README says. This machine cannot reach
GitHub, so the test hands uv this machine's CPython 3.11 in its place (last on PATH, uv's downloads refused): the
fetch is the one step not shown; every other is the user's.

What the machine keeps between runs is said in tritonpt_ci.stock: uv's and pip's downloads, and its own tritonpt
cache. The first run on a machine builds its backends and exports with nothing but torch in uv's cache.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tritonpt_ci import stock

from .. import prerequisites
from ..helpers import ROOT

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def docker_client() -> Iterator[Any]:
    """The engine the stock machines run on; without one the test is skipped, saying how to start one."""
    with prerequisites.docker_engine() as client:
        yield client


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """The user's home, with a fresh clone of this checkout's HEAD in it."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip(f"{ROOT} is not a git checkout (or git is missing): the command runs in a clone of it")
    subprocess.run(
        ["git", "clone", "--quiet", str(ROOT), str(tmp_path / "tritonpt")], check=True, timeout=300
    )
    return tmp_path


SUITES = {
    "bookworm": "Debian 12",
    "trixie": "Debian 13",
}


@pytest.mark.parametrize("suite", list(SUITES))
def test_the_first_command_runs_the_main_job_green_on_stock_debian(
    docker_client: Any, home: Path, suite: str
) -> None:
    readme = home / "tritonpt" / "README.md"
    first = stock.the_two_commands(readme)[0]
    packages = stock.readme_packages(readme)
    reason = stock.why_not(docker_client, suite=suite, packages=packages)
    if reason:
        pytest.skip(reason)
    tag = stock.build(docker_client, suite=suite, packages=packages)
    sources = os.environ.get("TRITONPT_SOURCES")
    ran = stock.run(
        docker_client,
        tag,
        first,
        clone="tritonpt",
        home=home,
        suite=suite,
        sources=Path(sources) if sources else None,
        python=None if suite == "bookworm" else Path(sys.base_prefix),
        timeout=3000,
    )
    said = ran.output[-4000:]
    print(f"the first command on stock {SUITES[suite]}: exit {ran.code} in {ran.seconds:.0f} s")
    assert ran.code == 0, f"`{first}` exited {ran.code} on {tag}:\n{said}"
    summary = json.loads((home / "tritonpt" / "reports" / "summary.json").read_text(encoding="utf-8"))
    outcomes = summary["outcomes"]
    assert outcomes.get("passed", 0) > 0, outcomes
    assert outcomes.get("failed", 0) == 0, outcomes
    assert outcomes.get("error", 0) == 0, outcomes
    assert "nox > Session integration was successful" in ran.output, said
