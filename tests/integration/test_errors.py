"""Bad requests get a clean client error over HTTP and gRPC, and the server keeps answering correctly."""

from __future__ import annotations

import numpy as np
import pytest
from tritonclient.utils import InferenceServerException

from tritonpt import checks, client
from tritonpt.server.base import Server

from .matrix import Model

# What a bad request must answer: the client's fault, never a server error (HTTP 500 / gRPC INTERNAL).
CLIENT_ERROR = {"http": "400", "grpc": "StatusCode.INVALID_ARGUMENT"}
NOT_FOUND = {"http": "404", "grpc": "StatusCode.NOT_FOUND"}
_OTHER_DTYPE = {np.dtype(np.float32): np.float64, np.dtype(np.int64): np.float32}


@pytest.fixture(scope="module")
def probe(models: list[Model]) -> Model:
    """The model the faults are sent to: the first that batches, else the first."""
    return next((m for m in models if m.batching), models[0])


@pytest.mark.parametrize("fault", ["wrong-shape", "wrong-dtype", "unknown-input", "unknown-model"])
def test_bad_request_is_a_client_error(
    triton: Server, probe: Model, protocol: client.Protocol, fault: str
) -> None:
    case = probe.reference.cases[0]
    inputs = dict(zip(probe.input_names, case.inputs, strict=True))
    first = probe.input_names[0]
    name = probe.name
    if fault == "wrong-shape":
        inputs[first] = inputs[first][..., np.newaxis]
    elif fault == "wrong-dtype":
        inputs[first] = inputs[first].astype(_OTHER_DTYPE.get(inputs[first].dtype, np.float32))
    elif fault == "unknown-input":
        inputs["NOT_AN_INPUT__9"] = inputs.pop(first)
    else:
        name = "no_such_model"
    with pytest.raises(InferenceServerException) as info:
        client.infer(triton.endpoints, protocol, name, inputs, probe.output_names)
    status = str(info.value.status())
    expected = (NOT_FOUND if fault == "unknown-model" else CLIENT_ERROR)[protocol]
    assert status == expected, (
        f"{fault} over {protocol} answered {status} ({info.value.message()}); a bad request is the client's "
        f"error, {expected}, not a server failure"
    )
    assert info.value.message(), "the server gave an error without a message"

    # Still live, and still right.
    assert client.live_and_ready(triton.endpoints, protocol) == (True, True)
    good = dict(zip(probe.input_names, case.inputs, strict=True))
    got = client.infer(triton.endpoints, protocol, probe.name, good, probe.output_names)
    gpu = checks.served_on_gpu(triton.model_config(probe.name))
    failures = checks.mismatches(checks.compare_outputs(probe.reference.outputs, got, case.outputs, gpu=gpu))
    assert not failures, "\n".join(failures)
