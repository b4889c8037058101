"""The Python stand-in for Triton's pytorch backend, served by a real tritonserver with real TorchScript files.

One server for the module (each start imports torch once per model instance): tiny traced and scripted models
cover the naming conventions, dtypes, batching, parameters and the backend's own load and request errors.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
import torch
import tritonclient.http as httpclient
from tritonclient.grpc import model_config_pb2 as mc
from tritonclient.utils import InferenceServerException

from tritonpt import backend
from tritonpt.errors import ModelLoadError
from tritonpt.repository import render_config
from tritonpt.server import LocalServer, TritonFlags

pytestmark = pytest.mark.slow
Array = npt.NDArray[Any]

GOOD = (
    "traced_add",
    "scripted_two_io",
    "named_index",
    "strict_order",
    "batch_probe",
    "scalar_out",
    "strings",
)
BROKEN = ("uint32_input", "count_mismatch")


class AddOne(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2 + 1


class TwoInTwoOut(torch.nn.Module):
    def forward(self, x: torch.Tensor, count: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x * count.to(x.dtype), x > 0


class DiffSum(torch.nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return a - b, a + b


class Diff(torch.nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a - b


class BatchProbe(torch.nn.Module):
    """Tells each request how many rows the forward it took part in saw."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x * 3, torch.full((x.size(0), 1), x.size(0), dtype=torch.int64)


class Total(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.sum()


class Upper(torch.nn.Module):
    def forward(self, words: list[str]) -> list[str]:
        return [word.upper() for word in words]


def trace(module: torch.nn.Module, *example: torch.Tensor) -> torch.jit.ScriptModule:
    traced: torch.jit.ScriptModule = torch.jit.trace(module, example)  # type: ignore[no-untyped-call]  # torch leaves trace unannotated
    return traced


def io(name: str, data_type: int, dims: list[int]) -> mc.ModelInput:
    return mc.ModelInput(name=name, data_type=data_type, dims=dims)


def out(name: str, data_type: int, dims: list[int]) -> mc.ModelOutput:
    return mc.ModelOutput(name=name, data_type=data_type, dims=dims)


def write_model(
    repository: Path,
    name: str,
    module: torch.jit.ScriptModule,
    *,
    inputs: list[mc.ModelInput],
    outputs: list[mc.ModelOutput],
    max_batch_size: int = 0,
    dynamic_batching_delay_us: int | None = None,
    parameters: dict[str, str] | None = None,
) -> None:
    folder = repository / name
    (folder / "1").mkdir(parents=True)
    module.save(str(folder / "1" / "model.pt"))
    config = mc.ModelConfig(name=name, platform="pytorch_libtorch", max_batch_size=max_batch_size)
    config.input.extend(inputs)
    config.output.extend(outputs)
    if dynamic_batching_delay_us is not None:
        config.dynamic_batching.max_queue_delay_microseconds = dynamic_batching_delay_us
    for key, value in (parameters or {}).items():
        config.parameters[key].string_value = value
    (folder / "config.pbtxt").write_text(render_config(config), encoding="utf-8")


PARAMETERS = {
    "INFERENCE_MODE": "false",
    "DISABLE_OPTIMIZED_EXECUTION": "true",
    "DISABLE_CUDNN": "true",
    "ENABLE_TENSOR_FUSER": "false",
    "ENABLE_JIT_PROFILING": "false",
    "ENABLE_JIT_EXECUTOR": "false",
    "INTRA_OP_THREAD_COUNT": "1",
    "INTER_OP_THREAD_COUNT": "1",
}


def build_repository(repository: Path) -> None:
    fp32, i64 = mc.TYPE_FP32, mc.TYPE_INT64
    write_model(
        repository,
        "traced_add",
        trace(AddOne(), torch.randn(2, 4)),
        inputs=[io("INPUT__0", fp32, [4])],
        outputs=[out("OUTPUT__0", fp32, [4])],
        max_batch_size=8,
        parameters=PARAMETERS,
    )
    # Config order differs from forward(x, count): the forward-argument convention maps by name.
    write_model(
        repository,
        "scripted_two_io",
        torch.jit.script(TwoInTwoOut()),
        inputs=[io("count", i64, [1]), io("x", fp32, [3])],
        outputs=[out("OUTPUT__0", fp32, [3]), out("OUTPUT__1", mc.TYPE_BOOL, [3])],
        max_batch_size=4,
    )
    pair = (torch.randn(2), torch.randn(2))
    write_model(
        repository,
        "named_index",
        trace(DiffSum(), *pair),
        inputs=[io("B__1", fp32, [2]), io("A__0", fp32, [2])],
        outputs=[out("SUM__1", fp32, [2]), out("DIFF__0", fp32, [2])],
    )
    write_model(
        repository,
        "strict_order",
        trace(Diff(), *pair),
        inputs=[io("first__a", fp32, [2]), io("second__b", fp32, [2])],
        outputs=[out("difference", fp32, [2])],
    )
    write_model(
        repository,
        "batch_probe",
        torch.jit.script(BatchProbe()),
        inputs=[io("INPUT__0", fp32, [2])],
        outputs=[out("OUTPUT__0", fp32, [2]), out("OUTPUT__1", i64, [1])],
        max_batch_size=16,
        dynamic_batching_delay_us=500_000,
    )
    write_model(
        repository,
        "scalar_out",
        trace(Total(), torch.randn(3)),
        inputs=[io("INPUT__0", fp32, [3])],
        outputs=[out("OUTPUT__0", fp32, [1])],
    )
    write_model(
        repository,
        "strings",
        torch.jit.script(Upper()),
        inputs=[io("INPUT__0", mc.TYPE_STRING, [-1])],
        outputs=[out("OUTPUT__0", mc.TYPE_STRING, [-1])],
    )
    write_model(
        repository,
        "uint32_input",
        trace(AddOne(), torch.randn(2, 4)),
        inputs=[io("INPUT0", mc.TYPE_UINT32, [4])],
        outputs=[out("OUTPUT__0", fp32, [4])],
        max_batch_size=8,
    )
    write_model(
        repository,
        "count_mismatch",
        trace(Diff(), *pair),
        inputs=[io("INPUT__0", fp32, [2])],
        outputs=[out("OUTPUT__0", fp32, [2])],
    )


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalServer]:
    root = tmp_path_factory.mktemp("backend")
    build_repository(root / "repository")
    flags = TritonFlags(model_repository=root / "repository")
    with LocalServer(flags, log_path=root / "tritonserver.log", cache=root / "cache") as running:
        yield running


