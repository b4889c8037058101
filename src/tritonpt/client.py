"""One way to talk to a running Triton: tritonclient's HTTP and gRPC clients behind a few typed calls.

The server runners and the checks both come here, so there is one client library, one set of timeouts and one
way a failure reads. Where the server answers: :class:`Endpoints`; what its index says: :class:`ModelState`.
A restricted server's admin key is read from ``$TRITONPT_ADMIN_KEY`` only (:data:`ADMIN_KEY_ENV`) and goes
with every request of both protocols. A server that does not answer raises ``OSError``; one that answers
with an error raises tritonclient's ``InferenceServerException``.
"""

from __future__ import annotations

import collections
import contextlib
import os
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from http.client import HTTPException
from typing import Any, Literal, TypeAlias, TypeVar

import gevent
import gevent.hub
import numpy.typing as npt
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from google.protobuf import json_format
from prometheus_client.parser import text_string_to_metric_families
from tritonclient._plugin import InferenceServerClientPlugin
from tritonclient.grpc.model_config_pb2 import ModelConfig

from tritonpt import dtypes
from tritonpt.errors import ServerError
from tritonpt.options import TRITON_PORTS

Protocol = Literal["http", "grpc"]
PROTOCOLS: tuple[Protocol, ...] = ("http", "grpc")
Array = npt.NDArray[Any]
Connection: TypeAlias = httpclient.InferenceServerClient | grpcclient.InferenceServerClient
"""An open client of either protocol, as :func:`http` and :func:`grpc` yield it."""
Metrics = dict[str, dict[tuple[tuple[str, str], ...], float]]

HTTP_PORT, GRPC_PORT, METRICS_PORT = TRITON_PORTS.http, TRITON_PORTS.grpc, TRITON_PORTS.metrics
"""Triton's default ports (what a container listens on, and what a URL target assumes)."""
TIMEOUT_S = 60.0
"""Per inference request: a hung server fails a check instead of hanging the run."""
PROBE_TIMEOUT_S = 5.0
"""Per health, index or config request while waiting for a server."""
POLL_INTERVAL_S = 0.2
BUSY_STATES = frozenset({"LOADING", "UNLOADING"})
ADMIN_KEY_ENV = "TRITONPT_ADMIN_KEY"
"""The key a server's restricted APIs expect; sent on every request when set, never printed."""
ADMIN_HEADER_ENV = "TRITONPT_ADMIN_HEADER"
ADMIN_HEADER = "admin-key"
"""The header's name when ``$TRITONPT_ADMIN_HEADER`` names none (the name Triton's docs use)."""
GRPC_HEADER_PREFIX = "triton-grpc-protocol-"
"""Server 2.51.0 reads a restricted gRPC protocol's header under this prefix."""

_T = TypeVar("_T")

# tritonclient.http waits in gevent's event loop, and a stop signal that lands there (Ctrl-C, or
# tritonpt.stopping's Interrupted) is raised inside the loop. gevent passes it on to the waiting call, as it
# should, but prints it first as an error, a one-frame traceback over an interrupted run that stopped cleanly
# (the fault tier saw one when SIGTERM reached the bench during a statistics request). A stop is not an error:
# passed on still (gevent's SYSTEM_ERROR), printed no more.
if not issubclass(KeyboardInterrupt, gevent.hub.Hub.NOT_ERROR):
    gevent.hub.Hub.NOT_ERROR = (*gevent.hub.Hub.NOT_ERROR, KeyboardInterrupt)


def host_port(host: str, port: int) -> str:
    """``host:port`` as tritonclient takes it (IPv6 literals in brackets)."""
    return f"[{host}]:{port}" if ":" in host and not host.startswith("[") else f"{host}:{port}"


