"""Backend load and platform: every model READY, served by the pytorch backend, with the committed config."""

from __future__ import annotations

import pytest
from google.protobuf import text_format
from tritonclient.grpc.model_config_pb2 import ModelConfig, ModelInstanceGroup

from tritonpt import checks
from tritonpt.report import Report
from tritonpt.server.base import Server

from .matrix import Model


def test_model_is_ready_in_the_repository_index(triton: Server, model: Model) -> None:
    state = triton.model_states([model.name])[model.name]
    assert state.ready, state.describe()


def test_served_by_the_pytorch_backend(
    triton: Server, model: Model, report: Report, strict_backend: bool
) -> None:
    config = triton.model_config(model.name)
    assert config.backend == "pytorch"
    runtime = triton.model_runtime(model.name)
    report.runtimes[model.name] = runtime.library
    report.devices[model.name] = "gpu" if checks.served_on_gpu(config) else "cpu"
    if strict_backend:
        assert runtime.official, (
            f"{model.name} is served by {runtime.library} (runtime {runtime.runtime!r}), not the official "
            "libtriton_pytorch.so. Run `invoke doctor --image ...` for an image; --no-strict-backend records "
            "without requiring it."
        )


def _interface(config: ModelConfig) -> str:
    """The parts of a config that define the model's interface, as text for a readable diff."""
    trimmed = ModelConfig(name=config.name, platform=config.platform, max_batch_size=config.max_batch_size)
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
    assert served.platform == "pytorch_libtorch"
    assert _interface(served) == _interface(model.config)


def test_instance_groups_resolve_to_gpu(triton: Server, model: Model, gpus_expected: bool) -> None:
    if not gpus_expected:
        pytest.skip("no GPU was handed to this server; on GPU runners KIND_AUTO must resolve to KIND_GPU")
    if any(group.kind == ModelInstanceGroup.KIND_CPU for group in model.config.instance_group):
        pytest.skip(f"{model.name} asks for KIND_CPU in its config")
    served = triton.model_config(model.name)
    kinds = [ModelInstanceGroup.Kind.Name(group.kind) for group in served.instance_group]
    assert checks.served_on_gpu(served), f"{model.name} runs on {kinds} although the server has GPUs"
