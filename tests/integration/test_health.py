"""The three ports: HTTP and gRPC live and ready, metrics served as Prometheus text that counts requests."""

from __future__ import annotations

import pytest

from tritonpt import checks
from tritonpt.server.base import Server

from .conftest import Model


def test_live_and_ready(triton: Server, protocol: checks.Protocol) -> None:
    assert checks.live_and_ready(triton.endpoints, protocol) == (True, True)


def test_metrics_count_the_models_requests(triton: Server, model: Model) -> None:
    case = model.reference.cases[0]
    before = checks.metrics(triton.endpoints)
    assert "nv_inference_count" in before, f"no nv_inference_count in {sorted(before)[:20]}"
    checks.infer(
        triton.endpoints,
        "http",
        model.name,
        dict(zip(model.input_names, case.inputs, strict=True)),
        model.output_names,
    )
    after = checks.metrics(triton.endpoints)
    samples = max(case.batch_size, 1)
    assert (
        checks.model_metric(after, "nv_inference_count", model.name)
        - checks.model_metric(before, "nv_inference_count", model.name)
        == samples
    )
    assert (
        checks.model_metric(after, "nv_inference_request_success", model.name)
        - checks.model_metric(before, "nv_inference_request_success", model.name)
        == 1
    )


NO_GPU = "no GPU was handed to this server (none on the host, or --gpus none, or a URL target); runs on GPU runners"


def test_gpu_metrics_on_the_metrics_port(triton: Server, gpus_expected: bool) -> None:
    if not gpus_expected:
        pytest.skip(NO_GPU)
    parsed = checks.metrics(triton.endpoints)
    for name in ("nv_gpu_utilization", "nv_gpu_memory_total_bytes"):
        assert parsed.get(name), (
            f"{name} is missing from {triton.endpoints.metrics_url} although the server has GPUs"
        )
