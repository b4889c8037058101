"""Bad requests get a clean client error over HTTP and gRPC, and the server keeps answering correctly."""

from __future__ import annotations

import numpy as np
import pytest
from tritonclient.utils import InferenceServerException

from tritonpt import client
from tritonpt.server.base import Server

from .models import CLIENT_ERROR, NOT_FOUND, Model, aftermath, probe_model

_OTHER_DTYPE = {np.dtype(np.float32): np.float64, np.dtype(np.int64): np.float32}


@pytest.fixture(
    scope="module", params=[pytest.param(f, marks=pytest.mark.probe(f)) for f in ("torchscript", "pt2")]
)
def probe(models: list[Model], request: pytest.FixtureRequest) -> Model:
    """The model of each format the faults are sent to: the first that batches, else the first."""
    found = probe_model(models, request.param)
    if found is None:
        pytest.skip(
            f"the repository holds no {request.param} model; `invoke export --format both` exports both"
        )
    return found


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
    after = aftermath(triton, probe, protocol)
    assert (after.live, after.ready) == (True, True)
    assert after.parity, "\n".join(after.failures)
