"""`python -m tritonpt.matrix --help` (what `tritonpt check --help` shows of the matrix): it answers with the
matrix's options and builds, validates and starts nothing, even for a repository that does not exist."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def test_help_lists_the_options_and_touches_nothing(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    done = subprocess.run(
        [sys.executable, "-m", "tritonpt.matrix", "--help", "--repository", str(tmp_path / "missing")],
        cwd=tmp_path,
        env={**os.environ, "TRITONPT_CACHE": str(cache)},
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    for option in ("--target", "--repository", "--reports"):
        assert option in done.stdout
    assert not cache.exists(), "--help built or cached something"
    assert not (tmp_path / "reports").exists(), "--help wrote reports"


def test_its_tests_run_without_the_launcher_say_how_to_run_them(tmp_path: Path) -> None:
    """`pytest src/tritonpt/matrix` has no settings to run with: one sentence naming the launcher, no KeyError."""
    matrix = Path(__file__).resolve().parents[2] / "src" / "tritonpt" / "matrix"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", str(matrix)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    said = done.stdout + done.stderr
    assert done.returncode == 4, said
    assert "run them through it: `python -m tritonpt.matrix --repository DIR`" in said
    assert "KeyError" not in said
    assert "Traceback" not in said
