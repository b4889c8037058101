"""The package beside today's torch: the wheel installed with torch 2.15 (what a team that upgraded torch has),
then `tritonpt export` (TorchScript and PT2) and `tritonpt check`, which builds the official backend against that
torch (C++20: its headers refuse C++17) and serves both models with parity against that torch's eager outputs.

torch 2.15 warns on every TorchScript call; the user is told once, in one line that names the way forward. The
newest torch of versions.toml [compat] is the one installed, so the compat session's environment, exports and PT2
build are the ones reused from the caches.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tritonpt.versions import VERSIONS

from ..helpers import installed_venv, outside_environment

pytestmark = pytest.mark.slow

NEWEST = VERSIONS.newest_compat


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pins = (
        f"torch=={NEWEST.torch}",
        f"torchvision=={NEWEST.torchvision}",
        f"cmake=={VERSIONS.backend.cmake}",
    )
    return installed_venv(tmp_path_factory.mktemp("torch-today"), *pins, deps=True)


def _tritonpt(venv: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(venv / "bin" / "tritonpt"), *args],
        cwd=venv.parent,
        env=outside_environment(),
        capture_output=True,
        text=True,
        check=False,
        timeout=1500,
    )


def test_the_wheel_exports_checks_and_serves_beside_the_newest_torch(venv: Path) -> None:
    torch = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import torch; print(torch.__version__)"],
        capture_output=True, text=True, check=True, env=outside_environment(),
    ).stdout.strip()  # fmt: skip
    assert torch.startswith(NEWEST.torch), torch
    exported = _tritonpt(venv, "export", "--only", "multi_io", "--format", "both", "--repository", "repo")
    said = exported.stdout + exported.stderr
    assert exported.returncode == 0, said[-4000:]
    assert said.count("deprecates TorchScript") == 1, said[-4000:]
    assert "FutureWarning" not in said
    assert "`tritonpt export --format pt2`" in said
    reference = json.loads((venv.parent / "repo" / "multi_io" / "reference.json").read_text(encoding="utf-8"))
    assert reference["provenance"]["torch_version"] == torch  # the eager outputs of this torch

    checked = _tritonpt(venv, "check", "--repository", "repo", "--reports", "reports")
    said = checked.stdout + checked.stderr
    assert checked.returncode == 0, said[-4000:]
    assert "Traceback" not in said
    summary = json.loads((venv.parent / "reports" / "summary.json").read_text(encoding="utf-8"))
    models = summary["models"]
    assert sorted(models) == ["multi_io", "multi_io_pt2"]
    for model in models.values():
        assert model["pytorch_backend"]["torch"] == torch  # built against this torch
    assert {row["model"] for row in summary["parity"] if row["ok"]} == {"multi_io", "multi_io_pt2"}
    assert all(row["ok"] for row in summary["parity"])
