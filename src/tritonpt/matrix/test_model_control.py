"""Model control through the repository API: unload, load again, ready again, parity still holds."""

from __future__ import annotations

import time

import pytest
from tritonclient.utils import InferenceServerException

from tritonpt import assertions, client
from tritonpt.reporting.report import Report
from tritonpt.server.base import Server

from .models import Model


def test_unload_and_load_again(triton: Server, model: Model, report: Report) -> None:
    with client.http(triton.endpoints) as http:
        try:
            triton.unload_model(model.name)  # an upload of this run: one it loads again
        except InferenceServerException as exc:
            if "explicit model load / unload is not allowed" in str(exc):
                pytest.skip(
                    f"the server at {triton.endpoints.http} runs without --model-control-mode=explicit: {exc}"
                )
            raise
        unloaded = client.poll_until(lambda: None if http.is_model_ready(model.name) else True, timeout=60)
        assert unloaded, f"{model.name} was still ready 60 s after it was unloaded"
        client.forget_answered(
            triton.endpoints, model.name
        )  # its statistics start again, from its warmup runs
        started = time.perf_counter()
        triton.load_model(model.name)  # from the server's repository, or from this run's upload
        report.timings[f"reload {model.name}"] = time.perf_counter() - started
        assert http.is_model_ready(model.name)
    case = model.reference.cases[0]
    got = client.infer(
        triton.endpoints,
        "http",
        model.name,
        dict(zip(model.input_names, case.inputs, strict=True)),
        model.output_names,
    )
    gpu = assertions.served_on_gpu(triton.model_config(model.name))
    failures = assertions.mismatches(
        assertions.compare_outputs(model.reference.outputs, got, case.outputs, gpu=gpu)
    )
    assert not failures, "\n".join(failures)
