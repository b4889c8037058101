"""Model control through the repository API: unload, load again, ready again, parity still holds."""

from __future__ import annotations

import time

import pytest
from tritonclient.utils import InferenceServerException

from tritonpt import checks
from tritonpt.parity import compare
from tritonpt.report import Report
from tritonpt.server.base import Server

from .conftest import Model


def test_unload_and_load_again(triton: Server, model: Model, report: Report) -> None:
    with checks.http_client(triton.endpoints) as client:
        try:
            client.unload_model(model.name)
        except InferenceServerException as exc:
            if "explicit model load / unload is not allowed" in str(exc):
                pytest.skip(
                    f"the server at {triton.endpoints.http} runs without --model-control-mode=explicit: {exc}"
                )
            raise
        deadline = time.monotonic() + 60
        while client.is_model_ready(model.name) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not client.is_model_ready(model.name)
        started = time.perf_counter()
        client.load_model(model.name)
        report.timings[f"reload {model.name}"] = time.perf_counter() - started
        assert client.is_model_ready(model.name)
    case = model.reference.cases[0]
    got = checks.infer(
        triton.endpoints,
        "http",
        model.name,
        dict(zip(model.input_names, case.inputs, strict=True)),
        model.output_names,
    )
    gpu = checks.served_on_gpu(triton.model_config(model.name))
    failures = [
        c.describe()
        for c in (
            compare(i.name, a, e, i.tolerance(gpu=gpu))
            for i, a, e in zip(model.reference.outputs, got, case.outputs, strict=True)
        )
        if not c.ok
    ]
    assert not failures, "\n".join(failures)