@pytest.fixture
def client(server: LocalServer) -> Iterator[httpclient.InferenceServerClient]:
    with httpclient.InferenceServerClient(server.endpoints.http, concurrency=8) as connection:
        yield connection


def infer(
    client: httpclient.InferenceServerClient, model: str, inputs: dict[str, Array], outputs: list[str]
) -> list[Array]:
    wire = {np.dtype(np.float32): "FP32", np.dtype(np.int64): "INT64", np.dtype(np.object_): "BYTES"}
    request = []
    for name, array in inputs.items():
        item = httpclient.InferInput(name, list(array.shape), wire[array.dtype])
        item.set_data_from_numpy(array, binary_data=True)
        request.append(item)
    result = client.infer(model, request, outputs=[httpclient.InferRequestedOutput(o) for o in outputs])
    return [result.as_numpy(name) for name in outputs]


def test_good_models_are_ready_and_broken_ones_report_the_backends_error(server: LocalServer) -> None:
    states = server.wait_models_ready(GOOD, timeout=60)
    assert all(server.model_ready(name) for name in states)
    with pytest.raises(ModelLoadError) as failure:
        server.wait_models_ready([*GOOD, *BROKEN], timeout=60)
    assert set(failure.value.reasons) == set(BROKEN)
    assert (
        "unsupported datatype TYPE_UINT32 for input 'INPUT0' for model 'uint32_input'"
        in failure.value.reasons["uint32_input"]
    )
    assert (
        "unable to load model 'count_mismatch', configuration expects 1 inputs, model provides 2"
        in failure.value.reasons["count_mismatch"]
    )
    assert "Hint:" in str(failure.value)


@pytest.mark.parametrize("model", GOOD)
def test_served_by_the_stand_in(server: LocalServer, model: str) -> None:
    runtime = server.model_runtime(model)
    assert (runtime.platform, runtime.backend, runtime.runtime) == (
        "pytorch_libtorch",
        "pytorch",
        backend.STAND_IN_RUNTIME,
    )
    assert runtime.stand_in


def test_traced_model_matches_eager(client: httpclient.InferenceServerClient) -> None:
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    [got] = infer(client, "traced_add", {"INPUT__0": x}, ["OUTPUT__0"])
    np.testing.assert_array_equal(got, AddOne()(torch.from_numpy(x)).numpy())


