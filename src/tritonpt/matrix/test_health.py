"""The three ports: HTTP and gRPC live and ready, metrics served as Prometheus text that counts requests."""

from __future__ import annotations

import pytest

from tritonpt import assertions, client
from tritonpt.server.base import Server

from .models import Model


def test_live_and_ready(triton: Server, protocol: client.Protocol) -> None:
    assert client.live_and_ready(triton.endpoints, protocol) == (True, True)


def test_metrics_count_the_models_requests(triton: Server, model: Model) -> None:
    case = model.reference.cases[0]
    before = client.metrics(triton.endpoints)
    assert "nv_inference_count" in before, f"no nv_inference_count in {sorted(before)[:20]}"
    client.infer(
        triton.endpoints,
        "http",
        model.name,
        dict(zip(model.input_names, case.inputs, strict=True)),
        model.output_names,
    )
    # The backend reports a request's statistics after its response leaves: the counters settle a moment later.
    samples = max(case.batch_size, 1)
    for metric, sent in (("nv_inference_count", samples), ("nv_inference_request_success", 1)):
        start = client.model_metric(before, metric, model.name)
        settled = assertions.settled_metric(triton.endpoints, metric, model.name, expected=start + sent)
        assert settled - start == sent, f"{metric} rose by {settled - start}, {sent} were sent"


NO_GPU = "no GPU was handed to this server (none on the host, or --gpus none, or a URL target); runs on GPU runners"


def test_gpu_metrics_on_the_metrics_port(triton: Server, gpus_expected: bool) -> None:
    if not gpus_expected:
        pytest.skip(NO_GPU)
    parsed = client.metrics(triton.endpoints)
    for name in ("nv_gpu_utilization", "nv_gpu_memory_total_bytes"):
        assert parsed.get(name), (
            f"{name} is missing from {triton.endpoints.metrics_url} although the server has GPUs"
        )
