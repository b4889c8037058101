"""tests/prerequisites.py: a missing tool skips on a person's machine and fails under CI=true, in one sentence."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ..helpers import ROOT

LACKING = """
from tests.prerequisites import missing


def test_needs_a_tool_this_machine_lacks():
    missing("frobnicate", "apt-get install frobnicate")


def test_skips_for_a_reason_of_its_own():
    import pytest
    pytest.skip("no GPU here")
"""


def _run(tmp_path: Path, ci: str | None) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_lacking.py").write_text(LACKING, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    if ci is not None:
        env["CI"] = ci
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.prerequisites", "-p", "no:cacheprovider", "-rA",
         str(tmp_path / "test_lacking.py")],
        cwd=tmp_path, env=env, capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip


def test_a_missing_tool_is_a_skip_that_says_how_to_get_it(tmp_path: Path) -> None:
    done = _run(tmp_path, None)
    assert done.returncode == 0, done.stdout
    assert "2 skipped" in done.stdout
    assert "frobnicate is missing: apt-get install frobnicate" in done.stdout


@pytest.mark.parametrize("ci", ["true", "TRUE"])
def test_under_ci_a_missing_tool_fails_and_a_skip_of_its_own_stays_a_skip(tmp_path: Path, ci: str) -> None:
    done = _run(tmp_path, ci)
    assert done.returncode == 1, done.stdout
    assert "1 failed, 1 skipped" in done.stdout
    assert "CI=true, and frobnicate is missing: apt-get install frobnicate" in done.stdout
