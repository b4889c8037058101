"""What came back: the threads that send the planned requests and compare every response, and the server's RSS."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from tritonpt import assertions, client
from tritonpt.client import Connection, Endpoints
from tritonpt_ci.soak.plan import PROGRESS_S, Request, SoakModel

# --- What came back ----------------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Outcome:
    request: Request
    seconds: float
    error: str = ""  # the request failed: what the client or the server said
    mismatches: tuple[str, ...] = ()  # one line per output out of tolerance

    @property
    def ok(self) -> bool:
        return not self.error and not self.mismatches

    def describe(self) -> str:
        r = self.request
        rows = f"rows {r.start}..{r.start + r.rows - 1}" if r.rows else "as it is"
        what = self.error or "; ".join(self.mismatches)
        return f"request {r.index} ({r.model} over {r.protocol}, case {r.case}, {rows}): {what}"


NO_REQUEST = Request(index=-1, model="", protocol="http", case="", start=0, rows=0)
"""What a failure outside any request is recorded against (it is no request sent)."""


class Runner:
    """Sends planned requests from ``concurrency`` threads, each with one HTTP and one gRPC client of its own."""

    def __init__(
        self,
        endpoints: Endpoints,
        models: dict[str, SoakModel],
        *,
        concurrency: int,
        stop: threading.Event,
        progress: Callable[[Sequence[Outcome]], None] = lambda _: None,
    ) -> None:
        self.endpoints = endpoints
        self.models = models
        self.concurrency = concurrency
        self.stop = stop
        self.progress = progress
        self.outcomes: list[Outcome] = []  # appended by the workers (list.append is atomic)
        self._lock = threading.Lock()
        self._queue: Iterator[Request] = iter(())

    def run(self, requests: Sequence[Request]) -> list[Outcome]:
        """Every request sent (unless ``stop`` is set), their outcomes in the order they finished."""
        self.outcomes = []
        self._queue = iter(requests)
        workers = [
            threading.Thread(target=self._work, name=f"soak-{n}", daemon=True)
            for n in range(self.concurrency)
        ]
        for worker in workers:
            worker.start()
        said = time.monotonic()
        try:
            while alive := [worker for worker in workers if worker.is_alive()]:
                alive[0].join(0.5)
                if time.monotonic() - said >= PROGRESS_S:
                    self.progress(self.outcomes)
                    said = time.monotonic()
        except BaseException:
            self.stop.set()  # Ctrl-C: each worker finishes the request in hand and stops
            raise
        return list(self.outcomes)

    def _next(self) -> Request | None:
        with self._lock:
            return None if self.stop.is_set() else next(self._queue, None)

    def _work(self) -> None:
        """Send requests until none is left; a request that fails is counted and the clients are opened again."""
        while True:
            current: Request | None = None
            began = time.perf_counter()
            try:
                with client.http(self.endpoints) as http, client.grpc(self.endpoints) as grpc:
                    connections = {"http": http, "grpc": grpc}
                    while (current := self._next()) is not None:
                        began = time.perf_counter()
                        self.outcomes.append(self._one(current, connections[current.protocol], began))
            except Exception as exc:  # whatever a request raised is the soak's finding, counted
                if current is None:  # the clients failed outside any request: this worker stops, saying so
                    self.outcomes.append(
                        Outcome(request=NO_REQUEST, seconds=0.0, error=f"a client failed: {_words(exc)}")
                    )
                    return
                self.outcomes.append(
                    Outcome(request=current, seconds=time.perf_counter() - began, error=_words(exc))
                )
            else:
                return

    def _one(self, request: Request, connection: Connection, began: float) -> Outcome:
        model = self.models[request.model]
        inputs, expected = model.payload(request)
        names = [o.name for o in model.reference.outputs]
        got = client.infer_on(connection, request.protocol, model.name, inputs, names)
        seconds = time.perf_counter() - began
        comparisons = assertions.compare_outputs(model.reference.outputs, got, expected, gpu=model.gpu)
        return Outcome(request=request, seconds=seconds, mismatches=tuple(assertions.mismatches(comparisons)))


def _words(exc: BaseException) -> str:
    """An exception as one line: its type and message (tritonclient's carry the status and the server's words)."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
