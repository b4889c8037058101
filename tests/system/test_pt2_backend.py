"""pytorch_backend r26.05's PT2 path, our patched build (r26.05+tritonpt.1, src/tritonpt/backend/patches/r26.05/),
for each behaviour written up in docs/upstream/: each test shows its patch's fix, against the real server 2.51.0
with the PT2 build under its second name.

The stock build's bugs (NVIDIA's sources as pinned, what an NGC image of Triton 26.03 or later runs) are held by
`nox -s triton-qa`: docs/upstream/qa/ holds each of these behaviours as a test in the form of NVIDIA's
qa/L0_torch_aoti, run on both builds; on stock each must fail (showing its bug, so that the day a pinned update
fixes one the session fails, naming the test and the patch it needs), on the patched build each must pass. The
stock build's crash on a mismatched output type is also tests/system/test_crash_hunt.py's.
"""

from __future__ import annotations

import concurrent.futures
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
from tritonclient.grpc.model_config_pb2 import DataType, ModelConfig
from tritonclient.utils import InferenceServerException

from tritonpt import client, perf_analyzer, reference, tune
from tritonpt.backend import BuiltBackend
from tritonpt.errors import TritonPtError, ValidationError
from tritonpt.repository import ModelDir, read_config, render_config
from tritonpt.server import LocalServer, TritonFlags
from tritonpt.tune import trials

from ..helpers import compiled_package

pytestmark = pytest.mark.slow

CONCURRENT = 8
MODEL = "multi_io_pt2"


@pytest.fixture
def pt2(pt2_patched: BuiltBackend) -> BuiltBackend:
    """The PT2 build under test: ours."""
    assert pt2_patched.flavor, pt2_patched.describe()
    return pt2_patched


def _serve(repository: Path, tmp_path: Path, built: BuiltBackend, pt2: BuiltBackend) -> LocalServer:
    return LocalServer(
        TritonFlags(model_repository=repository),
        log_path=tmp_path / f"tritonserver-{repository.name}.log",
        pytorch_backend=built,
        pt2_backend=pt2,
    )


def _multi_io(
    exported_pt2: Path, tmp_path: Path, change: Callable[[ModelConfig], None], *, folder: str = "repository"
) -> ModelDir:
    """multi_io_pt2 as exported, in a repository of its own, its config changed by ``change``."""
    repository = tmp_path / folder
    shutil.copytree(exported_pt2 / MODEL, repository / MODEL)
    model = ModelDir(root=repository / MODEL)
    config = read_config(model.config)
    change(config)
    model.config.write_text(render_config(config), encoding="utf-8")
    return model


def _no_warmup(config: ModelConfig) -> None:
    """A failing warmup can kill server 2.51.0 at load, whatever the backend (test below): these run the model later."""
    config.ClearField("model_warmup")


def _largest(model: ModelDir) -> tuple[dict[str, np.ndarray], list[str], reference.Case]:
    ref = reference.load(model)
    case = max(ref.cases, key=lambda c: c.batch_size)
    return (
        dict(zip([i.name for i in ref.inputs], case.inputs, strict=True)),
        [o.name for o in ref.outputs],
        case,
    )


# --- 0001: dynamic batching -----------------------------------------------------------------------------------


def test_dynamic_batching(
    exported_pt2: Path, tmp_path: Path, pytorch_backend: BuiltBackend, pt2: BuiltBackend
) -> None:
    """A005 (docs/upstream/pt2-dynamic-batching.md): stock reads a merged batch's outputs with first_dim_batching
    false, every request gets the whole batch; patched splits it."""

    def merge(config: ModelConfig) -> None:
        config.dynamic_batching.max_queue_delay_microseconds = 200_000  # long enough to merge every request

    model = _multi_io(exported_pt2, tmp_path, merge)
    inputs, outputs, largest = _largest(model)
    with _serve(model.root.parent, tmp_path, pytorch_backend, pt2) as server:
        server.wait_models_ready([MODEL])

        def one(row: int) -> tuple[int, list[np.ndarray]]:
            rows = {n: a[row : row + 1] for n, a in inputs.items()}
            return row, client.infer(server.endpoints, "grpc", MODEL, rows, outputs)

        with concurrent.futures.ThreadPoolExecutor(CONCURRENT) as pool:
            answers = list(pool.map(one, range(CONCURRENT)))
        merged = client.statistics(server.endpoints, MODEL)
    right = sum(
        all(
            got.shape == want[row : row + 1].shape and np.allclose(got, want[row : row + 1], atol=1e-4)
            for got, want in zip(got_all, largest.outputs, strict=True)
        )
        for row, got_all in answers
    )
    assert merged.executions < CONCURRENT, "the batcher merged nothing: this run shows nothing about the fix"
    assert right == CONCURRENT, f"{pt2.describe()}: {right} of {CONCURRENT} merged requests came back right"