def test_forward_argument_names_map_inputs_by_name(client: httpclient.InferenceServerClient) -> None:
    x = np.array([[1.5, -2.0, 0.0], [3.0, 4.0, -1.0]], dtype=np.float32)
    count = np.array([[2], [-3]], dtype=np.int64)
    scaled, positive = infer(client, "scripted_two_io", {"count": count, "x": x}, ["OUTPUT__0", "OUTPUT__1"])
    expected = TwoInTwoOut()(torch.from_numpy(x), torch.from_numpy(count))
    np.testing.assert_array_equal(scaled, expected[0].numpy())
    assert positive.dtype == np.bool_
    np.testing.assert_array_equal(positive, expected[1].numpy())


def test_named_index_maps_inputs_and_outputs_by_suffix(client: httpclient.InferenceServerClient) -> None:
    a = np.array([5.0, 1.0], dtype=np.float32)
    b = np.array([2.0, 3.0], dtype=np.float32)
    total, difference = infer(client, "named_index", {"A__0": a, "B__1": b}, ["SUM__1", "DIFF__0"])
    np.testing.assert_array_equal(difference, a - b)
    np.testing.assert_array_equal(total, a + b)


def test_other_names_fall_back_to_config_order_with_the_backends_warning(
    server: LocalServer, client: httpclient.InferenceServerClient
) -> None:
    first = np.array([5.0, 1.0], dtype=np.float32)
    second = np.array([2.0, 3.0], dtype=np.float32)
    [difference] = infer(client, "strict_order", {"second__b": second, "first__a": first}, ["difference"])
    np.testing.assert_array_equal(difference, first - second)
    log = server.log_tail(100_000)
    assert (
        "input 'first__a' or previous input(s) are neither an input argument to the model 'strict_order' nor "
        "do they follow the <name>__<index> naming convention. Falling back to enforcing strict ordering from "
        "model configuration."
    ) in log


def test_dynamic_batches_run_as_one_forward_and_split_back(
    server: LocalServer, client: httpclient.InferenceServerClient
) -> None:
    rows = [np.full((1, 2), float(i), dtype=np.float32) for i in range(8)]

    def send(x: Array) -> list[Array]:
        return infer(client, "batch_probe", {"INPUT__0": x}, ["OUTPUT__0", "OUTPUT__1"])

    with concurrent.futures.ThreadPoolExecutor(max_workers=len(rows)) as pool:
        results = list(pool.map(send, rows))
    for x, (tripled, seen) in zip(rows, results, strict=True):
        np.testing.assert_array_equal(tripled, x * 3)  # each request got its own rows back
        assert seen.shape == (1, 1)
    assert max(int(seen[0, 0]) for _, seen in results) > 1  # a forward saw several requests' rows
    with httpclient.InferenceServerClient(server.endpoints.http) as stats_client:
        [stats] = stats_client.get_inference_statistics("batch_probe")["model_stats"]
    assert int(stats["inference_count"]) == len(rows)
    assert int(stats["execution_count"]) < int(stats["inference_count"])


def test_parameters_are_applied_and_logged_like_the_cpp_backend(server: LocalServer) -> None:
    log = server.log_tail(100_000)
    for line in (
        "Optimized execution is disabled for model instance 'traced_add'",
        "Inference Mode is disabled for model instance 'traced_add'",
        "cuDNN is disabled for model instance 'traced_add'",
        "Tensor fuser is disabled for model instance 'traced_add'",
        "Jit profiling is disabled for model instance 'traced_add'",
        "Jit executor is disabled for model instance 'traced_add'",
        "Intra op thread count is set to 1 for model instance 'traced_add'",
        "Inter op thread count is set to 1 for model instance 'traced_add'",
        "Inference Mode is enabled for model instance 'batch_probe'",
    ):
        assert line in log


def test_scalar_output_is_a_request_error_and_the_stub_keeps_serving(
    server: LocalServer, client: httpclient.InferenceServerClient
) -> None:
    x = np.ones(3, dtype=np.float32)
    for _ in range(2):
        with pytest.raises(
            InferenceServerException, match=r"output 'OUTPUT__0' is a scalar which is not supported\."
        ):
            infer(client, "scalar_out", {"INPUT__0": x}, ["OUTPUT__0"])
    assert server.model_ready("scalar_out")
    assert server.is_alive()


def test_string_lists_round_trip(client: httpclient.InferenceServerClient) -> None:
    words = np.array([b"triton", b"torch"], dtype=np.object_)
    [got] = infer(client, "strings", {"INPUT__0": words}, ["OUTPUT__0"])
    assert got.tolist() == [b"TRITON", b"TORCH"]