@dataclass(frozen=True, kw_only=True)
class Endpoints:
    """Where a server answers: the three ports Triton opens."""

    http: str  # "127.0.0.1:8000", as tritonclient's HTTP client takes it
    grpc: str  # "127.0.0.1:8001", as tritonclient's gRPC client takes it
    metrics_url: str  # "http://127.0.0.1:8002/metrics"

    @classmethod
    def on_host(cls, host: str, *, http_port: int, grpc_port: int, metrics_port: int) -> Endpoints:
        return cls(
            http=host_port(host, http_port),
            grpc=host_port(host, grpc_port),
            metrics_url=f"http://{host_port(host, metrics_port)}/metrics",
        )

    @property
    def http_url(self) -> str:
        return f"http://{self.http}"


@dataclass(frozen=True, kw_only=True)
class ModelState:
    """One model version as ``POST /v2/repository/index`` lists it."""

    name: str
    version: str = ""
    state: str = ""  # READY, LOADING, UNLOADING, UNAVAILABLE; "" when Triton never tried to load it
    reason: str = ""  # Triton's own words when it is not READY (a load error, "unloaded", ...)

    @property
    def ready(self) -> bool:
        return self.state == "READY"

    @property
    def busy(self) -> bool:
        return self.state in BUSY_STATES

    @property
    def summary(self) -> str:
        """The reason without a traceback (``\\n\\nAt:\\n  ...``) that a backend may append to it."""
        return self.reason.split("\n\nAt:\n", 1)[0].strip()

    def describe(self) -> str:
        version = f"version {self.version}, " if self.version else ""
        if not self.state:
            return f"{self.name} ({version}not loaded)"
        detail = f": {self.summary}" if self.summary else ""
        return f"{self.name} ({version}{self.state}){detail}"


def pick_states(index: Iterable[ModelState], names: Iterable[str]) -> dict[str, ModelState]:
    """Each named model's entry in a repository index: its READY version if any, else its last known one."""
    by_name: dict[str, ModelState] = {}
    for entry in index:
        known = by_name.get(entry.name)
        if known is None or (entry.ready and not known.ready) or (not known.ready and entry.state):
            by_name[entry.name] = entry
    return {name: by_name.get(name, ModelState(name=name)) for name in names}


# --- The clients ----------------------------------------------------------------------------------------------


class _Whole:
    """A tritonclient client that is closed when collected only if its ``__init__`` ran to the end.

    tritonclient 2.51's ``__del__`` calls ``close()``, which reads attributes that ``__init__`` sets last
    (``_stream`` for gRPC, ``_closed`` for HTTP). A Ctrl-C inside ``__init__`` (the fault tier caught one in
    gRPC's channel setup) leaves them unset, and the collection prints an "Exception ignored" traceback
    over the interrupted run's exit. Half-built, there is nothing of ours to close: the channel or pool it
    did make closes with its own collection.
    """

    _built = False

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self._built = True

    def __del__(self) -> None:
        if self._built:
            super().__del__()  # type: ignore[misc]


class _AdminKey(InferenceServerClientPlugin):  # type: ignore[misc]  # untyped library
    """tritonclient's plugin hook: the admin header on every request (its repr never shows the key)."""

    def __init__(self, header: str, key: str) -> None:
        self._header, self._key = header, key

    def __call__(self, request: Any) -> None:  # noqa: ANN401 - tritonclient's Request
        request.headers[self._header] = self._key

    def __repr__(self) -> str:
        return f"_AdminKey({self._header!r}, <${ADMIN_KEY_ENV}>)"


def admin_header() -> str | None:
    """The header name the admin key goes in, or None when ``$TRITONPT_ADMIN_KEY`` is unset or empty."""
    if not os.environ.get(ADMIN_KEY_ENV):
        return None
    return os.environ.get(ADMIN_HEADER_ENV) or ADMIN_HEADER


def _with_admin_key(client: Any, *, grpc: bool) -> None:  # noqa: ANN401 - either tritonclient client
    header = admin_header()
    if header is not None:
        client.register_plugin(
            _AdminKey(f"{GRPC_HEADER_PREFIX}{header}" if grpc else header, os.environ[ADMIN_KEY_ENV])
        )