# --- 0002: a static batch axis ---------------------------------------------------------------------------------


class Halve(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 0.5 + 1.0


def test_a_static_batch_axis(tmp_path: Path, pytorch_backend: BuiltBackend, pt2: BuiltBackend) -> None:
    """A009 (docs/upstream/pt2-static-batch.md): a package exported without a dynamic batch axis, served with
    max_batch_size 4: stock answers a batch of 4 wrong and without an error; patched refuses it, naming why."""
    repository = tmp_path / "repository"
    version = repository / "static_pt2" / "1"
    version.mkdir(parents=True)
    compiled_package(Halve(), (torch.ones(1, 3),), version / "model.pt2")
    (repository / "static_pt2" / "config.pbtxt").write_text(
        'name: "static_pt2"\nplatform: "torch_aoti"\nmax_batch_size: 4\ndefault_model_filename: "model.pt2"\n'
        'input { name: "ARGS[0]" data_type: TYPE_FP32 dims: 3 }\noutput { name: "RESULT" data_type: TYPE_FP32 dims: 3 }\n',
        encoding="utf-8",
    )
    rows = np.arange(12, dtype=np.float32).reshape(4, 3)
    expected = rows * 0.5 + 1.0
    with _serve(repository, tmp_path, pytorch_backend, pt2) as server:
        server.wait_models_ready(["static_pt2"])
        (one,) = client.infer(server.endpoints, "http", "static_pt2", {"ARGS[0]": rows[:1]}, ["RESULT"])
        assert np.allclose(one, expected[:1]), "batch 1, the package's own, is wrong: something else broke"
        with pytest.raises(InferenceServerException) as refused:
            client.infer(server.endpoints, "http", "static_pt2", {"ARGS[0]": rows}, ["RESULT"])
    assert refused.value.status() == "400"
    assert "has batch size 1 for a batch of 4: the package computes a fixed batch size" in str(refused.value)


# --- 0003: an output data type other than the package's ------------------------------------------------------


def _fp16_output(config: ModelConfig) -> None:
    _no_warmup(config)
    config.output[0].data_type = DataType.TYPE_FP16  # the package returns FP32


def test_an_output_data_type_other_than_the_packages(
    exported_pt2: Path, tmp_path: Path, pytorch_backend: BuiltBackend, pt2: BuiltBackend
) -> None:
    """A011 (docs/upstream/pt2-output-dtype-crash.md): stock's error for it is a use-after-free and the server
    dies (SIGSEGV); patched answers with that error, and the server lives on."""
    model = _multi_io(exported_pt2, tmp_path, _fp16_output)
    inputs, outputs, _ = _largest(model)
    with _serve(model.root.parent, tmp_path, pytorch_backend, pt2) as server:
        server.wait_models_ready([MODEL])
        for protocol in client.PROTOCOLS:  # twice: the first error leaves nothing broken behind
            with pytest.raises((InferenceServerException, OSError)) as failed:
                client.infer(server.endpoints, protocol, MODEL, inputs, outputs)
            said = str(failed.value)
            assert (
                'output tensor "RESULT[0]" has datatype TYPE_FP32 but model configuration expects TYPE_FP16'
                in said
            )
            assert client.is_live(server.endpoints), f"the server died after answering {said}"


WARMUP_STARTS = 3
"""Starts of a server whose model fails its warmup. Whether 2.51.0 dies of it is a race whose rate depends on the
machine (docs/upstream/core-warmup-failure.md: 19 of 24 starts died on one 2-core machine, 0 of 8 on CI's), so
the test holds what does not vary, and reports how each start ended."""


def test_a_failing_warmup_refuses_the_model_and_may_kill_server_2_51_0(
    exported_pt2: Path, tmp_path: Path, pytorch_backend: BuiltBackend, pt2_patched: BuiltBackend
) -> None:
    """Not the backend's: with the model_warmup export writes, the same model fails its warmup at load, and
    server 2.51.0's core may not survive it (docs/upstream/core-warmup-failure.md: ~TritonModelInstance after the
    failed warmup, SIGSEGV in InstanceQueue::DecrementConsumerCount; a TorchScript model does the same). So on the
    patched build A011 stays an error, and the differential's mutation has no warmup.

    Each start must refuse the model, and end in SIGSEGV or live on and answer, having named the warmup's error;
    any other end (a model that loads, another signal, a server that hangs) fails."""

    def fp16_with_warmup(config: ModelConfig) -> None:
        config.output[0].data_type = DataType.TYPE_FP16

    model = _multi_io(exported_pt2, tmp_path, fp16_with_warmup)
    assert read_config(model.config).model_warmup, "export wrote no model_warmup: this shows nothing"
    ends: list[str] = []
    for _ in range(WARMUP_STARTS):
        server = _serve(model.root.parent, tmp_path, pytorch_backend, pt2_patched)
        try:
            with pytest.raises(TritonPtError) as failed:  # the start, or the model's load, reports it
                _start_and_load(server)
            ended = server.exit_state(wait=5.0)
            if ended is None:
                assert client.is_live(server.endpoints), (
                    f"the server neither died nor answers: {failed.value}"
                )
        finally:
            server.stop()
        assert ended is None or "SIGSEGV" in ended, f"a start ended otherwise: {ended}"
        if ended is None:
            assert "failed to run warmup sample" in str(failed.value), failed.value
        ends.append(ended or "lived on, the model refused")
    print(f"server 2.51.0 after a failed warmup, {len(ends)} starts: {ends}")


def _start_and_load(server: LocalServer) -> None:
    server.start()
    server.wait_models_ready([MODEL])


# --- 0004: parameters -------------------------------------------------------------------------------------------


def _parameters(**values: str) -> Callable[[ModelConfig], None]:
    def change(config: ModelConfig) -> None:
        for key, value in values.items():
            config.parameters[key].string_value = value

    return change


def test_a_bad_boolean_parameter(
    exported_pt2: Path, tmp_path: Path, pytorch_backend: BuiltBackend, pt2: BuiltBackend
) -> None:
    """A007 (docs/upstream/pt2-parameters.md): stock never reads its parameters and loads INFERENCE_MODE "maybe";
    patched refuses it at load, as the TorchScript path does (C017)."""
    model = _multi_io(exported_pt2, tmp_path, _parameters(INFERENCE_MODE="maybe"))
    with _serve(model.root.parent, tmp_path, pytorch_backend, pt2) as server:
        server.wait_ready()
        state = server.model_states([MODEL])[MODEL]
    assert not state.ready
    assert "Failed to parse 'INFERENCE_MODE' parameter" in state.reason
    assert "failed to convert 'maybe' to boolean" in state.reason


def test_a_thread_count_beyond_an_int_is_refused_at_load(
    exported_pt2: Path, tmp_path: Path, pytorch_backend: BuiltBackend, pt2_patched: BuiltBackend
) -> None:
    """C019 on the patched PT2 path: std::stoi's out_of_range is caught there (the TorchScript path aborts)."""
    model = _multi_io(exported_pt2, tmp_path, _parameters(INTRA_OP_THREAD_COUNT="99999999999"))
    with _serve(model.root.parent, tmp_path, pytorch_backend, pt2_patched) as server:
        server.wait_ready()
        state = server.model_states([MODEL])[MODEL]
        assert server.is_alive()
    assert not state.ready
    assert "stoi" in state.reason or "out of range" in state.reason or "INTRA_OP_THREAD_COUNT" in state.reason


def _threads(pid: int) -> int:
    found = re.search(r"^Threads:\s+(\d+)", Path(f"/proc/{pid}/status").read_text(encoding="utf-8"), re.M)
    assert found is not None
    return int(found.group(1))


def test_a_thread_count_is_applied(
    exported_pt2: Path, tmp_path: Path, pytorch_backend: BuiltBackend, pt2: BuiltBackend
) -> None:
    """INTRA_OP_THREAD_COUNT above this host's cores: patched grows libtorch's intra-op pool to it (the server's
    thread count after the same requests), stock ignores it. The same model and requests without it are the
    baseline; libtorch's default is at most one thread per core."""
    wanted = (os.cpu_count() or 1) + 4
    seen = {}
    for folder, change in (
        ("without", _no_warmup),
        ("with", _parameters(INTRA_OP_THREAD_COUNT=str(wanted))),
    ):
        model = _multi_io(exported_pt2, tmp_path, change, folder=folder)
        inputs, outputs, _ = _largest(model)
        with _serve(model.root.parent, tmp_path, pytorch_backend, pt2) as server:
            server.wait_models_ready([MODEL])
            for _ in range(20):
                client.infer(server.endpoints, "grpc", MODEL, inputs, outputs)
            assert server.pid is not None
            seen[folder] = _threads(server.pid)
    grown = seen["with"] - seen["without"]
    assert grown >= wanted - (os.cpu_count() or 1), (
        f"INTRA_OP_THREAD_COUNT {wanted}: the server has {seen['with']} threads against {seen['without']} without it"
    )


# --- 0005: statistics -------------------------------------------------------------------------------------------


def test_the_compute_statistics(
    exported_pt2: Path, tmp_path: Path, pytorch_backend: BuiltBackend, pt2: BuiltBackend
) -> None:
    """docs/upstream/pt2-statistics.md: stock reports a request's timestamps out of order (a compute infer longer
    than the requests); patched in order, so the bench can show PT2's split."""
    model = _multi_io(exported_pt2, tmp_path, _no_warmup)
    inputs, outputs, _ = _largest(model)
    with _serve(model.root.parent, tmp_path, pytorch_backend, pt2) as server:
        server.wait_models_ready([MODEL])
        for _ in range(10):
            client.infer(server.endpoints, "grpc", MODEL, inputs, outputs)
        split = client.split(server.endpoints, MODEL)
    assert split.count == 10
    assert split.in_order, split
    assert 0 < split.compute_infer_ns < split.request_ns


# --- The tune, told which build serves ----------------------------------------------------------------------------


class _PastTheFrontDoorError(Exception):
    pass


def test_the_tune_validates_and_serves_a_batching_pt2_model_with_the_build_it_is_told(
    exported_pt2: Path, tmp_path: Path, pt2_patched: BuiltBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`invoke tune --pt2-build patched`: a PT2 model exported with dynamic_batching for the patched build is
    refused at the tune's front door for stock (A005, as `invoke validate` refuses it), and measured when the
    tune is told the patched build serves it."""

    def batching(config: ModelConfig) -> None:
        config.dynamic_batching.max_queue_delay_microseconds = 1000

    model = _multi_io(exported_pt2, tmp_path, batching)
    with pytest.raises(ValidationError, match="A005"):
        tune.run(model.root.parent, MODEL)

    def past(*_: object, **__: object) -> None:
        raise _PastTheFrontDoorError

    with monkeypatch.context() as patch:  # what run() does once the model is accepted: fetch perf_analyzer
        patch.setattr(tune.perf_analyzer, "locate", past)
        with pytest.raises(_PastTheFrontDoorError):
            tune.run(model.root.parent, MODEL, pt2_build="patched")
    config = read_config(model.config)
    settings = tune.Settings.of(config)
    trial = trials.measure(
        model,
        config,
        settings,
        exported=settings,
        varied="exported",
        tool=perf_analyzer.locate(),
        pt2_build="patched",
    )
    assert trial.error is None, trial.error
    assert {p.concurrency for p in trial.points} == {1, settings.filling}
