"""The package as a user installs it: a wheel built from this checkout, installed into a fresh venv outside it.

The venv gets the wheel, invoke and rich only (``--no-deps``): the front door, the tasks (tritonpt.cli, which
prints through rich) and the recipes must need nothing heavier (torch, docker-py, tritonclient) to answer
``--help`` and to find the recipes as package data.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from ..helpers import installed_venv, outside_environment

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return installed_venv(tmp_path_factory.mktemp("install"), "invoke", "rich", deps=False)


def _run(venv: Path, *command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command,
        cwd=venv.parent,
        env=outside_environment(),
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def test_the_console_script_and_python_m_answer(venv: Path) -> None:
    for command in (
        (str(venv / "bin" / "tritonpt"), "--list"),
        (str(venv / "bin" / "python"), "-m", "tritonpt", "--list"),
    ):
        done = _run(venv, *command)
        assert done.returncode == 0, done.stderr
        for task in ("export", "validate", "build-backend", "build-image", "doctor", "serve"):
            assert task in done.stdout
    done = _run(venv, str(venv / "bin" / "tritonpt"), "--help", "build-backend")
    assert done.returncode == 0, done.stderr
    assert "--sources" in done.stdout


def test_the_recipes_are_package_data_and_the_ci_programs_are_not(venv: Path) -> None:
    script = (
        "import importlib.util; from tritonpt import image; "
        "print(image.recipe_path('ngc')); print(image.recipe_path('pytorch')); "
        "assert importlib.util.find_spec('tritonpt_ci') is None, 'tritonpt_ci is in the wheel'"
    )
    done = _run(venv, str(venv / "bin" / "python"), "-c", script)
    assert done.returncode == 0, done.stderr
    paths = [Path(line) for line in done.stdout.split()]
    for path in paths:
        assert path.is_file()
        assert venv in path.parents, f"{path} is not inside the installed package"
    assert not any(ROOT in path.parents for path in paths)
