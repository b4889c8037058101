"""What pytorch_backend r26.05's PT2 path does that export and the validator refuse: each held against the real
backend, so that the day a pinned update fixes one, this fails and says which refusal to lift.

Both are written up for NVIDIA in docs/upstream/ (config, request, expected and seen).
"""

from __future__ import annotations

import concurrent.futures
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from tritonpt import client, reference
from tritonpt.backend import BuiltBackend
from tritonpt.repository import ModelDir, read_config, render_config
from tritonpt.server import LocalServer, TritonFlags

pytestmark = pytest.mark.slow

CONCURRENT = 8


def _serve(repository: Path, tmp_path: Path, built: BuiltBackend, pt2: BuiltBackend) -> LocalServer:
    return LocalServer(
        TritonFlags(model_repository=repository),
        log_path=tmp_path / "tritonserver.log",
        pytorch_backend=built,
        pt2_backend=pt2,
    )


def test_dynamic_batching_returns_the_merged_batch_to_every_request(
    exported_pt2: Path, tmp_path: Path, pytorch_backend: BuiltBackend, pt2_backend: BuiltBackend
) -> None:
    """A5 of the validator (dynamic_batching on a PT2 model): ReadOutputTensors with first_dim_batching false."""
    repository = tmp_path / "repository"
    shutil.copytree(exported_pt2 / "multi_io_pt2", repository / "multi_io_pt2")
    model = ModelDir(root=repository / "multi_io_pt2")
    config = read_config(model.config)
    config.dynamic_batching.max_queue_delay_microseconds = 200_000  # long enough to merge every request
    model.config.write_text(render_config(config), encoding="utf-8")
    ref = reference.load(model)
    largest = max(ref.cases, key=lambda c: c.batch_size)
    names = [i.name for i in ref.inputs]
    outputs = [o.name for o in ref.outputs]
    with _serve(repository, tmp_path, pytorch_backend, pt2_backend) as server:
        server.wait_models_ready(["multi_io_pt2"])

        def one(row: int) -> tuple[int, list[np.ndarray]]:
            inputs = {n: a[row : row + 1] for n, a in zip(names, largest.inputs, strict=True)}
            return row, client.infer(server.endpoints, "grpc", "multi_io_pt2", inputs, outputs)

        with concurrent.futures.ThreadPoolExecutor(CONCURRENT) as pool:
            answers = list(pool.map(one, range(CONCURRENT)))
        merged = client.statistics(server.endpoints, "multi_io_pt2")
    right = sum(
        all(
            got.shape == want[row : row + 1].shape and np.allclose(got, want[row : row + 1], atol=1e-4)
            for got, want in zip(got_all, largest.outputs, strict=True)
        )
        for row, got_all in answers
    )
    assert merged.executions < CONCURRENT, "the batcher merged nothing: this run shows nothing about the bug"
    assert right < CONCURRENT, (
        f"all {CONCURRENT} merged requests came back right: the pinned PT2 backend now splits a dynamic batch. "
        "Let export write dynamic_batching for PT2 models and turn the validator's A005 into a pass."
    )


class Halve(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 0.5 + 1.0


def test_a_static_batch_axis_serves_rows_after_the_first_wrong(
    tmp_path: Path, pytorch_backend: BuiltBackend, pt2_backend: BuiltBackend
) -> None:
    """A9 of the validator: a package exported without a dynamic batch axis, served with max_batch_size 4."""
    repository = tmp_path / "repository"
    version = repository / "static_pt2" / "1"
    version.mkdir(parents=True)
    program = torch.export.export(Halve(), (torch.ones(1, 3),))
    torch._inductor.aoti_compile_and_package(program, package_path=str(version / "model.pt2"))
    (repository / "static_pt2" / "config.pbtxt").write_text(
        'name: "static_pt2"\nplatform: "torch_aoti"\nmax_batch_size: 4\ndefault_model_filename: "model.pt2"\n'
        'input { name: "ARGS[0]" data_type: TYPE_FP32 dims: 3 }\noutput { name: "RESULT" data_type: TYPE_FP32 dims: 3 }\n',
        encoding="utf-8",
    )
    rows = np.arange(12, dtype=np.float32).reshape(4, 3)
    with _serve(repository, tmp_path, pytorch_backend, pt2_backend) as server:
        server.wait_models_ready(["static_pt2"])
        (got,) = client.infer(server.endpoints, "http", "static_pt2", {"ARGS[0]": rows}, ["RESULT"])
    expected = rows * 0.5 + 1.0
    assert np.allclose(got[0], expected[0]), "row 0 is wrong too: something else broke"
    assert not np.allclose(got, expected), (
        "a static-batch package served every row of a batch of 4 right: the pinned PT2 backend now checks or "
        "handles the batch axis. Revisit the validator's A009."
    )
