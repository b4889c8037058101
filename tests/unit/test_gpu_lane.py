"""The GPU runners' lane (`nox -s gpu` runs `python -m tritonpt_ci.gpu`): which front doors it runs, in which
order, with what. The lane itself needs a GPU and a registry; these are the commands a GPU runner gets."""

from __future__ import annotations

import sys

from tritonpt.versions import VERSIONS
from tritonpt_ci import gpu

DOOR = [sys.executable, "-m", "tritonpt"]


def test_a_shard_of_the_pytorch_recipe_exports_builds_diagnoses_and_checks_its_part() -> None:
    export, build, doctor, check = gpu.steps(
        ["--recipe", "pytorch", "--shard", "2/3", "--shard-costs", "s.json"]
    )
    tag = f"{VERSIONS.image_repository}:pytorch-ci"
    assert export == [
        *DOOR, "export", "--repository", "model_repository", "--shard", "2/3", "--shard-costs", "s.json",
    ]  # fmt: skip
    assert build == [*DOOR, "build-image", "--recipe", "pytorch", "--tag", tag]
    assert doctor == [*DOOR, "doctor", "--image", tag, "--repository", "model_repository"]
    assert check[:3] == [sys.executable, "-m", "tritonpt.matrix"]
    assert check[3:] == [
        "--target", "container", "--image", tag, "--gpus", "all", "--strict-backend",
        "--shard", "2/3", "--shard-costs", "s.json",
    ]  # fmt: skip


def test_the_ngc_recipe_is_the_default_and_a_users_repository_is_checked_as_it_is() -> None:
    """Nothing is exported into a repository of the user's (as the matrix's --export-builtin has it)."""
    build, doctor, check = gpu.steps(["--repository=mine", "--shard", "1/2"])
    assert build[-3:] == ["ngc", "--tag", f"{VERSIONS.image_repository}:ngc-ci"]
    assert doctor[-2:] == ["--repository", "mine"]
    assert check[-3:] == ["--repository=mine", "--shard", "1/2"]
