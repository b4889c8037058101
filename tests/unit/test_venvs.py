"""Shared environments: keyed by what they are made from, made once under a lock, a half-made one made again."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from tritonpt import caches
from tritonpt_ci import venvs


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project with no dependencies: its environment is made in well under a second."""
    root = tmp_path / "project"
    root.mkdir()
    (root / "pyproject.toml").write_text(DECLARED.format(dependencies=""), encoding="utf-8")
    return root


DECLARED = """[project]
name = "p"
version = "0"
dependencies = [{dependencies}]

[dependency-groups]
empty = []

[tool.ruff]
line-length = 110
"""


PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"


def test_the_key_follows_what_the_environment_is_made_from(project: Path) -> None:
    key = venvs.key_of(project, python="3.11", groups=["test"], packages=["torch==2.9.1"])
    assert key == venvs.key_of(project, python="3.11", groups=["test"], packages=["torch==2.9.1"])
    assert key != venvs.key_of(project, python="3.11", groups=["lint"], packages=["torch==2.9.1"])
    assert key != venvs.key_of(project, python="3.11", groups=["test"], packages=["torch==2.9.0"])
    assert key != venvs.key_of(project, python="3.12", groups=["test"], packages=["torch==2.9.1"])
    # a lint setting installs nothing: the same environment
    declared = project / "pyproject.toml"
    declared.write_text(declared.read_text(encoding="utf-8").replace("110", "100"), encoding="utf-8")
    assert key == venvs.key_of(project, python="3.11", groups=["test"], packages=["torch==2.9.1"])
    declared.write_text(DECLARED.format(dependencies='"numpy"'), encoding="utf-8")
    assert key != venvs.key_of(project, python="3.11", groups=["test"], packages=["torch==2.9.1"])


@pytest.mark.skipif(shutil.which("uv") is None, reason="uv makes the environments; nox sessions have it")
def test_an_environment_is_made_once_and_a_half_made_one_again(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger = tmp_path / "ledger.jsonl"
    monkeypatch.setenv(caches.LEDGER_ENV, str(ledger))
    made = venvs.shared(project, python=PYTHON, groups=["empty"], say=lambda _: None)
    assert (made.location / venvs.DONE).is_file()
    assert Path(made.python).is_file()
    again = venvs.shared(project, python=PYTHON, groups=["empty"], say=lambda _: None)
    assert again == made
    (made.location / venvs.DONE).unlink()  # as a run stopped while making it leaves it
    venvs.shared(project, python=PYTHON, groups=["empty"], say=lambda _: None)
    assert [n.hit for n in caches.read(ledger)] == [False, True, False]
    variables = made.variables(project)
    assert variables["PYTHONPATH"] == f"{project / 'src'}:{project / 'tools'}"
    assert variables["PATH"].startswith(str(made.location / "bin"))
