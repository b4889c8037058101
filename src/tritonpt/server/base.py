"""A running Triton server with one interface, whatever runs it.

    Server (abstract)        start / stop / context manager, endpoints, readiness, per-model state and runtime
    ├── LocalServer          a tritonserver process on this machine, on free ports       (server/local.py)
    ├── UrlServer            a server someone else runs, given by its HTTP URL           (server/url.py)
    └── a container server   an image run by Docker (added on this same base)

Everything in this module talks to the server over its HTTP endpoint (the KServe v2 routes that every Triton
answers), so it behaves the same whoever runs the server. What differs between runners sits behind a few
methods a subclass provides: ``start``, ``stop``, ``is_alive``, ``log_tail`` / ``log_path``, ``_exit_state``
(has the runner died, and how) and ``describe``.

Failures read like testcontainers' wait strategies: what was expected, the state last seen, the last log
lines and a ``Hint:`` sentence chosen from what the log says.
"""

from __future__ import annotations

import abc
import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar, Literal, Self

from google.protobuf import json_format
from tritonclient.grpc import model_config_pb2

from tritonpt.backend import LIBRARY, Origin
from tritonpt.errors import ModelLoadError, ServerError, ServerStartError

ServerKind = Literal["local", "url", "container"]

POLL_INTERVAL_S = 0.2
REQUEST_TIMEOUT_S = 5.0
TAIL_LINES = 25
BUSY_STATES = frozenset({"LOADING", "UNLOADING"})


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


@dataclass(frozen=True, kw_only=True)
class ModelRuntime:
    """Which code serves a model, as the server reports it in ``GET /v2/models/<m>/config``."""

    name: str
    platform: str  # "pytorch_libtorch"
    backend: str  # "pytorch"
    runtime: str  # "" for the official backend (server 2.51.0 leaves it empty), else what the server names

    @property
    def library(self) -> str:
        """The runtime, or the backend's default shared library when the server leaves it empty."""
        return self.runtime or f"libtriton_{self.backend}.so"

    @property
    def official(self) -> bool:
        """Served by the official pytorch backend, ``libtriton_pytorch.so``."""
        return self.backend == "pytorch" and self.library == LIBRARY


# Heuristics for the Hint: sentence, first match wins; each key is text Triton (or the loader) writes.
HINTS: tuple[tuple[str, str], ...] = (
    (
        "failed to stat file",
        "the model repository folder does not exist or cannot be read; check the --model-repository path.",
    ),
    (
        "already in use",
        "one of the server's ports is taken; let LocalServer pick free ports (port 0) or stop the other server.",
    ),
    (
        "GLIBC_",
        "this tritonserver needs a newer glibc than the system has; run it in an image built for it.",
    ),
    (
        "libtorch.so: cannot open shared object file",
        "the pytorch backend cannot find libtorch: a built backend runs the torch of the environment it serves "
        "from (LocalServer puts its torch/lib on LD_LIBRARY_PATH); in an image, torch/lib must be on its library path.",
    ),
    (
        "cannot open shared object file",
        "a shared library is missing; the nvidia-pytriton server needs site-packages/nvidia_pytriton.libs on "
        "LD_LIBRARY_PATH (LocalServer sets it), other builds need their own lib folder or their image.",
    ),
    (
        "unable to find backend library for backend 'pytorch'",
        "the server's backend directory has no pytorch/libtriton_pytorch.so; build it with `invoke build-backend` "
        "(LocalServer then serves with it), or use an image whose /opt/tritonserver/backends/pytorch holds it.",
    ),
    (
        "triton backend API version",
        "the pytorch backend was built for another Triton backend API; build it from the pinned sources "
        "(`invoke build-backend`), whose API (1.19) servers 2.51 to 2.62 accept.",
    ),
    (
        "unsupported datatype",
        "the pytorch backend serves BOOL, UINT8, INT8, INT16, INT32, INT64, FP16, FP32 and FP64 only; cast the "
        "tensor inside the model and change config.pbtxt to match.",
    ),
    (
        "configuration expects",
        "config.pbtxt must list exactly as many inputs as the model's forward() takes (self excluded).",
    ),
    (
        "failed to read text proto",
        "a config.pbtxt does not parse with Triton's model_config.proto; the libprotobuf line names the file, "
        "line and column.",
    ),
    (
        "but no GPUs are available",
        "a model asks for KIND_GPU on a machine without a usable GPU; use KIND_AUTO (it falls back to the CPU) "
        "or run on a GPU host.",
    ),
    (
        "failed to load all models",
        "a model failed to load and --exit-on-error is on; its 'failed to load' line above says why. With "
        "exit_on_error=False the server keeps the other models and wait_models_ready reports each failure.",
    ),
)


