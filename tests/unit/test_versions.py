"""The single source of versions is complete, consistent, and what the rest of the repository uses."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet

from tritonpt.versions import VERSIONS, markdown_table

ROOT = Path(__file__).resolve().parents[2]


def test_default_release_bundles_pytorch_2_9() -> None:
    assert VERSIONS.triton.ngc == "25.10"
    for release in VERSIONS.triton_releases:
        assert release.backend_torch.startswith("2.9."), release
    assert VERSIONS.release("2.61.0").ngc == "25.09"
    with pytest.raises(ValueError, match=r"supports 25\.10"):
        VERSIONS.release("24.10")


def test_pyproject_ranges_admit_the_pins() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    requirements = {r.split(">")[0].split("=")[0].split("[")[0].strip(): r for r in project["dependencies"]}
    for package, pin in (("torch", VERSIONS.pytorch.torch), ("torchvision", VERSIONS.pytorch.torchvision)):
        spec = SpecifierSet(requirements[package].removeprefix(package))
        assert pin in spec, f"pyproject's {requirements[package]!r} excludes the pin {pin}"
    assert f"nvidia-pytriton=={VERSIONS.embedded.pytriton}" in project["dependencies"]


def test_build_args_name_every_version() -> None:
    args = VERSIONS.build_args()
    assert args["TRITON_IMAGE"] == "nvcr.io/nvidia/tritonserver:25.10-pyt-python-py3"
    assert args["TORCH_VERSION"] == VERSIONS.pytorch.torch
    assert args["PYTORCH_IMAGE"] == VERSIONS.pytorch.image
    assert all(value for value in args.values())


def test_readme_table_is_generated_from_the_source() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    start, end = "<!-- versions:start -->\n", "<!-- versions:end -->"
    assert start in readme
    assert end in readme
    table = readme.split(start, 1)[1].split(end, 1)[0]
    assert table == markdown_table(VERSIONS), (
        "README's version table is stale: paste `python -m tritonpt.versions`"
    )