class _Http(_Whole, httpclient.InferenceServerClient):  # type: ignore[misc]  # untyped library
    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        _with_admin_key(self, grpc=False)


class _Grpc(_Whole, grpcclient.InferenceServerClient):  # type: ignore[misc]  # untyped library
    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        _with_admin_key(self, grpc=True)


@contextlib.contextmanager
def http(endpoints: Endpoints, *, timeout: float = TIMEOUT_S) -> Iterator[httpclient.InferenceServerClient]:
    """tritonclient's HTTP client; gevent's timeout comes out as ``TimeoutError``, a connection closed without
    an answer as ``ConnectionError`` (both ``OSError``, as a refused connection is)."""
    client = _Http(url=endpoints.http, connection_timeout=timeout, network_timeout=timeout)
    try:
        yield client
    except gevent.Timeout as exc:
        msg = f"{endpoints.http_url} did not answer within {timeout:.0f} s"
        raise TimeoutError(msg) from exc
    except (
        HTTPException
    ) as exc:  # geventhttpclient's HTTPConnectionClosed: e.g. docker-proxy's port, its container gone
        msg = f"{endpoints.http_url} closed the connection without an answer ({type(exc).__name__})"
        raise ConnectionError(msg) from exc
    finally:
        client.close()


@contextlib.contextmanager
def grpc(endpoints: Endpoints) -> Iterator[grpcclient.InferenceServerClient]:
    with _Grpc(url=endpoints.grpc) as client:
        yield client


# --- What the runners ask while a server starts ---------------------------------------------------------------


def is_live(endpoints: Endpoints, *, timeout: float = PROBE_TIMEOUT_S) -> bool:
    """``GET /v2/health/live``; ``OSError`` when nothing answers within ``timeout`` seconds."""
    with http(endpoints, timeout=timeout) as client:
        return bool(client.is_server_live())


def is_ready(endpoints: Endpoints) -> bool:
    """``GET /v2/health/ready`` (with --strict-readiness: every model is ready too); ``OSError`` when nothing answers."""
    with http(endpoints, timeout=PROBE_TIMEOUT_S) as client:
        return bool(client.is_server_ready())


def repository_index(endpoints: Endpoints) -> list[ModelState]:
    """``POST /v2/repository/index``: every model version with its state and Triton's reason."""
    with http(endpoints, timeout=PROBE_TIMEOUT_S) as client:
        entries = client.get_model_repository_index()
    return [
        ModelState(
            name=str(entry.get("name", "")),
            version=str(entry.get("version", "")),
            state=str(entry.get("state", "")),
            reason=str(entry.get("reason", "")),
        )
        for entry in entries
    ]


def is_model_ready(endpoints: Endpoints, name: str) -> bool:
    """``GET /v2/models/<name>/ready``: whether the server serves the model now. The one way to ask about a model
    uploaded through the load API: server 2.51.0 leaves those out of its repository index (seen: an empty index
    with the uploaded model ready)."""
    with http(endpoints, timeout=PROBE_TIMEOUT_S) as client:
        return bool(client.is_model_ready(name))


def model_config(endpoints: Endpoints, name: str) -> ModelConfig:
    """``GET /v2/models/<name>/config`` as Triton's own protobuf message (what the server filled in)."""
    with http(endpoints, timeout=PROBE_TIMEOUT_S) as client:
        data = client.get_model_config(name)
    return json_format.ParseDict(data, ModelConfig(), ignore_unknown_fields=True)


def settle(
    read: Callable[[], _T], done: Callable[[_T], bool], *, timeout: float, interval: float = POLL_INTERVAL_S
) -> _T:
    """Call ``read`` until ``done`` holds for what it returned, or ``timeout`` seconds pass; the last value read."""
    deadline = time.monotonic() + timeout
    while True:
        value = read()
        if done(value) or time.monotonic() >= deadline:
            return value
        time.sleep(interval)


def poll_until(
    probe: Callable[[], _T | None], *, timeout: float, interval: float = POLL_INTERVAL_S
) -> _T | None:
    """Call ``probe`` until it returns something other than None, or ``timeout`` seconds pass (then None)."""
    return settle(probe, lambda found: found is not None, timeout=timeout, interval=interval)


