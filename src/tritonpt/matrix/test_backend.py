"""Backend load and platform: every model READY, served by the pytorch backend, with the committed config."""

from __future__ import annotations

import pytest
from google.protobuf import text_format
from tritonclient.grpc.model_config_pb2 import ModelConfig, ModelInstanceGroup

from tritonpt import assertions, client
from tritonpt.backend import PT2_LIBRARY, PT2_NAME
from tritonpt.client import ModelState
from tritonpt.options import Pt2Build
from tritonpt.reporting.report import Report
from tritonpt.repository import PLATFORM, PT2_PLATFORM, platform_of
from tritonpt.server.base import Server
from tritonpt.versions import VERSIONS

from .models import Model


@pytest.fixture(scope="module")
def index(triton: Server, models: list[Model]) -> dict[str, ModelState]:
    """The repository index, asked once for every model (once per model would grow as the square of their number)."""
    return triton.model_states([m.name for m in models])


def test_model_is_ready_in_the_repository_index(index: dict[str, ModelState], model: Model) -> None:
    state = index.get(model.name)
    assert state is not None, f"{model.name} is not in the server's repository index: it was never loaded"
    assert state.ready, state.describe()


def test_served_by_the_pytorch_backend(
    triton: Server, model: Model, report: Report, strict_backend: bool
) -> None:
    config = triton.model_config(model.name)
    assert config.backend == _backend_name(triton, model), (
        f"{model.name} ({config.platform}) is served by backend {config.backend!r}"
    )
    runtime = triton.model_runtime(model.name)
    report.runtimes[model.name] = runtime.library
    report.devices[model.name] = "gpu" if assertions.served_on_gpu(config) else "cpu"
    if strict_backend:
        assert runtime.official, (
            f"{model.name} is served by {runtime.library} (runtime {runtime.runtime!r}), not the official "
            "libtriton_pytorch.so (or its PT2 build). Run `invoke doctor --image ...` for an image; --no-strict-backend records "
            "without requiring it."
        )


def _backend_name(triton: Server, model: Model) -> str:
    """The backend a model must be served by: ``pytorch``, except torch_aoti on a server before Triton 26.03,
    whose core takes that platform only under another backend name: the PT2 build under its second name
    (backend.PT2_NAME), as we install it (a server we started, or one `invoke serve` started at a URL)."""
    if model.model_format == "torchscript":
        return "pytorch"
    if triton.pt2_origin() is not None:
        return PT2_NAME
    version = str(client.server_metadata(triton.endpoints).get("version", ""))
    return "pytorch" if VERSIONS.pt2.native(version) else PT2_NAME


def _interface(config: ModelConfig, folder: str) -> str:
    """The parts of a config that define the model's interface, as Triton reads them (what core fills in where the
    file leaves it out: the name from its folder, the platform of a ``backend: "pytorch"`` config), as text for a
    readable diff."""
    trimmed = ModelConfig(
        name=config.name or folder, platform=platform_of(config), max_batch_size=config.max_batch_size
    )
    trimmed.input.extend(config.input)
    trimmed.output.extend(config.output)
    for tensor in (*trimmed.input, *trimmed.output):
        # Triton fills defaults it derives (format, reshape...) that the committed file leaves out.
        kept = (tensor.name, tensor.data_type, list(tensor.dims))
        tensor.Clear()
        tensor.name, tensor.data_type = kept[0], kept[1]
        tensor.dims.extend(kept[2])
    return str(text_format.MessageToString(trimmed))


def test_platform_and_interface_agree_with_the_committed_config(triton: Server, model: Model) -> None:
    served = triton.model_config(model.name)
    assert served.platform == (PT2_PLATFORM if model.model_format == "pt2" else PLATFORM)
    assert _interface(served, model.name) == _interface(model.config, model.name)


def test_a_pt2_model_is_served_by_the_pt2_build(
    triton: Server, pt2_any: Model, report: Report, pt2_build: Pt2Build
) -> None:
    """The report names the build that serves torch_aoti models (pytorch_backend r26.05, stock or with our
    patches, under the second name on server 2.51.0); TorchScript ones keep the r25.10 build, in the same server."""
    model = pt2_any
    origin = triton.pt2_origin()
    if origin is None:
        pytest.skip(
            "this server serves torch_aoti itself (Triton 26.03 or later), or its runner cannot tell the build "
            "(a server at a URL: test_statistics.py names the build by what it does)"
        )
    assert origin.ref == VERSIONS.pt2.build.pytorch_backend.ref
    wanted = f"+{VERSIONS.pt2.build.patch_set}" if pt2_build == "patched" else ""
    assert origin.patches == wanted, f"--pt2-build {pt2_build}, served by pytorch_backend {origin.build}"
    assert triton.model_runtime(model.name).library == PT2_LIBRARY
    assert "pt2 backend" in report.environment


def test_instance_groups_resolve_to_gpu(triton: Server, model: Model, gpus_expected: bool) -> None:
    if not gpus_expected:
        pytest.skip("no GPU was handed to this server; on GPU runners KIND_AUTO must resolve to KIND_GPU")
    if any(group.kind == ModelInstanceGroup.KIND_CPU for group in model.config.instance_group):
        pytest.skip(f"{model.name} asks for KIND_CPU in its config")
    served = triton.model_config(model.name)
    kinds = [ModelInstanceGroup.Kind.Name(group.kind) for group in served.instance_group]
    assert assertions.served_on_gpu(served), f"{model.name} runs on {kinds} although the server has GPUs"
