"""tritonpt_ci.noxkit, what noxfile.py's sessions share: a missing prerequisite skips a session, saying why, and
fails it under CI=true; every session's seconds and outcome go to the run's table. Run by real nox on a noxfile
of two sessions, in a folder of its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from ..helpers import ROOT

NOXFILE = """
import nox
from tritonpt_ci.noxkit import missing, session

nox.options.default_venv_backend = "none"


@session()
def lacking(session):
    missing(session, "frobnicate is not installed: apt-get install frobnicate")


@session()
def fine(session):
    session.log("ran")
"""


def _nox(tmp_path: Path, ci: bool) -> tuple[subprocess.CompletedProcess[str], list[dict[str, object]]]:
    (tmp_path / "noxfile.py").write_text(NOXFILE, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "TRITONPT_RUN", "TRITONPT_CACHE_LEDGER")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT / "tools")])
    env |= {"CI": "true"} if ci else {}
    done = subprocess.run(
        [sys.executable, "-m", "nox", "--no-color", "-f", str(tmp_path / "noxfile.py")],
        cwd=tmp_path, env=env, capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    rows = (tmp_path / "reports" / "timings" / "sessions.jsonl").read_text(encoding="utf-8").splitlines()
    return done, [json.loads(row) for row in rows]


def test_a_session_that_lacks_a_tool_is_skipped_saying_why(tmp_path: Path) -> None:
    done, rows = _nox(tmp_path, ci=False)
    assert done.returncode == 0, done.stderr
    assert "Session lacking skipped: frobnicate is not installed: apt-get install frobnicate" in done.stderr
    assert {r["session"]: r["status"] for r in rows} == {"lacking": "skipped", "fine": "success"}


def test_under_ci_it_fails_with_the_same_sentence(tmp_path: Path) -> None:
    done, rows = _nox(tmp_path, ci=True)
    assert done.returncode == 1, done.stderr
    assert "CI=true, and frobnicate is not installed: apt-get install frobnicate" in done.stderr
    assert {r["session"]: r["status"] for r in rows} == {"lacking": "failed", "fine": "success"}
