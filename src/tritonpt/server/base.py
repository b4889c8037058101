"""A running Triton server with one interface, whatever runs it.

    Server (abstract)    start / stop / kill, endpoints, readiness, per-model state; its life is one State
    ├── LocalServer      a tritonserver process on this machine, on free ports   (server/local.py)
    ├── UrlServer        a server someone else runs, given by its HTTP URL       (server/url.py)
    └── ContainerServer  an image run by Docker                                  (server/container.py)

Runners supply ``_launch()``, ``_terminate()``, ``_exit_state()``; requests go through :mod:`tritonpt.client`.
"""

from __future__ import annotations

import abc
import enum
import os
import tempfile
import time
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import ClassVar, Literal, Self

from tritonclient.grpc.model_config_pb2 import ModelConfig
from tritonclient.utils import InferenceServerException

from tritonpt import client
from tritonpt.backend import LIBRARY, PT2_LIBRARY, PT2_NAME, Origin
from tritonpt.client import Endpoints, ModelState, pick_states
from tritonpt.errors import HINT, ModelLoadError, ServerError, ServerStartError
from tritonpt.server import waiting
from tritonpt.server.logtext import hint_for, worth_reading
from tritonpt.server.memory import rss_mb

ServerKind = Literal["local", "url", "container"]

TAIL_LINES = 25
EXIT_POLL_S = 0.1
"""How often :meth:`Server.exit_state` asks the runner while it waits for a verdict."""

__all__ = [
    "Endpoints",
    "ModelRuntime",
    "ModelState",
    "Server",
    "ServerKind",
    "State",
]


class State(enum.Enum):
    """Where a server object is in its life."""

    NEW = "new"  # never started
    STARTING = "starting"  # launched, not ready yet
    READY = "ready"  # start() returned
    STOPPED = "stopped"  # stop() ran (after a failed start too)


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
        """Served by the official pytorch backend: ``libtriton_pytorch.so``, or its PT2 build installed under the
        second name (``libtriton_pt2.so``, for torch_aoti on a server before Triton 26.03)."""
        return (self.backend, self.library) in {("pytorch", LIBRARY), (PT2_NAME, PT2_LIBRARY)}


