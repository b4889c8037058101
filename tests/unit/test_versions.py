"""The single source of versions is complete, consistent, and what the rest of the repository uses."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet

from tritonpt.versions import NOT_STATED, VERSIONS, markdown_table

ROOT = Path(__file__).resolve().parents[2]
VERSIONS_PAGE = "docs/reference/versions.md"


def test_default_release_bundles_pytorch_2_9() -> None:
    assert VERSIONS.triton.ngc == "25.10"
    assert (VERSIONS.triton.backend_torch or "").startswith("2.9."), VERSIONS.triton
    nine = [r.ngc for r in VERSIONS.triton_releases if (r.backend_torch or "").startswith("2.9.")]
    assert sorted(nine) == ["25.09", "25.10"]  # NGC's only PyTorch 2.9 backends, both snapshots (2.9.0a0)
    assert VERSIONS.release("2.61.0").ngc == "25.09"
    with pytest.raises(ValueError, match=r"supports 25\.10"):
        VERSIONS.release("24.10")


def test_releases_that_serve_torch_aoti_parse_with_their_types() -> None:
    """26.03 to 26.11, as their sources state them: a fact they do not state is None, never a guess."""
    serving = VERSIONS.torch_aoti_releases
    assert [r.ngc for r in serving] == [
        "26.03",
        "26.04",
        "26.05",
        "26.06",
        "26.07",
        "26.08",
        "26.09",
        "26.10",
        "26.11",
    ]
    assert [r.server for r in serving] == [f"2.{n}.0" for n in range(67, 76)]
    for release in VERSIONS.triton_releases:
        assert isinstance(release.serves_torch_aoti, bool), release
        # The field and [pt2]'s native_server say the same: 26.03 (server 2.67.0) on.
        assert release.serves_torch_aoti == VERSIONS.pt2.native(release.server), release
        for value in (release.backend_torch, release.cuda, release.min_driver, release.ubuntu, release.glibc):
            assert value is None or (isinstance(value, str) and value), release
    r2603, r2604, r2605, r2606 = (VERSIONS.release(n) for n in ("26.03", "26.04", "26.05", "26.06"))
    assert r2603.backend_torch == "2.11.0a0+a6c236b9fd"
    assert (r2603.cuda, r2603.min_driver, r2603.ubuntu, r2603.glibc) == (None, None, "24.04", "2.39")
    assert (r2604.cuda, r2604.min_driver, r2604.backend_torch) == ("13.2.1", None, "2.12.0a0+0291f960b6")
    assert (r2605.cuda, r2605.min_driver, r2605.ubuntu) == (None, None, None)
    assert (r2606.cuda, r2606.backend_torch) == ("13.3.0", "2.12.0a0+5aff3928d8")  # NGC PyTorch 26.05
    assert VERSIONS.release("2.72.0").cuda == "13.4.1"
    assert VERSIONS.release("26.07").backend_torch == "2.13.0a0+9186a08b2c"
    assert VERSIONS.release("26.08").backend_torch == "2.14.0a0+4fdf77b940"
    for later in ("26.09", "26.10", "26.11"):  # no branch, no page names their PyTorch container
        assert VERSIONS.release(later).backend_torch is None, later
    assert not VERSIONS.triton.serves_torch_aoti  # the default (25.10) has no PT2 path


def test_not_stated_facts_are_shown_as_such() -> None:
    args = VERSIONS.build_args("26.05")
    assert args["TRITON_CUDA"] == args["TRITON_MIN_DRIVER"] == NOT_STATED
    assert args["TRITON_BACKEND_TORCH"] == "2.12.0a0+0291f960b6"
    rows = {line.split(" | ")[0]: line for line in markdown_table(VERSIONS).splitlines()}
    row = rows["| Triton 26.05"]
    assert "CUDA not stated, driver not stated, Ubuntu not stated (glibc not stated)" in row
    assert "serves torch_aoti, with the stock backend's known bugs (the validator's A rules apply)" in row
    assert "None" not in markdown_table(VERSIONS)
    assert "no torch_aoti" in rows["| Triton 25.10 (default)"]


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


def test_the_versions_page_table_is_generated_from_the_source() -> None:
    page = (ROOT / VERSIONS_PAGE).read_text(encoding="utf-8")
    start, end = "<!-- versions:start -->\n", "<!-- versions:end -->"
    assert start in page
    assert end in page
    table = page.split(start, 1)[1].split(end, 1)[0]
    assert table == markdown_table(VERSIONS), (
        f"{VERSIONS_PAGE}'s version table is stale: paste `python -m tritonpt.versions`"
    )


STATED = ("server", "backend_torch", "cuda", "min_driver", "ubuntu", "python")


def test_every_value_of_the_releases_from_26_06_on_names_its_source() -> None:
    """Each value of 26.06 to 26.11 comes with where it was read; glibc follows from the Ubuntu release."""
    later = [r for r in VERSIONS.triton_releases if r.ngc >= "26.06"]
    assert [r.ngc for r in later] == ["26.06", "26.07", "26.08", "26.09", "26.10", "26.11"]
    for release in later:
        for name in STATED:
            if getattr(release, name):
                assert release.sources.get(name), f"{release.ngc}: {name} without its source"
        assert set(release.sources) <= set(STATED), release.ngc
        if release.glibc:
            assert release.ubuntu == "24.04"
            assert release.glibc == "2.39"


def test_a_release_after_the_newest_pinned_line_is_measured_on_it_and_says_so() -> None:
    assert VERSIONS.stand_in(VERSIONS.release("26.07")) == "r26.05 standing in for r26.07"
    assert VERSIONS.stand_in(VERSIONS.release("26.08")) == "r26.05 standing in for r26.08"
    assert VERSIONS.stand_in(VERSIONS.release("26.05")) is None  # its own line
    assert VERSIONS.stand_in(VERSIONS.release("25.10")) is None
    assert (
        VERSIONS.stand_in(VERSIONS.release("26.11")) is None
    )  # its libtorch is not stated: nothing measured
    assert VERSIONS.measured_as(VERSIONS.release("26.11")) is None


def test_the_pt2_changes_release_notes_state_hold_from_their_release_on() -> None:
    pt2 = VERSIONS.pt2
    assert [pt2.serves_bf16(n) for n in ("26.05", "26.10", "26.11", "27.01")] == [False, False, True, True]
    assert [pt2.batches(n) for n in ("26.06", "26.07", "26.11")] == [False, True, True]
    assert "v2.75.0" in pt2.bf16_source
    assert "v2.71.0" in pt2.batching_source


def test_the_package_installs_beside_every_torch_of_the_table() -> None:
    """pip resolves the wheel beside a team's torch: every torch and torchvision the compatibility table serves
    is in pyproject's ranges (2.8 to 2.15), the project's own pins too."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    requirements = {r.split(">")[0].split("=")[0].split("[")[0].strip(): r for r in project["dependencies"]}
    for entry in VERSIONS.compat:
        for package, version in (("torch", entry.torch), ("torchvision", entry.torchvision)):
            assert version in SpecifierSet(requirements[package].removeprefix(package)), (package, version)
