"""The one poll loop and its conditions, and the Server waits built on them, against a scripted server."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import ClassVar, TypeVar

import pytest

from tritonpt.client import Endpoints, ModelState
from tritonpt.errors import ModelLoadError, ServerError, ServerStartError
from tritonpt.server import waiting
from tritonpt.server.base import Server, ServerKind, State

T = TypeVar("T")


class Scripted(Server):
    """A server whose answers are scripted: each probe takes the next answer (the last one repeats)."""

    kind: ClassVar[ServerKind] = "url"

    def __init__(
        self,
        *,
        ready: list[bool | OSError] | None = None,
        index: list[list[ModelState] | OSError] | None = None,
        ended: list[str | None] | None = None,
    ) -> None:
        super().__init__()
        self._endpoints = Endpoints.on_host("127.0.0.1", http_port=1, grpc_port=2, metrics_port=3)
        self.state = State.STARTING
        self.ready, self.index, self.ended = (
            iter_last(ready or [True]),
            iter_last(index or [[]]),
            ended or [None],
        )
        self.asked = 0

    def _launch(self) -> None:
        pass

    def _terminate(self) -> None:
        pass

    def _exit_state(self) -> str | None:
        self.asked += 1
        return self.ended.pop(0) if len(self.ended) > 1 else self.ended[0]

    def describe(self) -> str:
        return "the scripted server"

    def is_ready(self) -> bool:
        answer = next(self.ready)
        if isinstance(answer, OSError):
            raise answer
        return answer

    def is_live(self) -> bool:
        return True

    def repository_index(self) -> list[ModelState]:
        answer = next(self.index)
        if isinstance(answer, OSError):
            raise answer
        return answer


def iter_last(answers: list[T]) -> Iterator[T]:
    yield from answers[:-1]
    while True:
        yield answers[-1]


def model(name: str, state: str, reason: str = "") -> ModelState:
    return ModelState(name=name, version="1", state=state, reason=reason)


class Count(waiting.Condition[int]):
    """Holds on its ``holds``-th check."""

    expected = "the count"

    def __init__(self, holds: int) -> None:
        super().__init__()
        self.holds, self.checks = holds, 0

    def check(self, clock: waiting.Clock) -> int | None:
        self.checks += 1
        self.last = f"{self.checks} check(s)"
        return self.checks if self.checks >= self.holds else None


def test_until_returns_what_the_condition_found() -> None:
    assert waiting.until(Count(3), 5.0, interval=0.001) == 3


def test_until_times_out_with_the_state_last_seen() -> None:
    count = Count(10**6)
    with pytest.raises(
        waiting.WaitTimeoutError, match=r"for the count in vain; last seen: \d+ check\(s\)"
    ) as late:
        waiting.until(count, 0.05, interval=0.01)
    assert isinstance(late.value, ServerError)
    assert late.value.condition is count
    assert late.value.waited >= 0.05
    assert count.checks >= 2


def test_a_condition_is_checked_once_even_without_time() -> None:
    count = Count(2)
    assert waiting.within(count, 0.0, interval=0.001) is None
    assert count.checks == 1


def test_until_stops_at_once_when_the_runner_says_it_ended() -> None:
    count = Count(10**6)
    with pytest.raises(waiting.ServerEndedError) as gone:
        waiting.until(count, 60.0, interval=0.001, ended=lambda: "exited with code 1")
    assert gone.value.verdict == "exited with code 1"
    assert count.checks == 0


def test_live_is_over_once_its_event_is_set() -> None:
    stop = threading.Event()
    probes: list[int] = []

    def probe() -> bool:
        probes.append(1)
        raise ConnectionRefusedError(111, "Connection refused")

    live = waiting.Live(probe, unless=stop)
    assert waiting.within(live, 0.0) is None
    assert live.last == "[Errno 111] Connection refused"
    stop.set()
    assert waiting.within(live, 60.0) is True
    assert len(probes) == 1


def test_a_process_group_that_ended_is_gone() -> None:
    process = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
    process.wait()
    assert waiting.within(waiting.GroupGone(process.pid), 5.0, interval=0.01) is True


def test_exit_state_waits_for_a_verdict_and_gives_up_after_its_wait() -> None:
    server = Scripted(ended=[None, None, "exited with code 1"])
    assert server.exit_state(wait=5.0) == "exited with code 1"
    assert server.asked == 3
    assert Scripted().exit_state(wait=0.0) is None


def test_wait_ready_returns_once_ready() -> None:
    Scripted(ready=[ConnectionRefusedError(111, "Connection refused"), True]).wait_ready(5.0)


def test_wait_ready_says_what_it_saw_last_when_it_times_out() -> None:
    server = Scripted(ready=[ConnectionRefusedError(111, "Connection refused")])
    with pytest.raises(ServerStartError) as late:
        server.wait_ready(0.0)
    assert str(late.value).startswith(
        "the scripted server was not ready within 0 s; last seen: not answering ([Errno 111] Connection refused).\n"
    )
    assert late.value.__cause__ is None


def test_wait_ready_fails_fast_when_the_runner_ends() -> None:
    server = Scripted(ready=[False], index=[[model("a", "LOADING")]], ended=[None, "exited with code 1"])
    with pytest.raises(
        ServerStartError, match=r"^the scripted server exited with code 1 before it was ready \("
    ):
        server.wait_ready(60.0)


def test_wait_models_ready_returns_their_states() -> None:
    server = Scripted(index=[[model("a", "LOADING")], [model("a", "READY"), model("b", "LOADING")]])
    assert server.wait_models_ready(["a"], 5.0) == {"a": model("a", "READY")}


def test_wait_models_ready_fails_once_the_loads_settled() -> None:
    server = Scripted(index=[[model("a", "READY"), model("b", "UNAVAILABLE", "boom")]])
    with pytest.raises(
        ModelLoadError, match=r"^1 of 2 model\(s\) did not become ready on the scripted server \(settled"
    ):
        server.wait_models_ready(["a", "b"], 60.0)


def test_wait_models_ready_times_out_while_they_load() -> None:
    server = Scripted(index=[[model("a", "LOADING")]])
    with pytest.raises(ModelLoadError, match=r"\(still loading after"):
        server.wait_models_ready(["a"], 0.0)


def test_wait_models_ready_says_when_the_index_stopped_answering() -> None:
    refused = ConnectionRefusedError(111, "Connection refused")
    server = Scripted(index=[refused])
    with pytest.raises(ServerStartError) as late:
        server.wait_models_ready(["a"], 0.0)
    assert str(late.value).startswith(
        "the scripted server stopped answering while its models were loading ([Errno 111] Connection refused).\n"
    )
    assert late.value.__cause__ is refused


def test_wait_models_ready_fails_fast_when_the_runner_ends() -> None:
    server = Scripted(index=[[model("a", "LOADING")]], ended=["was killed by signal SIGKILL (exit code 137)"])
    with pytest.raises(
        ServerStartError, match=r"^the scripted server was killed by signal SIGKILL \(exit code 137\) while"
    ):
        server.wait_models_ready(["a"], 60.0)