class Server(abc.ABC):
    """A Triton server: started, asked, stopped. The checks never know what runs it."""

    kind: ClassVar[ServerKind]
    runs_server: ClassVar[bool] = True
    """Whether this object runs the server (a process, a container), so that one which stops answering while
    it still runs is hung; False for a server at a URL, which this object only talks to."""

    def __init__(self, *, start_timeout: float = 240.0) -> None:
        self.start_timeout = start_timeout
        self.state = State.NEW
        self.startup_seconds: float | None = None  # start() to ready, when this object started the server
        self._endpoints: Endpoints | None = None  # set by _launch() once the runner knows where it answers

    @property
    def endpoints(self) -> Endpoints:
        """Where the server answers; valid once ``start()`` returned."""
        if self._endpoints is None:
            msg = f"This {type(self).__name__} has not been started; call start() (or use it in a with block) first."
            raise ServerError(msg)
        return self._endpoints

    # --- the template ---------------------------------------------------------------------------------------------

    def start(self) -> None:
        """Launch, wait until ready and record how long it took; on any failure stop and re-raise."""
        if self.state in (State.STARTING, State.READY):
            msg = f"{self.describe()} is already started; stop() it before starting it again."
            raise ServerError(msg)
        self.state = State.STARTING
        self._endpoints = None
        began = time.monotonic()
        try:
            self._launch()
            self._await_ready(max(1.0, self.start_timeout - (time.monotonic() - began)))
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - began
        self.state = State.READY

    def stop(self) -> None:
        """Tear the server down (nothing for a server this object did not start); safe to call twice."""
        if self.state in (State.NEW, State.STOPPED):
            return
        try:
            self._terminate()
        finally:
            self.state = State.STOPPED

    def kill(self) -> None:
        """End what runs the server now, without asking it to stop (SIGKILL): for a server that stopped
        answering (SIGSTOP, a deadlock), which would sit out every graceful stop. Safe to call twice."""
        if self.state in (State.NEW, State.STOPPED):
            return
        try:
            self._kill()
        finally:
            self.state = State.STOPPED

    def reap_later(self) -> None:
        """Leave behind what removes this server once that is possible, when ``stop()`` could not finish (a
        container whose engine went away); nothing for runners whose ``stop()`` cannot be held up."""
        return  # a hook with nothing to do by default (a body, so not B027's empty method)

    def is_alive(self) -> bool:
        """Whether what runs the server is still running (for a URL: whether it answers)."""
        return self.state in (State.STARTING, State.READY) and self._exit_state() is None

    # --- what a runner provides -----------------------------------------------------------------------------------

    @abc.abstractmethod
    def _launch(self) -> None:
        """Bring the server up (or find it) and set ``_endpoints``; raise ``ServerStartError`` if it cannot."""

    @abc.abstractmethod
    def _terminate(self) -> None:
        """Bring down what ``_launch`` brought up, even halfway; called once per start."""

    def _kill(self) -> None:
        """Bring down what ``_launch`` brought up at once; by default as ``_terminate`` does."""
        self._terminate()

    def exit_state(self, wait: float = 0.0) -> str | None:
        """What ended the server, in words (an exit code, a signal, an OOM kill, a Docker engine gone), waiting up to
        ``wait`` seconds for a verdict; None while it runs."""
        return waiting.within(waiting.Gone(self._exit_state), wait, interval=EXIT_POLL_S)

    @abc.abstractmethod
    def _exit_state(self) -> str | None:
        """How the runner ended (``"exited with code 1"``), or ``None`` while it runs or cannot tell."""

    def ended_as(self, ended: str) -> str:
        """What the server did, in a few words for "the run was aborted, as the Triton server ...", given its
        ``exit_state()``; a runner that can tell more (a URL server) says so."""
        return "died"

    @property
    def left_behind(self) -> list[str]:
        """What ``stop()`` could not take back (a model it uploaded that it could not unload), with why."""
        return []

    def _await_ready(self, timeout: float) -> None:
        """What "started" means for this runner; by default :meth:`wait_ready`."""
        self.wait_ready(timeout)

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

    def server_pid(self) -> int | None:
        """The tritonserver's process id as this host sees it, when there is one here (None: a server at a URL)."""
        return None

    def memory_mb(self) -> float | None:
        """The server's resident memory in MiB, when this host can read it (None otherwise)."""
        pid = self.server_pid()
        if pid is None:
            return None
        try:
            return rss_mb(pid)[0]
        except (OSError, KeyError, ValueError):
            return None

    def pt2_origin(self) -> Origin | None:
        """Where the PT2 build serving torch_aoti models came from, when this runner installed one (server 2.51.0:
        under the second backend name); None otherwise (no PT2 models, or a server that serves them itself)."""
        return None

    def describe(self) -> str:
        """A few words naming this server in messages."""
        return f"the {self.kind} Triton server at {self.endpoints.http_url}"

    def _default_hint(self) -> str:
        return "the server's log says more; raise its verbosity (--log-verbose=1) if it does not."

    def _verdict_hint(self) -> str | None:
        """A hint the runner's own verdict makes surer than the log (an OOM kill, a lost engine), else None."""
        return None

    # --- helpers the runners share ----------------------------------------------------------------------------------

    @staticmethod
    def _repository_folder(repository: Path, where: str) -> Path:
        """The repository as an absolute folder, or ``ServerStartError`` before anything is launched."""
        folder = repository.absolute()
        if not folder.is_dir():
            msg = (
                f"Cannot start Triton {where}, as the model repository {folder} is not a folder.\n"
                f"{HINT} export a model first (it creates the repository), or pass the right path."
            )
            raise ServerStartError(msg)
        return folder

    @staticmethod
    def _log_file(path: Path | None, prefix: str) -> Path:
        """``path`` (its folder created), or a new temporary file when none was given."""
        if path is None:
            handle, name = tempfile.mkstemp(prefix=prefix, suffix=".log")
            os.close(handle)
            return Path(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

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

    # --- asked of the server, the same for every runner ----------------------------------------------------------

    def is_live(self) -> bool:
        """``GET /v2/health/live`` answers 200; ``OSError`` when nothing answers."""
        return client.is_live(self.endpoints)

    def is_ready(self) -> bool:
        """``GET /v2/health/ready`` answers 200 (with --strict-readiness: every model is ready too)."""
        return client.is_ready(self.endpoints)

    def repository_index(self) -> list[ModelState]:
        """Every model version with its state and Triton's reason; ``ServerError`` when the server refuses."""
        try:
            return client.repository_index(self.endpoints)
        except InferenceServerException as exc:
            msg = f"POST /v2/repository/index on {self.describe()} answered {exc.status()}: {exc.message()}"
            raise ServerError(msg) from exc

    def model_states(self, names: Iterable[str]) -> dict[str, ModelState]:
        """The state of each named model (its READY version if it has one); absent names are not loaded."""
        return pick_states(self.repository_index(), names)

    def load_model(self, name: str) -> None:
        """Load ``name`` through the repository API (explicit model control), from the server's own repository;
        tritonclient's ``InferenceServerException`` where the server refuses."""
        with client.http(self.endpoints) as http:
            http.load_model(name)

    def unload_model(self, name: str) -> None:
        """Unload ``name`` through the repository API; tritonclient's ``InferenceServerException`` where the
        server refuses (a server not in explicit model control)."""
        with client.http(self.endpoints) as http:
            http.unload_model(name)

    def model_config(self, name: str) -> ModelConfig:
        """The config the server filled in for ``name``, as Triton's own protobuf message."""
        try:
            return client.model_config(self.endpoints, name)
        except InferenceServerException as exc:
            msg = (
                f"GET /v2/models/{name}/config on {self.describe()} answered {exc.status()}: {exc.message()}"
            )
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
        UNLOADING (:class:`~tritonpt.server.waiting.Ready`): with --strict-readiness one model that failed to
        load keeps ``/v2/health/ready`` at 400 for good, and saying which model failed and why is
        :meth:`wait_models_ready`'s job. Fails fast, with the log tail, when the runner exits.
        """
        ready = waiting.Ready(self)
        try:
            waiting.until(ready, timeout, ended=self._exit_state)
        except waiting.ServerEndedError as gone:
            headline = f"{self.describe()} {gone.verdict} before it was ready ({gone.waited:.1f} s after waiting began)"
            raise ServerStartError(self.failure(headline)) from None
        except waiting.WaitTimeoutError:
            headline = f"{self.describe()} was not ready within {timeout:.0f} s; last seen: {ready.last}"
            raise ServerStartError(self.failure(headline)) from None

    def wait_models_ready(self, names: Sequence[str], timeout: float = 120.0) -> dict[str, ModelState]:
        """Return each model's state once all are READY; raise ``ModelLoadError`` with Triton's reasons if not.

        Fails as soon as every model has settled (a failed load does not come back on its own), or when
        ``timeout`` seconds pass with some still loading.
        """
        models = waiting.ModelsReady(self, names)
        try:
            return waiting.until(models, timeout, ended=self._exit_state)
        except waiting.ServerEndedError as gone:
            headline = f"{self.describe()} {gone.verdict} while its models were loading"
            raise ServerStartError(self.failure(headline)) from None
        except waiting.LoadsSettledError as settled:
            raise self._not_ready(settled.states, waited=settled.waited, timed_out=False) from None
        except waiting.WaitTimeoutError as late:
            if models.error is not None:
                msg = (
                    f"{self.describe()} stopped answering while its models were loading "
                    f"({waiting.reason(models.error)})."
                )
                raise ServerStartError(self.failure(msg)) from models.error
            raise self._not_ready(models.states, waited=late.waited, timed_out=True) from None

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
        lines.append(f"{HINT} {hint}")
        return ModelLoadError("\n".join(lines), reasons)

    def failure(self, headline: str, *, hint: str | None = None) -> str:
        """A failure message: the headline, the last telling log lines and a Hint: sentence (``hint``, else one
        chosen from what the runner knows and what the log says)."""
        tail = worth_reading(self.log_tail(400).splitlines())[-TAIL_LINES:]
        parts = [headline.rstrip(".") + "."]
        if tail:
            source = f" of {self.log_path}" if self.log_path else ""
            parts.append(f"Last {len(tail)} log lines{source} (tables and no-GPU notices left out):")
            parts.extend(f"    {line}" for line in tail)
        else:
            parts.append("No server log is available here.")
        hint = hint or self._verdict_hint() or hint_for(chr(10).join(tail)) or self._default_hint()
        parts.append(f"{HINT} {hint}")
        return "\n".join(parts)