def hint_for(text: str) -> str | None:
    """The first hint whose key appears in ``text`` (a log tail or Triton's reasons)."""
    for key, hint in HINTS:
        if key in text:
            return hint
    return None


# What every Triton logs on a machine without a GPU (reference/triton.md 6): harmless, and no clue to a failure.
NO_GPU_NOTICES: tuple[str, ...] = (
    "Failed to initialize NVML",
    "CudaDriverHelper has not been initialized",
    "Unable to allocate pinned system memory",
    "CUDA memory pool disabled",
    "DCGM unable to start",
    "Collecting CPU metrics",
)


def worth_reading(lines: Iterable[str]) -> list[str]:
    """Log lines without Triton's tables (``+---+``, ``| ... |`` and their empty headings) or no-GPU notices."""
    kept = []
    for line in lines:
        text = line.strip()
        if not text or text.startswith(("+", "|")) or text.endswith("]"):
            continue
        if any(notice in text for notice in NO_GPU_NOTICES):
            continue
        kept.append(line)
    return kept


def pick_states(index: Iterable[ModelState], names: Iterable[str]) -> dict[str, ModelState]:
    """Each named model's entry in a repository index: its READY version if any, else its last known one."""
    by_name: dict[str, ModelState] = {}
    for entry in index:
        known = by_name.get(entry.name)
        if known is None or (entry.ready and not known.ready) or (not known.ready and entry.state):
            by_name[entry.name] = entry
    return {name: by_name.get(name, ModelState(name=name)) for name in names}


# One opener without proxies: the servers we talk to are ours or named by the user, like tritonclient does.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def http_request(url: str, *, method: str = "GET", timeout: float = REQUEST_TIMEOUT_S) -> tuple[int, bytes]:
    """Status and body of one HTTP request; connection failures raise ``OSError`` (``URLError`` is one)."""
    request = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)  # noqa: S310 - http:// URLs built from Endpoints
    try:
        with _OPENER.open(request, timeout=timeout) as response:
            return int(response.status), bytes(response.read())
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, exc.read()


