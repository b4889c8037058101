"""tritonpt.doctor.needs: the doctor's answer per model, from what its file calls, for the release asked about.

The files are made here by real torch (traced, then their code rewritten to call an operator of another minor, as a
file of that torch would); the shipped registries are what compat read from each torch. Whether a server refuses
what is predicted is held in `nox -s compat` (tools/tritonpt_ci/compat.py), against the real backend of each minor.
"""

from __future__ import annotations

import zipfile
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from tritonpt import doctor
from tritonpt.doctor.results import Backend, Status
from tritonpt.operators import predict, registry
from tritonpt.versions import VERSIONS

CONFIG = """name: "{name}"
platform: "pytorch_libtorch"
max_batch_size: 0
input [{{ name: "x" data_type: TYPE_FP32 dims: [2, 4, 4] }}]
output [{{ name: "y" data_type: TYPE_FP32 dims: [2, 4, 4] }}]
"""


class _Exp(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.linalg.matrix_exp(x)


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("traced") / "model.pt"
    torch.jit.save(torch.jit.trace(_Exp(), torch.randn(2, 4, 4)), str(path))
    return path


def _repository(tmp_path: Path, traced: Path, calls: str) -> Path:
    """One model, no reference data (a repository made without us), whose file calls ``torch.<calls>``."""
    model = tmp_path / "repository" / "m"
    (model / "1").mkdir(parents=True)
    (model / "config.pbtxt").write_text(CONFIG.format(name="m"), encoding="utf-8")
    with zipfile.ZipFile(traced) as original, zipfile.ZipFile(model / "1" / "model.pt", "w") as copy:
        for item in original.infolist():
            data = original.read(item)
            if "/code/" in item.filename:
                data = data.replace(b"torch.linalg_matrix_exp(", f"torch.{calls}(".encode())
            copy.writestr(item, data)
    return tmp_path / "repository"


def _row(repository: Path, ngc: str) -> doctor.Result:
    results = doctor.check_models(repository, Backend.from_release(VERSIONS.release(ngc)))
    return next(r for r in results if r.name == "model m operators")


@pytest.mark.parametrize(
    ("calls", "ngc", "status"),
    [
        ("linalg_polar", "26.05", Status.FAIL),  # a newer torch's operator on an older release
        ("linalg_polar", "26.08", Status.OK),
        ("cholesky", "26.07", Status.OK),
        ("cholesky", "26.08", Status.FAIL),  # an operator a newer release removed
        ("linalg_matrix_exp", "25.10", Status.OK),
    ],
)
def test_each_release_is_judged_by_what_the_file_calls(
    tmp_path: Path, traced: Path, calls: str, ngc: str, status: Status
) -> None:
    row = _row(_repository(tmp_path, traced, calls), ngc)
    assert row.status is status, row
    release = VERSIONS.release(ngc)
    assert f"standing in for Triton {ngc}'s libtorch {release.backend_torch}" in row.finding
    if status is Status.FAIL:
        assert f"`Unknown builtin op: aten::{calls}.`" in row.finding
        assert "(code/__torch__" in row.finding
        assert "export it again with torch" in row.fix


def test_the_fix_names_the_releases_that_have_it_and_the_torches_that_register_it(
    tmp_path: Path, traced: Path
) -> None:
    polar = _row(_repository(tmp_path / "a", traced, "linalg_polar"), "26.05")
    assert "registered by torch 2.14 to 2.15" in polar.finding
    assert "Serve it on a release whose libtorch has them: Triton 26.08" in polar.fix
    gone = _row(_repository(tmp_path / "b", traced, "cholesky"), "26.08")
    assert "registered by torch 2.8 to 2.13" in gone.finding
    assert "Triton 25.08 to 26.07" in gone.fix


def test_a_measured_pair_is_no_pass_for_a_model_that_calls_what_the_release_lacks(
    tmp_path: Path, traced: Path
) -> None:
    repository = _repository(tmp_path, traced, "linalg_polar")
    (repository / "m" / "reference.json").write_text(
        '{"provenance": {"torch_version": "2.15.0+cu132"}}', encoding="utf-8"
    )
    results = doctor.check_models(repository, Backend.from_release(VERSIONS.release("26.05")))
    rows = {r.name: r for r in results}
    assert rows["model m operators"].status is Status.FAIL
    assert rows["model m torch"].status is not Status.OK, rows["model m torch"]


def test_a_release_whose_libtorch_is_not_stated_is_a_warning_that_says_which_torches_would_serve_it(
    tmp_path: Path, traced: Path
) -> None:
    row = _row(_repository(tmp_path, traced, "linalg_polar"), "26.10")
    assert row.status is Status.WARN
    assert "not stated" in row.finding
    assert "torch 2.14 to 2.15 register every call" in row.finding
    assert "torch 2.8 to 2.13 would refuse it" in row.finding


def test_torchvision_is_served_where_the_backend_links_it_and_refused_where_not() -> None:
    shipped = registry.load()
    assert shipped is not None
    held = shipped.of_minor("2.9")
    assert held is not None
    from tritonpt.operators.calls import Call, Calls  # noqa: PLC0415 - the test's own data

    roi = Calls(
        path=Path("model.pt"),
        format="torchscript",
        calls=(Call(name="torchvision::roi_align", kind="builtin", where="code/__torch__.py:9"),),
    )
    assert predict.predict(roi, held, shipped, torchvision=True).loads
    refused = predict.predict(roi, held, shipped, torchvision=False)
    assert refused.first_refusal == "Unknown builtin op: torchvision::roi_align."
    custom = Calls(
        path=Path("model.pt"),
        format="torchscript",
        calls=(Call(name="myops::fused", kind="builtin", where="x"),),
    )
    said = predict.predict(custom, held, shipped, torchvision=True)
    assert said.loads
    assert [c.name for c in said.custom] == ["myops::fused"]


def test_the_build_here_serves_no_torchvision(tmp_path: Path, traced: Path) -> None:
    repository = _repository(tmp_path, traced, "linalg_matrix_exp")
    here = replace(Backend.from_release(VERSIONS.triton), named=False, torchvision=False)
    rows = [r for r in doctor.check_models(repository, here) if r.name == "model m operators"]
    assert rows[0].status is Status.OK
    assert "the libtorch of the build here" in rows[0].finding


def test_migrate_is_warned_before_it_compiles_and_after(tmp_path: Path, traced: Path) -> None:
    """`tritonpt migrate --ngc 26.08` of a file calling aten::cholesky: before the compile, the operator the
    package may call; after, what a package that does call it would meet at load."""
    model = _repository(tmp_path, traced, "cholesky") / "m" / "1" / "model.pt"
    release = VERSIONS.release("26.08")
    ahead = predict.foresee(model, release, compiled=False)
    assert len(ahead) == 1
    assert "lacks aten::cholesky, which the model calls" in ahead[0]
    assert "`Could not find schema for aten::cholesky.`" in ahead[0]
    assert predict.foresee(model, VERSIONS.release("26.07"), compiled=False) == []
    package = tmp_path / "model.pt2"
    with zipfile.ZipFile(package, "w") as archive:
        node = '{"nodes": [{"name": "buf0", "node": {"target": "aten::cholesky"}}]}'
        archive.writestr("model/data/aotinductor/model/x.wrapper.json", node)
    seen = predict.foresee(package, release, compiled=True)
    assert len(seen) == 1
    assert "`Could not find schema for aten::cholesky.`" in seen[0]
    assert "it would be refused at load" in seen[0]
    assert "not judged" in predict.foresee(model, VERSIONS.release("26.10"), compiled=False)[0]
