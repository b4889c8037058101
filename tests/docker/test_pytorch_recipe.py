"""docker/pytorch.Dockerfile's own backend stage, built for real on an offline stand-in of its devel base.

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

from tritonpt import backend, checks, client, export, reference, repository
from tritonpt.server import LocalServer, TritonFlags
from tritonpt.testing import standin
from tritonpt.versions import VERSIONS

pytestmark = pytest.mark.slow

IN_IMAGE = "/opt/tritonserver/backends/pytorch"


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
            failures = checks.mismatches(
                checks.compare_outputs(expected.outputs, got, case.outputs, gpu=False)
            )
            assert not failures, "\n".join(failures)
    assert json.loads((taken_out.directory / backend.MANIFEST).read_text())["key"] == taken_out.key