# --- What the checks ask ----------------------------------------------------------------------------------------


def live_and_ready(endpoints: Endpoints, protocol: Protocol) -> tuple[bool, bool]:
    if protocol == "http":
        with http(endpoints) as client:
            return bool(client.is_server_live()), bool(client.is_server_ready())
    with grpc(endpoints) as client:
        return bool(client.is_server_live()), bool(client.is_server_ready())


def server_metadata(endpoints: Endpoints) -> dict[str, Any]:
    with http(endpoints) as client:
        return dict(client.get_server_metadata())


def infer(
    endpoints: Endpoints,
    protocol: Protocol,
    model: str,
    inputs: Mapping[str, Array],
    outputs: Sequence[str],
    *,
    datatypes: Mapping[str, str] | None = None,
) -> list[Array]:
    """One inference request on a client of its own; returns the requested outputs in order.

    ``datatypes`` overrides the wire datatype per input (to send a deliberately wrong one).
    """
    opened: contextlib.AbstractContextManager[Connection] = (
        http(endpoints) if protocol == "http" else grpc(endpoints)
    )
    with opened as connection:
        answered = infer_on(connection, protocol, model, inputs, outputs, datatypes=datatypes)
    with _ANSWERED_LOCK:
        _ANSWERED[endpoints.http, model] += 1
    return answered


_ANSWERED: collections.Counter[tuple[str, str]] = collections.Counter()
_ANSWERED_LOCK = threading.Lock()


def forget_answered(endpoints: Endpoints, model: str) -> None:
    """A model unloaded or loaded again starts its statistics again (from its warmup runs, which the server counts
    too): so does the count of its answers."""
    with _ANSWERED_LOCK:
        _ANSWERED.pop((endpoints.http, model), None)


def answered(endpoints: Endpoints, model: str) -> int:
    """How many of this process's :func:`infer` requests the server at ``endpoints`` answered for ``model``. Triton
    counts a request in its statistics after it has sent the response, so a count read right after an answer can
    lag it: wait for this many, and the model's warmup runs, which it counts as well
    (:meth:`tritonpt.matrix.models.Model.counted`), before reading counters as a baseline."""
    with _ANSWERED_LOCK:
        return _ANSWERED[endpoints.http, model]


def infer_on(
    connection: Connection,
    protocol: Protocol,
    model: str,
    inputs: Mapping[str, Array],
    outputs: Sequence[str],
    *,
    datatypes: Mapping[str, str] | None = None,
) -> list[Array]:
    """:func:`infer` on a client opened by :func:`http` or :func:`grpc` (one per thread: tritonclient's clients
    are not thread-safe), for many requests on one connection."""
    module: Any = httpclient if protocol == "http" else grpcclient
    request = []
    for name, array in inputs.items():
        wire = (datatypes or {}).get(name) or dtypes.from_numpy(array.dtype).wire
        item = module.InferInput(name, list(array.shape), wire)
        item.set_data_from_numpy(array)
        request.append(item)
    wanted = [module.InferRequestedOutput(name) for name in outputs]
    if protocol == "http":
        result = connection.infer(model, request, outputs=wanted)
    else:
        result = connection.infer(model, request, outputs=wanted, client_timeout=TIMEOUT_S)
    return [result.as_numpy(name) for name in outputs]


@dataclass(frozen=True, kw_only=True)
class Statistics:
    """A model's counters from the statistics extension."""

    requests: int  # successful inference requests
    inferences: int  # samples (requests x batch size)
    executions: int  # model executions (batches)


def statistics(endpoints: Endpoints, model: str) -> Statistics:
    with http(endpoints) as client:
        [stats] = client.get_inference_statistics(model)["model_stats"][:1]
    return Statistics(
        requests=int(stats["inference_stats"]["success"]["count"]),
        inferences=int(stats["inference_count"]),
        executions=int(stats["execution_count"]),
    )


