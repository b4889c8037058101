"""docker/pytorch.Dockerfile's own backend stage, built for real on an offline stand-in of its devel base: the
TorchScript build and the PT2 build beside it.

The stage runs `python3 -m tritonpt.backend` (the code behind `invoke build-backend`) inside the image on the
pinned sources the build context carries. The library it leaves in the image is then taken out and served by
the embedded tritonserver here, so the recipe's backend is checked by inference, not only by its presence.
"""

from __future__ import annotations

import io
import json
import shutil
import tarfile
from pathlib import Path
from typing import Any

import pytest

from tritonpt import assertions, backend, client, export, reference, repository
from tritonpt.server import LocalServer, TritonFlags
from tritonpt.versions import VERSIONS
from tritonpt_ci import standin

pytestmark = pytest.mark.slow

IN_IMAGE = "/opt/tritonserver/backends/pytorch"
PT2_IN_IMAGE = f"/opt/tritonserver/backends/{backend.PT2_NAME}"  # the PT2 build, beside it


@pytest.fixture(scope="module")
def stage(docker_client: Any, standin_base: str) -> str:
    devel = standin.build_pytorch_devel(docker_client, base=standin_base)
    return standin.build_pytorch_backend_stage(docker_client, devel=devel.tag).tag


@pytest.fixture(scope="module")
def taken_out(
    docker_client: Any, stage: str, tmp_path_factory: pytest.TempPathFactory
) -> backend.BuiltBackend:
    """The stage's pytorch/ folder, copied out of a (never started) container into a backend directory."""
    folder = tmp_path_factory.mktemp("recipe-backend")
    container = docker_client.containers.create(stage, command=["true"])
    try:
        stream, _ = container.get_archive(IN_IMAGE)
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as archive:
            archive.extractall(folder, filter="data")
    finally:
        container.remove(force=True)
    shutil.move(folder / "pytorch" / backend.MANIFEST, folder / backend.MANIFEST)
    return backend.BuiltBackend.read(folder)


@pytest.fixture(scope="module")
def pt2_taken_out(
    docker_client: Any, stage: str, tmp_path_factory: pytest.TempPathFactory
) -> backend.BuiltBackend:
    """The stage's pt2/ folder (libtriton_pt2.so and its build.json), laid out as a build of the cache is."""
    folder = tmp_path_factory.mktemp("recipe-pt2")
    container = docker_client.containers.create(stage, command=["true"])
    try:
        stream, _ = container.get_archive(PT2_IN_IMAGE)
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as archive:
            archive.extractall(folder, filter="data")
    finally:
        container.remove(force=True)
    (folder / "pytorch").mkdir()
    shutil.move(folder / backend.PT2_NAME / backend.PT2_LIBRARY, folder / "pytorch" / backend.LIBRARY)
    shutil.move(folder / backend.PT2_NAME / backend.MANIFEST, folder / backend.MANIFEST)
    return backend.BuiltBackend.read(folder)


def test_the_stage_built_the_pt2_backend_beside_it(pt2_taken_out: backend.BuiltBackend) -> None:
    """The stock PT2 build (no PT2_FLAVOR), from versions.toml [pt2]'s pins, against the image's torch."""
    assert dict(pt2_taken_out.commits) == {s.name: s.commit for s in VERSIONS.pt2.build.sources}
    assert (pt2_taken_out.ref, pt2_taken_out.flavor) == (VERSIONS.pt2.build.pytorch_backend.ref, "")
    assert pt2_taken_out.torch_version == backend.Torch.locate().version


def test_the_recipes_pt2_backend_serves_a_pt2_model_with_parity(
    taken_out: backend.BuiltBackend, pt2_taken_out: backend.BuiltBackend, tmp_path: Path
) -> None:
    root = tmp_path / "repository"
    export.export_builtin(["multi_io"], repository=root, model_formats=("pt2",))
    [model] = repository.models(root)
    expected = reference.load(model)
    flags = TritonFlags(model_repository=root)
    with LocalServer(
        flags, log_path=tmp_path / "tritonserver.log", pytorch_backend=taken_out, pt2_backend=pt2_taken_out
    ) as server:
        server.wait_models_ready([model.name])
        for case in expected.cases:
            inputs = {i.name: a for i, a in zip(expected.inputs, case.inputs, strict=True)}
            got = client.infer(
                server.endpoints, "grpc", model.name, inputs, [o.name for o in expected.outputs]
            )
            failures = assertions.mismatches(
                assertions.compare_outputs(expected.outputs, got, case.outputs, gpu=False)
            )
            assert not failures, "\n".join(failures)


def test_the_stage_built_the_pinned_backend_against_the_images_torch(taken_out: backend.BuiltBackend) -> None:
    pins = {s.name: s.commit for s in VERSIONS.backend.sources}
    assert dict(taken_out.commits) == pins
    assert (taken_out.ref, taken_out.variant) == (VERSIONS.backend.pytorch_backend.ref, "cpu")
    assert taken_out.torch_version == backend.Torch.locate().version  # the stand-in carries the host's wheel
    assert taken_out.cmake_version == VERSIONS.backend.cmake


def test_the_recipes_backend_serves_a_model_with_parity(
    taken_out: backend.BuiltBackend, tmp_path: Path
) -> None:
    root = tmp_path / "repository"
    export.export_builtin(["multi_io"], repository=root)
    [model] = repository.models(root)
    expected = reference.load(model)
    flags = TritonFlags(model_repository=root)
    with LocalServer(flags, log_path=tmp_path / "tritonserver.log", pytorch_backend=taken_out) as server:
        server.wait_models_ready(["multi_io"])
        assert server.model_runtime("multi_io").official
        for case in expected.cases:
            inputs = {i.name: a for i, a in zip(expected.inputs, case.inputs, strict=True)}
            got = client.infer(
                server.endpoints, "grpc", "multi_io", inputs, [o.name for o in expected.outputs]
            )
            failures = assertions.mismatches(
                assertions.compare_outputs(expected.outputs, got, case.outputs, gpu=False)
            )
            assert not failures, "\n".join(failures)
    assert json.loads((taken_out.directory / backend.MANIFEST).read_text())["key"] == taken_out.key
