"""Checks against a running Triton, whatever runs it: the three ports, the backend, the config, inference.

Everything here talks to a server through its :class:`~tritonpt.server.base.Endpoints` (HTTP and gRPC
through tritonclient, metrics through prometheus_client's parser); what a server says about itself (its
repository index, a model's config and runtime) is asked through :class:`~tritonpt.server.base.Server`.
The integration tests call these and assert on what they return; they never know whether the server is a
local process, a container or a remote URL.
"""

from __future__ import annotations

import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy.typing as npt
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from prometheus_client.parser import text_string_to_metric_families
from tritonclient.grpc.model_config_pb2 import ModelConfig, ModelInstanceGroup
from tritonclient.utils import InferenceServerException

from tritonpt import dtypes
from tritonpt.server.base import Endpoints

Protocol = Literal["http", "grpc"]
PROTOCOLS: tuple[Protocol, ...] = ("http", "grpc")
Array = npt.NDArray[Any]

# Per-request network timeout: a hung server fails a check instead of hanging the run.
TIMEOUT_S = 60.0


def http_client(endpoints: Endpoints) -> httpclient.InferenceServerClient:
    return httpclient.InferenceServerClient(
        url=endpoints.http, connection_timeout=TIMEOUT_S, network_timeout=TIMEOUT_S
    )


def grpc_client(endpoints: Endpoints) -> grpcclient.InferenceServerClient:
    return grpcclient.InferenceServerClient(url=endpoints.grpc)


def infer(
    endpoints: Endpoints,
    protocol: Protocol,
    model: str,
    inputs: Mapping[str, Array],
    outputs: Sequence[str],
    *,
    datatypes: Mapping[str, str] | None = None,
) -> list[Array]:
    """One inference request; returns the requested outputs in order.

    ``datatypes`` overrides the wire datatype per input (to send a deliberately wrong one).
    """
    module: Any = httpclient if protocol == "http" else grpcclient
    request = []
    for name, array in inputs.items():
        wire = (datatypes or {}).get(name) or dtypes.from_numpy(array.dtype).wire
        item = module.InferInput(name, list(array.shape), wire)
        item.set_data_from_numpy(array)
        request.append(item)
    wanted = [module.InferRequestedOutput(name) for name in outputs]
    if protocol == "http":
        with http_client(endpoints) as client:
            result = client.infer(model, request, outputs=wanted)
    else:
        with grpc_client(endpoints) as client:
            result = client.infer(model, request, outputs=wanted, client_timeout=TIMEOUT_S)
    return [result.as_numpy(name) for name in outputs]


def live_and_ready(endpoints: Endpoints, protocol: Protocol) -> tuple[bool, bool]:
    if protocol == "http":
        with http_client(endpoints) as client:
            return bool(client.is_server_live()), bool(client.is_server_ready())
    with grpc_client(endpoints) as client:
        return bool(client.is_server_live()), bool(client.is_server_ready())


def server_metadata(endpoints: Endpoints) -> dict[str, Any]:
    with http_client(endpoints) as client:
        return dict(client.get_server_metadata())


def served_on_gpu(config: ModelConfig) -> bool:
    """Whether the server placed any instance of the model on a GPU (KIND_AUTO resolves to a kind)."""
    return any(group.kind == ModelInstanceGroup.KIND_GPU for group in config.instance_group)


@dataclass(frozen=True, kw_only=True)
class Statistics:
    requests: int  # successful inference requests
    inferences: int  # samples (requests x batch size)
    executions: int  # model executions (batches)


def statistics(endpoints: Endpoints, model: str) -> Statistics:
    with http_client(endpoints) as client:
        [stats] = client.get_inference_statistics(model)["model_stats"][:1]
    return Statistics(
        requests=int(stats["inference_stats"]["success"]["count"]),
        inferences=int(stats["inference_count"]),
        executions=int(stats["execution_count"]),
    )


def metrics(endpoints: Endpoints) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    """Prometheus text from the metrics port, parsed: metric name -> labels -> value."""
    with urllib.request.urlopen(endpoints.metrics_url, timeout=TIMEOUT_S) as response:  # noqa: S310 - our own server's URL
        text = response.read().decode()
    parsed: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            # prometheus_client names a counter's samples `<family>_total`; Triton's docs use the family name.
            name = family.name if sample.name == f"{family.name}_total" else sample.name
            parsed.setdefault(name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return parsed


def model_metric(
    parsed: Mapping[str, Mapping[tuple[tuple[str, str], ...], float]], name: str, model: str
) -> float:
    """Sum of a per-model metric over the model's versions."""
    return sum(value for labels, value in parsed.get(name, {}).items() if dict(labels).get("model") == model)


def is_client_error(exc: BaseException) -> bool:
    return isinstance(exc, InferenceServerException)