@dataclass(frozen=True, kw_only=True)
class Split:
    """A model's cumulative request times from the statistics extension (ns), over ``count`` requests."""

    count: int  # successful requests
    request_ns: int  # each from its arrival to its response
    queue_ns: int
    compute_input_ns: int
    compute_infer_ns: int
    compute_output_ns: int

    @property
    def in_order(self) -> bool:
        """Whether the parts fit inside the requests: they are spans between the timestamps a backend reports
        (exec start, compute start, compute end, exec end), which fall within each request. A backend that
        reports them in another order makes a part longer than the requests themselves (pytorch_backend r26.05's
        PT2 path: docs/upstream/pt2-statistics.md)."""
        parts = self.queue_ns + self.compute_input_ns + self.compute_infer_ns + self.compute_output_ns
        return parts <= self.request_ns

    def per_request_us(self, part: int) -> float:
        return part / self.count / 1000 if self.count else 0.0


def split(endpoints: Endpoints, model: str) -> Split:
    """The model's request split as the server reports it (all its versions' first entry, as statistics())."""
    with http(endpoints) as client:
        [stats] = client.get_inference_statistics(model)["model_stats"][:1]
    inference = stats["inference_stats"]

    def ns(key: str) -> int:
        return int(inference[key].get("ns", 0))

    return Split(
        count=int(inference["success"]["count"]),
        request_ns=ns("success"),
        queue_ns=ns("queue"),
        compute_input_ns=ns("compute_input"),
        compute_infer_ns=ns("compute_infer"),
        compute_output_ns=ns("compute_output"),
    )


# No proxies: the servers we talk to are ours or named by the user, as tritonclient's own clients do.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


METRICS_PATH = "/metrics"


def metrics_url(url: str) -> str:
    """The URL Triton serves Prometheus text at, from what a person types: ``host:8002``,
    ``http://host:8002``, ``http://host:8002/`` and ``http://host:8002/metrics`` all name
    ``http://host:8002/metrics`` (Triton answers ``/`` on that port with an empty 200). Another path is kept."""
    parsed = urllib.parse.urlsplit(url if "://" in url else f"http://{url}")
    path = parsed.path if parsed.path not in ("", "/") else METRICS_PATH
    return urllib.parse.urlunsplit((parsed.scheme, parsed.netloc, path, parsed.query, ""))


def metrics(endpoints: Endpoints) -> Metrics:
    """Prometheus text from the metrics port, parsed: metric name -> labels -> value.

    ``ServerError`` when the answer holds no Prometheus metrics at all (a wrong path or port): every metrics
    check would otherwise fail as if a counter were missing.
    """
    url = endpoints.metrics_url
    with _OPENER.open(url, timeout=TIMEOUT_S) as response:
        body = response.read()
    parsed: Metrics = {}
    try:
        for family in text_string_to_metric_families(body.decode("utf-8", errors="replace")):
            for sample in family.samples:
                # prometheus_client names a counter's samples `<family>_total`; Triton's docs use the family name.
                name = family.name if sample.name == f"{family.name}_total" else sample.name
                parsed.setdefault(name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    except ValueError as exc:
        parsed, problem = {}, f"text that is not Prometheus' exposition format ({exc})"
    else:
        problem = f"{len(body)} bytes without a single metric"
    if not parsed:
        msg = (
            f"GET {url} answered {problem}, so it is not Triton's metrics endpoint.\n"
            f"Hint: Triton serves its metrics at {METRICS_PATH} on its metrics port (8002 unless it was started "
            "with --metrics-port): give --metrics-url http://HOST:8002/metrics (http://HOST:8002 means the same)."
        )
        raise ServerError(msg)
    return parsed


def model_metric(
    parsed: Mapping[str, Mapping[tuple[tuple[str, str], ...], float]], name: str, model: str
) -> float:
    """Sum of a per-model metric over the model's versions."""
    return sum(value for labels, value in parsed.get(name, {}).items() if dict(labels).get("model") == model)