class Server(abc.ABC):
    """A Triton server: started, asked over HTTP, stopped. The checks never know what runs it."""

    kind: ClassVar[ServerKind]

    def __init__(self) -> None:
        self.startup_seconds: float | None = None  # start() to ready, when this object started the server
        self._endpoints: Endpoints | None = None  # set by a runner once it knows where the server answers

    @property
    def endpoints(self) -> Endpoints:
        """Where the server answers; valid once ``start()`` returned."""
        if self._endpoints is None:
            msg = f"This {type(self).__name__} has not been started; call start() (or use it in a with block) first."
            raise ServerError(msg)
        return self._endpoints

    # --- what a runner provides ---------------------------------------------------------------------------------

    @abc.abstractmethod
    def start(self) -> None:
        """Bring the server up (or find it) and return once it is ready; raises ``ServerStartError``."""

    @abc.abstractmethod
    def stop(self) -> None:
        """Tear the server down (nothing for a server this object did not start); safe to call twice."""

    @abc.abstractmethod
    def is_alive(self) -> bool:
        """Whether what runs the server is still running (for a URL: whether it answers)."""

    @property
    def log_path(self) -> Path | None:
        """The file the server's log goes to, when there is one on this machine."""
        return None

    def log_tail(self, lines: int = 40) -> str:
        """The last ``lines`` lines of the server's log, or an empty string when there is no log."""
        path = self.log_path
        if path is None or not path.is_file():
            return ""
        with path.open(encoding="utf-8", errors="replace") as handle:
            return "".join(deque(handle, maxlen=lines)).rstrip("\n")

    def backend_origin(self) -> Origin | None:
        """Where the server's libtriton_pytorch.so came from, when this runner knows (None: it cannot tell)."""
        return None

    def describe(self) -> str:
        """A few words naming this server in messages."""
        return f"the {self.kind} Triton server at {self.endpoints.http_url}"

    def _exit_state(self) -> str | None:
        """How the runner ended (``"exited with code 1"``), or ``None`` while it runs or cannot tell."""
        return None

    def _default_hint(self) -> str:
        return "the server's log says more; raise its verbosity (--log-verbose=1) if it does not."

    # --- context manager ------------------------------------------------------------------------------------------

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.describe()}>"

    # --- over HTTP, the same for every runner ---------------------------------------------------------------------

    def _url(self, path: str) -> str:
        return f"{self.endpoints.http_url}{path}"

    def _json(self, path: str, *, method: str = "GET") -> Any:  # noqa: ANN401 - JSON as Triton sends it
        status, body = http_request(self._url(path), method=method)
        if status != 200:
            detail = body.decode("utf-8", errors="replace").strip()
            msg = f"{method} {path} on {self.describe()} answered {status}: {detail}"
            raise ServerError(msg)
        return json.loads(body)

    def _status(self, path: str) -> int:
        return http_request(self._url(path))[0]

    def is_live(self) -> bool:
        """``GET /v2/health/live`` answers 200; ``OSError`` when nothing answers."""
        return self._status("/v2/health/live") == 200

    def is_ready(self) -> bool:
        """``GET /v2/health/ready`` answers 200 (with --strict-readiness: every model is ready too)."""
        return self._status("/v2/health/ready") == 200

    def model_ready(self, name: str, version: str = "") -> bool:
        """``GET /v2/models/<name>[/versions/<v>]/ready`` answers 200."""
        quoted = urllib.parse.quote(name, safe="")
        suffix = f"/versions/{urllib.parse.quote(version, safe='')}" if version else ""
        return self._status(f"/v2/models/{quoted}{suffix}/ready") == 200

    def repository_index(self) -> list[ModelState]:
        """``POST /v2/repository/index``: every model version with its state and Triton's reason."""
        entries = self._json("/v2/repository/index", method="POST")
        return [
            ModelState(
                name=str(entry.get("name", "")),
                version=str(entry.get("version", "")),
                state=str(entry.get("state", "")),
                reason=str(entry.get("reason", "")),
            )
            for entry in entries
        ]

    def model_states(self, names: Iterable[str]) -> dict[str, ModelState]:
        """The state of each named model (its READY version if it has one); absent names are not loaded."""
        return pick_states(self.repository_index(), names)

    def model_config(self, name: str) -> model_config_pb2.ModelConfig:
        """``GET /v2/models/<name>/config`` as Triton's own protobuf message (what the server filled in)."""
        data = self._json(f"/v2/models/{urllib.parse.quote(name, safe='')}/config")
        try:
            return json_format.ParseDict(data, model_config_pb2.ModelConfig(), ignore_unknown_fields=True)
        except json_format.ParseError as exc:
            msg = f"Cannot read the config {self.describe()} reports for model {name!r}, as {exc}."
            raise ServerError(msg) from exc

    def model_runtime(self, name: str) -> ModelRuntime:
        """Which code serves the model, as the server reports it."""
        config = self.model_config(name)
        return ModelRuntime(
            name=name, platform=config.platform, backend=config.backend, runtime=config.runtime
        )

    # --- waiting ----------------------------------------------------------------------------------------------------

    def wait_ready(self, timeout: float = 120.0) -> None:
        """Return once the server answers and has settled its startup model loads.

        Ready means ``/v2/health/ready`` answers 200, or the server is live and no model is LOADING or
        UNLOADING: with --strict-readiness one model that failed to load keeps ``/v2/health/ready`` at 400
        for good, and saying which model failed and why is :meth:`wait_models_ready`'s job. Fails fast,
        with the log tail, when the runner exits.
        """
        started = time.monotonic()
        last = "nothing answered yet"
        while True:
            exited = self._exit_state()
            if exited is not None:
                waited = time.monotonic() - started
                headline = (
                    f"{self.describe()} {exited} before it was ready ({waited:.1f} s after waiting began)"
                )
                raise ServerStartError(self.failure(headline))
            try:
                ready = self.is_ready()
                live = ready or self.is_live()
            except OSError as exc:
                last = f"not answering ({_reason(exc)})"
            else:
                if ready:
                    return
                if not live:
                    last = "answering, but not live"
                else:
                    try:
                        busy = [state for state in self.repository_index() if state.busy]
                    except (OSError, ServerError, ValueError) as exc:
                        last = f"live but not ready, and its repository index failed ({_reason(exc)})"
                    else:
                        if not busy:
                            return
                        last = f"live, {len(busy)} model version(s) still loading or unloading"
            if time.monotonic() - started >= timeout:
                headline = f"{self.describe()} was not ready within {timeout:.0f} s; last seen: {last}"
                raise ServerStartError(self.failure(headline))
            time.sleep(POLL_INTERVAL_S)

    def wait_models_ready(self, names: Sequence[str], timeout: float = 120.0) -> dict[str, ModelState]:
        """Return each model's state once all are READY; raise ``ModelLoadError`` with Triton's reasons if not.

        Fails as soon as every model has settled (a failed load does not come back on its own), or when
        ``timeout`` seconds pass with some still loading.
        """
        started = time.monotonic()
        states: dict[str, ModelState] = {}
        while True:
            exited = self._exit_state()
            if exited is not None:
                raise ServerStartError(
                    self.failure(f"{self.describe()} {exited} while its models were loading")
                )
            try:
                index = self.repository_index()
            except (OSError, ServerError, ValueError) as exc:
                if time.monotonic() - started >= timeout:
                    msg = (
                        f"{self.describe()} stopped answering while its models were loading ({_reason(exc)})."
                    )
                    raise ServerStartError(self.failure(msg)) from exc
            else:
                states = pick_states(index, names)
                if all(state.ready for state in states.values()):
                    return states
                settled = not any(state.busy for state in index)
                if settled or time.monotonic() - started >= timeout:
                    raise self._not_ready(states, waited=time.monotonic() - started, timed_out=not settled)
            time.sleep(POLL_INTERVAL_S)

    def _not_ready(self, states: dict[str, ModelState], *, waited: float, timed_out: bool) -> ModelLoadError:
        failed = {name: state for name, state in states.items() if not state.ready}
        lines = [
            f"{len(failed)} of {len(states)} model(s) did not become ready on {self.describe()} "
            f"({'still loading after' if timed_out else 'settled after'} {waited:.1f} s):"
        ]
        reasons: dict[str, str] = {}
        for name, state in failed.items():
            if not state.state and not state.reason:
                reasons[name] = "not in the repository index: no folder of that name with a config.pbtxt"
                lines.append(f"  {name}: {reasons[name]}")
            else:
                reasons[name] = state.summary or state.state
                lines.append(f"  {state.describe()}")
        hint = hint_for("\n".join(reasons.values())) or (
            "the repository index has Triton's reason per model; the server log has the full story."
        )
        lines.append(f"Hint: {hint}")
        return ModelLoadError("\n".join(lines), reasons)

    def failure(self, headline: str) -> str:
        """A failure message: the headline, the last telling log lines and a Hint: sentence."""
        tail = worth_reading(self.log_tail(400).splitlines())[-TAIL_LINES:]
        parts = [headline.rstrip(".") + "."]
        if tail:
            source = f" of {self.log_path}" if self.log_path else ""
            parts.append(f"Last {len(tail)} log lines{source} (tables and no-GPU notices left out):")
            parts.extend(f"    {line}" for line in tail)
        else:
            parts.append("No server log is available here.")
        parts.append(f"Hint: {hint_for(chr(10).join(tail)) or self._default_hint()}")
        return "\n".join(parts)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, urllib.error.URLError):
        return str(exc.reason)
    return str(exc) or type(exc).__name__
