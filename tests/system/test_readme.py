"""The README's two commands, as written: the first one run in a fresh clone, the second the one CI runs.

"The two commands" is the README's first promise: on a fresh machine, the first sets up and runs the main job,
the second runs the tests. The command lines are read from the README's code block (markdown-it), not copied
here, so an edit of the README is what gets tested.

The first runs in a clone of this checkout's HEAD (the README as committed, which CI's clean clone is), with a
Python of its own first on PATH as a fresh machine's ``python3``, in the shell's environment without this
session's venv and nox: the machine's package index and certificates, the caches (torch in uv's cache, the
backends in ``~/.cache/tritonpt``), and ``TRITONPT_SOURCES`` where CI reaches no GitHub. The second, ``nox``,
runs everything, this test included, so it is not run from here: ``.ci/run``, which CI runs on every change, must
run it as written.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from ..helpers import ROOT

pytestmark = pytest.mark.slow

HEADING = "The two commands"
CI_RUN = ROOT / ".ci" / "run"
SESSION = ("VIRTUAL_ENV", "PYTHONHOME", "PYTHONPATH", "NOX_", "PYTEST_", "UV_PROJECT_ENVIRONMENT")
"""What this test's own session put in the environment, which a person's shell does not have (names, prefixes)."""


def the_two_commands(readme: Path) -> list[str]:
    """The command lines of the first ``bash`` block under the heading "The two commands" (comments left out)."""
    tokens = MarkdownIt().parse(readme.read_text(encoding="utf-8"))
    under = False
    for index, token in enumerate(tokens):
        if token.type == "heading_open":
            under = tokens[index + 1].content.strip() == HEADING
        elif under and token.type == "fence" and token.info.strip() == "bash":
            return [
                line.strip()
                for line in token.content.splitlines()
                if line.strip() and not line.strip().startswith("#")
            ]
    pytest.fail(f"{readme}: no ```bash block under the heading {HEADING!r}")


def test_the_readme_gives_two_commands() -> None:
    commands = the_two_commands(ROOT / "README.md")
    assert len(commands) == 2, commands


def test_ci_runs_the_second_command_as_written() -> None:
    """`.ci/run` runs the README's test command (``python3 -m nox`` is ``nox``, whose script may not be on PATH)."""
    second = shlex.split(the_two_commands(ROOT / "README.md")[1])
    runs = []
    for line in CI_RUN.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            words = shlex.split(line)
            words = words[1:] if words[:1] == ["exec"] else words
            runs.append(["nox", *words[3:]] if words[:3] == ["python3", "-m", "nox"] else words)
    assert second in runs, f"{CI_RUN} does not run `{shlex.join(second)}`: {runs}"


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip(
            f"{ROOT} is not a git checkout (or git is missing): the first command runs in a clone of it"
        )
    into = tmp_path_factory.mktemp("readme") / "clone"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(into)], check=True, timeout=300)
    return into


def a_fresh_shell(work: Path) -> dict[str, str]:
    """A person's shell on a fresh machine: a Python of its own first on PATH, no venv, no session of ours."""
    python = work / "python"
    base = Path(sys.base_prefix) / "bin" / "python3"
    subprocess.run([str(base), "-m", "venv", str(python)], check=True, timeout=300)
    venv = os.environ.get("VIRTUAL_ENV", "")
    path = [
        p for p in os.environ.get("PATH", "").split(os.pathsep) if p and not (venv and p.startswith(venv))
    ]
    env = {name: value for name, value in os.environ.items() if not name.startswith(SESSION)}
    env["PATH"] = os.pathsep.join([str(python / "bin"), *path])
    return env


def test_the_first_command_runs_the_main_job_green_in_a_fresh_clone(clone: Path) -> None:
    first = the_two_commands(clone / "README.md")[0]
    env = a_fresh_shell(clone.parent)
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", first],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=3000,
    )
    said = (done.stdout + done.stderr)[-4000:]
    assert done.returncode == 0, f"`{first}` exited {done.returncode}:\n{said}"
    summary = json.loads((clone / "reports" / "summary.json").read_text(encoding="utf-8"))
    outcomes = summary["outcomes"]
    assert outcomes.get("passed", 0) > 0, outcomes
    assert outcomes.get("failed", 0) == 0, outcomes
    assert outcomes.get("error", 0) == 0, outcomes
    assert "nox > Session integration was successful" in done.stderr, said
