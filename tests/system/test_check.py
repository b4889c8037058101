"""`tritonpt check` as a team runs it in its own repository: the wheel installed into a fresh venv beside today's
torch (the newest of versions.toml [compat], 2.15: what a team that upgraded torch has), in a folder with no
checkout, on a module of the team's own. The backend is built against that torch (C++20 from torch 2.14 on), the
reference outputs are its eager run's, and TorchScript's deprecation (a warning on every torch.jit call in 2.15)
is told once, in one line that names the way forward.

Green: ``tritonpt export --model my_models:build && tritonpt check`` exits 0 and writes the reports, the same
checks (by id) as this checkout's ``python -m tritonpt.matrix`` (what ``nox -s integration`` runs) on the same
repository. Red: the same repository with its model file replaced by another export's (other weights, the
references left as they were) exits non-zero, and its junit.xml names the parity checks that failed.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tritonpt.versions import VERSIONS

from ..helpers import ROOT, USER_MODULE, installed_venv, matrix_command, outside_environment
from . import preloaded

pytestmark = pytest.mark.slow


NEWEST = VERSIONS.newest_compat


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pins = (
        f"torch=={NEWEST.torch}",
        f"torchvision=={NEWEST.torchvision}",
        f"cmake=={VERSIONS.backend.cmake}",
    )
    return installed_venv(tmp_path_factory.mktemp("check"), *pins, deps=True)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A team's folder: its own module, nothing of this checkout."""
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "my_models.py").write_text(USER_MODULE, encoding="utf-8")
    assert ROOT not in folder.parents
    return folder


def _tritonpt(venv: Path, project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(venv / "bin" / "tritonpt"), *args],
        cwd=project,
        env=outside_environment(),
        capture_output=True,
        text=True,
        check=False,
        timeout=1800,  # a cold cache builds the backend first
    )


def _outcomes(junit: Path) -> dict[str, str]:
    """Each check's id (file::name, the file relative to the package's folder) and its outcome."""
    found = {}
    for case in ET.parse(junit).getroot().iter("testcase"):  # noqa: S314 - our own reports
        failed = case.find("failure") is not None or case.find("error") is not None
        outcome = "failed" if failed else "skipped" if case.find("skipped") is not None else "passed"
        found[f"{case.get('classname')}::{case.get('name')}"] = outcome
    return found


def _export(venv: Path, project: Path, *args: str) -> str:
    done = _tritonpt(venv, project, "export", "--model", "my_models:build", "--name", "scale", *args)
    assert done.returncode == 0, done.stderr
    return done.stdout + done.stderr


def test_check_in_a_teams_own_folder_runs_the_matrix(venv: Path, project: Path, tmp_path: Path) -> None:
    said = _export(venv, project)
    assert said.count("deprecates TorchScript") == 1, said[-4000:]
    assert "FutureWarning" not in said
    assert "`tritonpt export --format pt2`" in said
    reference = json.loads(
        (project / "model_repository" / "scale" / "reference.json").read_text(encoding="utf-8")
    )
    torch = reference["provenance"]["torch_version"]
    assert torch.startswith(NEWEST.torch), torch  # the eager outputs of the team's torch
    done = _tritonpt(venv, project, "check")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    reports = project / "reports"
    for name in ("junit.xml", "summary.md", "summary.json", "tritonserver.log"):
        assert (reports / name).is_file(), f"tritonpt check wrote no {name}: {sorted(reports.iterdir())}"
    installed = _outcomes(reports / "junit.xml")
    assert "passed" in installed.values()
    assert "failed" not in installed.values()
    assert any(name.startswith("tritonpt.matrix.test_parity::test_parity[scale-") for name in installed)
    summary = json.loads((reports / "summary.json").read_text(encoding="utf-8"))
    assert list(summary["models"]) == ["scale"]
    assert summary["models"]["scale"]["pytorch_backend"]["torch"] == torch  # built against the team's torch

    # the same matrix as this checkout's, on the same repository: the same checks, the same outcomes
    here = tmp_path / "checkout-reports"
    ran = preloaded.run_command(matrix_command(project / "model_repository", here), cwd=ROOT, timeout=1800)
    assert ran.returncode == 0, ran.stdout[-4000:]
    assert _outcomes(here / "junit.xml") == installed


def test_check_fails_a_model_that_breaks_parity(venv: Path, project: Path) -> None:
    _export(venv, project)
    _export(venv, project, "--seed", "1", "--repository", "other")  # the same model, other weights
    shutil.copyfile(project / "other/scale/1/model.pt", project / "model_repository/scale/1/model.pt")
    done = _tritonpt(venv, project, "check", "--reports", "red")
    assert done.returncode != 0, done.stdout[-4000:]
    failed = sorted(
        name for name, outcome in _outcomes(project / "red" / "junit.xml").items() if outcome == "failed"
    )
    assert any(name.startswith("tritonpt.matrix.test_parity::test_parity[scale-") for name in failed), failed
    assert "MISMATCH" in done.stdout


ENSEMBLE = """name: "pipeline"
platform: "ensemble"
max_batch_size: 16
input [ { name: "F" data_type: TYPE_FP32 dims: [ 16 ] }, { name: "C" data_type: TYPE_FP32 dims: [ 8 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 8 ] } ]
ensemble_scheduling { step [ { model_name: "multi_io" model_version: -1
  input_map { key: "features" value: "F" } input_map { key: "context" value: "C" }
  output_map { key: "OUTPUT__0" value: "Y" } } ] }
"""


def test_an_ensemble_beside_its_model_is_valid_served_and_named_as_unchecked(
    exported_small: Path, tmp_path: Path
) -> None:
    """Triton's core serves an ensemble (tests/differential: served); the validator had failed it (C003), and the
    matrix then stopped with a traceback for want of its reference data. Now the model is checked, the
    ensemble is loaded, and the run says which it could not check."""
    repository = tmp_path / "repository"
    shutil.copytree(exported_small / "multi_io", repository / "multi_io")
    (repository / "pipeline" / "1").mkdir(parents=True)
    (repository / "pipeline" / "config.pbtxt").write_text(ENSEMBLE, encoding="utf-8")
    ran = preloaded.run_command(matrix_command(repository, tmp_path / "reports"), cwd=ROOT, timeout=1800)
    assert ran.returncode == 0, ran.stdout[-4000:] + ran.stderr[-4000:]
    assert "Traceback" not in ran.stdout + ran.stderr
    assert "Not checked by the matrix" in ran.stdout
    assert "pipeline (reference.json: it does not exist)" in ran.stdout
    outcomes = _outcomes(tmp_path / "reports" / "junit.xml")
    assert any(
        n.startswith("tritonpt.matrix.test_parity::test_parity[multi_io-")
        for n, o in outcomes.items()
        if o == "passed"
    )
