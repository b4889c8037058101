"""Bad requests against the running server: each gets Triton's answer, and the server still computes after.

Sent through tritonclient (a wrong dim, a batch axis without batching, a missing, extra or unknown tensor, a
batch above max_batch_size) and raw over HTTP and gRPC where tritonclient refuses to build them (an unknown
data type, truncated or oversized tensor data, malformed JSON, headers or protobuf). test_errors.py covers the
simpler mistakes. Every case goes into the reliability part ``bad-requests``.
"""

from __future__ import annotations

import http.client
import json
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import grpc  # type: ignore[import-untyped]  # grpcio ships no stubs
import numpy as np
import pytest
from tritonclient.grpc import service_pb2
from tritonclient.utils import InferenceServerException

from tritonpt import client, dtypes
from tritonpt.client import Array
from tritonpt.reporting.reliability import count_tracebacks, folder_in, write_part
from tritonpt.server.base import Server

from .models import CLIENT_ERROR, Model, aftermath, probe_model, unbatched_model
from .settings import Settings

OK = {"http": "200", "grpc": "StatusCode.OK"}
BIG = 64 * 2**20
"""The oversized payload: far above any input of the built-in set (resnet18 at batch 8 is 4.6 MiB)."""
MODEL_INFER = "/inference.GRPCInferenceService/ModelInfer"
GRPC_OPTIONS = [("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)]

# Triton 2.51.0 answers these with a server error although the request is at fault ("failed to parse the
# request JSON buffer: ..." as HTTP 500; "Unable to parse request" as gRPC INTERNAL), seen here. The exact answer
# is asserted, so that a change either way shows; that the server stays live and right is asserted as for all.
SERVER_ERROR_FOR_A_BAD_REQUEST = {
    ("malformed-json", "http"): "500",
    ("header-length-inside-json", "http"): "500",
    ("malformed-protobuf", "grpc"): "StatusCode.INTERNAL",
}


@dataclass(frozen=True, kw_only=True)
class Answer:
    status: str  # "400", "StatusCode.INVALID_ARGUMENT", ...
    message: str


@dataclass(frozen=True, kw_only=True)
class Context:
    triton: Server
    probe: Model
    models: list[Model]
    wire: client.Protocol

    @property
    def inputs(self) -> dict[str, Array]:
        """The probe's first reference case, by input name: a good request to spoil."""
        return dict(zip(self.probe.input_names, self.probe.reference.cases[0].inputs, strict=True))


# --- How a request is sent ----------------------------------------------------------------------------------------


def _through_client(
    ctx: Context,
    inputs: dict[str, Array],
    *,
    model: Model | None = None,
    outputs: list[str] | None = None,
) -> Answer:
    target = model or ctx.probe
    try:
        client.infer(ctx.triton.endpoints, ctx.wire, target.name, inputs, outputs or target.output_names)
    except InferenceServerException as exc:
        return Answer(status=str(exc.status()), message=exc.message() or "")
    return Answer(status=OK[ctx.wire], message="")


def _post(ctx: Context, body: bytes, *, header_length: int | None, json_only: bool = False) -> Answer:
    """POST /v2/models/<probe>/infer as given, with the binary extension's header length when one is given."""
    url = urllib.parse.urlsplit(ctx.triton.endpoints.http_url)
    headers = {"Content-Type": "application/json" if json_only else "application/octet-stream"}
    if header_length is not None:
        headers["Inference-Header-Content-Length"] = str(header_length)
    connection = http.client.HTTPConnection(url.hostname or "", url.port, timeout=client.TIMEOUT_S)
    try:
        connection.request("POST", f"/v2/models/{ctx.probe.name}/infer", body=body, headers=headers)
        response = connection.getresponse()
        text = response.read().decode(errors="replace")
    finally:
        connection.close()
    try:
        message = str(json.loads(text).get("error", text))
    except (ValueError, AttributeError):
        message = text
    return Answer(status=str(response.status), message=message)


def _http_header(
    inputs: dict[str, Array], overrides: dict[str, dict[str, Any]] | None = None
) -> dict[str, Any]:
    """The JSON part of a binary-extension request: each input's shape, datatype and binary_data_size."""
    return {
        "inputs": [
            {
                "name": name,
                "shape": list(array.shape),
                "datatype": dtypes.from_numpy(array.dtype).wire,
                "parameters": {"binary_data_size": array.nbytes},
                **(overrides or {}).get(name, {}),
            }
            for name, array in inputs.items()
        ]
    }


def _post_binary(
    ctx: Context, header: dict[str, Any], binary: bytes, *, header_length: int | None = None
) -> Answer:
    head = json.dumps(header).encode()
    return _post(ctx, head + binary, header_length=len(head) if header_length is None else header_length)


def _model_infer(ctx: Context, request: bytes) -> Answer:
    """One ModelInfer call with ``request`` as its serialized message (the generated stubs' method, raw bytes)."""
    with grpc.insecure_channel(ctx.triton.endpoints.grpc, options=GRPC_OPTIONS) as channel:
        call = channel.unary_unary(MODEL_INFER)
        try:
            call(request, timeout=client.TIMEOUT_S)
        except grpc.RpcError as exc:
            return Answer(status=str(exc.code()), message=str(exc.details() or ""))
    return Answer(status=OK["grpc"], message="")


def _grpc_request(
    ctx: Context, inputs: dict[str, Array], raw: list[bytes], datatypes: dict[str, str] | None = None
) -> bytes:
    request = service_pb2.ModelInferRequest(model_name=ctx.probe.name)
    for name, array in inputs.items():
        tensor = request.inputs.add()
        tensor.name = name
        tensor.datatype = (datatypes or {}).get(name) or dtypes.from_numpy(array.dtype).wire
        tensor.shape.extend(array.shape)
    request.raw_input_contents.extend(raw)
    return bytes(request.SerializeToString())


def _raw(inputs: dict[str, Array]) -> list[bytes]:
    return [np.ascontiguousarray(array).tobytes() for array in inputs.values()]


# --- The cases ------------------------------------------------------------------------------------------------------


def dim_mismatch(ctx: Context) -> Answer:
    """An input whose last axis is one shorter than its config's fixed dim."""
    inputs = ctx.inputs
    fixed = [t.name for t in ctx.probe.config.input if t.dims and t.dims[-1] > 1]
    if not fixed:
        pytest.skip(f"{ctx.probe.name} has no input with a fixed last dim above 1 to shorten")
    inputs[fixed[0]] = inputs[fixed[0]][..., :-1]
    return _through_client(ctx, inputs)


def batch_axis_on_unbatched(ctx: Context) -> Answer:
    """A batch axis in front of a model's full shape: its probe is a model with max_batch_size 0."""
    inputs = {name: array[np.newaxis] for name, array in ctx.inputs.items()}
    return _through_client(ctx, inputs)


def missing_input(ctx: Context) -> Answer:
    inputs = ctx.inputs
    inputs.pop(ctx.probe.input_names[-1])
    return _through_client(ctx, inputs)


def extra_input(ctx: Context) -> Answer:
    inputs = ctx.inputs
    inputs["NOT_AN_INPUT__9"] = next(iter(inputs.values()))
    return _through_client(ctx, inputs)


def unknown_output(ctx: Context) -> Answer:
    return _through_client(ctx, ctx.inputs, outputs=["NOT_AN_OUTPUT__9"])


def batch_above_max(ctx: Context) -> Answer:
    if not ctx.probe.batching:
        pytest.skip(f"{ctx.probe.name} does not batch: no model of the repository has a max_batch_size")
    rows = ctx.probe.config.max_batch_size + 1
    inputs = {name: np.resize(array, (rows, *array.shape[1:])) for name, array in ctx.inputs.items()}
    return _through_client(ctx, inputs)


def unknown_datatype(ctx: Context) -> Answer:
    """A datatype no Triton knows ("FP128") on the first input, its bytes as they are."""
    inputs = ctx.inputs
    first = ctx.probe.input_names[0]
    if ctx.wire == "http":
        return _post_binary(ctx, _http_header(inputs, {first: {"datatype": "FP128"}}), b"".join(_raw(inputs)))
    return _model_infer(ctx, _grpc_request(ctx, inputs, _raw(inputs), {first: "FP128"}))


def truncated_binary(ctx: Context) -> Answer:
    """The last input's bytes cut in half, while its shape (and, over HTTP, binary_data_size) asks for all."""
    inputs = ctx.inputs
    raw = _raw(inputs)
    raw[-1] = raw[-1][: len(raw[-1]) // 2]
    if ctx.wire == "http":
        return _post_binary(ctx, _http_header(inputs), b"".join(raw))
    return _model_infer(ctx, _grpc_request(ctx, inputs, raw))


def oversized_payload(ctx: Context) -> Answer:
    """64 MiB of bytes for the first input, whose shape needs a few: declared as such over HTTP."""
    inputs = ctx.inputs
    first = ctx.probe.input_names[0]
    raw = _raw(inputs)
    raw[0] = bytes(BIG)
    if ctx.wire == "http":
        header = _http_header(inputs, {first: {"parameters": {"binary_data_size": BIG}}})
        return _post_binary(ctx, header, b"".join(raw))
    return _model_infer(ctx, _grpc_request(ctx, inputs, raw))


def header_length_beyond_body(ctx: Context) -> Answer:
    inputs = ctx.inputs
    return _post_binary(ctx, _http_header(inputs), b"".join(_raw(inputs)), header_length=2**20)


def trailing_64_mib(ctx: Context) -> Answer:
    """A good request with 64 MiB more after its tensors."""
    inputs = ctx.inputs
    return _post_binary(ctx, _http_header(inputs), b"".join(_raw(inputs)) + bytes(BIG))


def malformed_json(ctx: Context) -> Answer:
    body = json.dumps(_http_header(ctx.inputs)).encode()
    return _post(ctx, body[: len(body) // 2], header_length=None, json_only=True)


def header_length_inside_json(ctx: Context) -> Answer:
    """Inference-Header-Content-Length cuts the JSON header: the server reads half of it as the whole."""
    inputs = ctx.inputs
    head = json.dumps(_http_header(inputs)).encode()
    return _post_binary(ctx, _http_header(inputs), b"".join(_raw(inputs)), header_length=len(head) // 2)


def missing_raw_contents(ctx: Context) -> Answer:
    inputs = ctx.inputs
    return _model_infer(ctx, _grpc_request(ctx, inputs, _raw(inputs)[:-1]))


def malformed_protobuf(ctx: Context) -> Answer:
    return _model_infer(ctx, b"\xff\xff\xff\xff not a ModelInferRequest")


BOTH = client.PROTOCOLS
CASES: dict[str, tuple[Callable[[Context], Answer], tuple[client.Protocol, ...]]] = {
    "dim-mismatch": (dim_mismatch, BOTH),
    "batch-axis-on-unbatched": (batch_axis_on_unbatched, BOTH),
    "missing-input": (missing_input, BOTH),
    "extra-input": (extra_input, BOTH),
    "unknown-output": (unknown_output, BOTH),
    "batch-above-max": (batch_above_max, BOTH),
    "unknown-datatype": (unknown_datatype, BOTH),
    "truncated-binary": (truncated_binary, BOTH),
    "oversized-payload": (oversized_payload, BOTH),
    "header-length-beyond-body": (header_length_beyond_body, ("http",)),
    "trailing-64-mib": (trailing_64_mib, ("http",)),
    "malformed-json": (malformed_json, ("http",)),
    "header-length-inside-json": (header_length_inside_json, ("http",)),
    "missing-raw-contents": (missing_raw_contents, ("grpc",)),
    "malformed-protobuf": (malformed_protobuf, ("grpc",)),
}


def _probe_of(case: str) -> str:
    return "unbatched" if case == UNBATCHED else "torchscript"


UNBATCHED = "batch-axis-on-unbatched"
"""The case whose probe is the first model without batching (matrix.unbatched_model); every other case's is the
TorchScript probe (matrix.probe_model). Each case is marked with its probe, for the merge of shards."""
PAIRS = [
    pytest.param(case, wire, id=f"{case}-{wire}", marks=pytest.mark.probe(_probe_of(case)))
    for case, (_, wires) in CASES.items()
    for wire in wires
]
# (Not named `case`: the matrix's conftest parametrizes every test that takes `case` with the reference cases.)


@pytest.fixture(scope="module")
def cases_seen(settings: Settings) -> Iterator[list[dict[str, Any]]]:
    """Every case's answer, written as the reliability part ``bad-requests`` when the module ends."""
    seen: list[dict[str, Any]] = []
    yield seen
    if seen:
        folder = folder_in(settings.reports)
        tracebacks = count_tracebacks(str(entry.pop("message")) for entry in seen)
        write_part("bad-requests", {"tracebacks": tracebacks, "cases": seen}, folder=folder)


@pytest.mark.parametrize(("bad", "wire"), PAIRS)
def test_bad_request_gets_its_answer_and_the_server_stays_right(
    triton: Server, models: list[Model], bad: str, wire: client.Protocol, cases_seen: list[dict[str, Any]]
) -> None:
    probe = unbatched_model(models) if bad == UNBATCHED else probe_model(models)
    if probe is None:
        pytest.skip(
            "the repository has no model without batching (max_batch_size: 0) to send a batch axis to"
            if bad == UNBATCHED
            else "the repository holds no TorchScript model (test_errors.py sends bad requests to PT2 ones)"
        )
    send, _ = CASES[bad]
    answer = send(Context(triton=triton, probe=probe, models=models, wire=wire))
    after = aftermath(triton, probe, wire)
    expected = SERVER_ERROR_FOR_A_BAD_REQUEST.get((bad, wire), CLIENT_ERROR[wire])
    cases_seen.append(
        {
            "case": bad,
            "protocol": wire,
            "probe": _probe_of(bad),
            "status": answer.status,
            "client_error": answer.status == CLIENT_ERROR[wire],
            "expected": expected,
            "live_after": after.live and after.ready,
            "parity_after": after.parity,
            "message": answer.message,
        }
    )
    assert answer.status == expected, (
        f"{bad} over {wire} answered {answer.status} ({answer.message}); Triton {expected} was expected"
    )
    assert answer.message, "the server refused it without a message"
    assert count_tracebacks([answer.message]) == 0, answer.message
    assert (after.live, after.ready) == (True, True), (
        f"after {bad} over {wire} the server is not live and ready"
    )
    assert after.parity, f"after {bad} over {wire}:\n" + "\n".join(after.failures)
