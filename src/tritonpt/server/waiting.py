"""Waiting on a server, as testcontainers' wait strategies do: one poll loop, and the conditions it waits for.

    until(condition, timeout)    poll until it holds: what it found; WaitTimeoutError past the deadline
    within(condition, timeout)   the same, but None past the deadline
    conditions                   Ready, ModelsReady, Live, Gone (a runner's verdict), GroupGone

A condition's ``check(clock)`` returns what it found, or None while it does not hold (what it saw: ``last``).
It knows no server, only :class:`Asked`; :class:`~tritonpt.server.base.Server` words the messages.
"""

from __future__ import annotations

import abc
import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Generic, Protocol, TypeVar

from tritonclient.utils import InferenceServerException

from tritonpt import client
from tritonpt.client import POLL_INTERVAL_S, ModelState, pick_states
from tritonpt.errors import ServerError

__all__ = [
    "Asked",
    "Clock",
    "Condition",
    "Gone",
    "GroupGone",
    "Live",
    "LoadsSettledError",
    "ModelsReady",
    "Ready",
    "ServerEndedError",
    "WaitTimeoutError",
    "reason",
    "until",
    "within",
]

T = TypeVar("T")

Verdict = Callable[[], "str | None"]
"""A runner's word on what runs the server: how it ended ("exited with code 1"), or None while it runs."""


class Clock:
    """When a wait began, and how long it may last."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.began = time.monotonic()

    @property
    def waited(self) -> float:
        """Seconds since the wait began."""
        return time.monotonic() - self.began


class Condition(abc.ABC, Generic[T]):
    """What a wait waits for."""

    expected: str = "the condition"
    """What holds once the wait is over, for the timeout's message ("the server ready")."""

    def __init__(self) -> None:
        self.last = "nothing seen yet"
        """The state last seen, in words."""

    @abc.abstractmethod
    def check(self, clock: Clock) -> T | None:
        """What was found once the condition holds, None while it does not; may raise to end the wait now."""


class WaitTimeoutError(ServerError):
    """A condition that did not hold within the wait's timeout."""

    def __init__(self, condition: Condition[Any], clock: Clock) -> None:
        self.condition = condition
        self.timeout = clock.timeout
        self.waited = clock.waited
        super().__init__(
            f"Waited {clock.timeout:.0f} s for {condition.expected} in vain; last seen: {condition.last}."
        )


class ServerEndedError(ServerError):
    """What runs the server ended while the wait was on (the ``ended`` verdict of :func:`until`)."""

    def __init__(self, verdict: str, *, waited: float) -> None:
        self.verdict = verdict
        self.waited = waited
        super().__init__(f"What runs the server {verdict}, {waited:.1f} s after waiting began.")


class LoadsSettledError(ServerError):
    """Every model load settled, and not every model waited for is READY: a failed load does not come back."""

    def __init__(self, states: dict[str, ModelState], *, waited: float) -> None:
        self.states = states
        self.waited = waited
        failed = sorted(name for name, state in states.items() if not state.ready)
        super().__init__(f"The loads settled after {waited:.1f} s without {', '.join(failed)} READY.")


def until(
    condition: Condition[T],
    timeout: float,
    *,
    interval: float = POLL_INTERVAL_S,
    ended: Verdict | None = None,
) -> T:
    """Check ``condition`` every ``interval`` seconds until it holds, and return what it found.

    Each round first asks ``ended`` (when given) and raises :class:`ServerEndedError` on a verdict: a server
    whose process exited is not waited for. Past ``timeout`` seconds, :class:`WaitTimeoutError`. A condition is
    checked at least once, and once more when the deadline passes during the last interval.
    """
    clock = Clock(timeout)

    def look() -> T | None:
        verdict = ended() if ended is not None else None
        if verdict is not None:
            raise ServerEndedError(verdict, waited=clock.waited)
        return condition.check(clock)

    found = client.poll_until(look, timeout=timeout, interval=interval)
    if found is None:
        raise WaitTimeoutError(condition, clock)
    return found


def within(condition: Condition[T], timeout: float, *, interval: float = POLL_INTERVAL_S) -> T | None:
    """What :func:`until` finds, or None when ``condition`` did not hold within ``timeout`` seconds."""
    try:
        found = until(condition, timeout, interval=interval)
    except WaitTimeoutError:
        return None
    return found


def reason(exc: BaseException) -> str:
    """Why a probe failed, in a few words: Triton's status and message, or the connection's error."""
    if isinstance(exc, InferenceServerException):
        return f"{exc.status()}: {exc.message()}"
    return str(getattr(exc, "reason", None) or exc) or type(exc).__name__


class Asked(Protocol):
    """What the conditions ask of a server (:class:`~tritonpt.server.base.Server` answers all of it)."""

    def is_live(self) -> bool: ...

    def is_ready(self) -> bool: ...

    def repository_index(self) -> list[ModelState]: ...


INDEX_ERRORS = (OSError, ServerError, ValueError)
"""How a repository index fails while the server comes up or goes down: nothing answers, it refuses, or it
answers what is not JSON."""


class Ready(Condition[bool]):
    """The server answers and has settled its startup model loads.

    Ready means ``/v2/health/ready`` answers 200, or the server is live and no model is LOADING or UNLOADING:
    with --strict-readiness one model that failed to load keeps ``/v2/health/ready`` at 400 for good, and
    saying which model failed and why is :class:`ModelsReady`'s job.
    """

    expected = "the server ready"

    def __init__(self, server: Asked) -> None:
        super().__init__()
        self.server = server
        self.last = "nothing answered yet"

    def check(self, clock: Clock) -> bool | None:
        try:
            ready = self.server.is_ready()
            live = ready or self.server.is_live()
        except OSError as exc:
            self.last = f"not answering ({reason(exc)})"
            return None
        if ready:
            return True
        if not live:
            self.last = "answering, but not live"
            return None
        try:
            busy = [state for state in self.server.repository_index() if state.busy]
        except INDEX_ERRORS as exc:
            self.last = f"live but not ready, and its repository index failed ({reason(exc)})"
            return None
        if not busy:
            return True
        self.last = f"live, {len(busy)} model version(s) still loading or unloading"
        return None


class ModelsReady(Condition[dict[str, ModelState]]):
    """Every named model READY: their states (each name's READY version if it has one).

    Raises :class:`LoadsSettledError` as soon as no model of the server is LOADING or UNLOADING and some named
    one is not READY. ``states`` holds what the last index said, ``error`` why the last index failed (None if it
    did not).
    """

    expected = "every model ready"

    def __init__(self, server: Asked, names: Sequence[str]) -> None:
        super().__init__()
        self.server = server
        self.names = names
        self.states: dict[str, ModelState] = {}
        self.error: BaseException | None = None

    def check(self, clock: Clock) -> dict[str, ModelState] | None:
        try:
            index = self.server.repository_index()
        except INDEX_ERRORS as exc:
            self.error = exc
            self.last = f"its repository index failed ({reason(exc)})"
            return None
        self.error = None
        self.states = pick_states(index, self.names)
        if all(state.ready for state in self.states.values()):
            return self.states
        if not any(state.busy for state in index):
            raise LoadsSettledError(self.states, waited=clock.waited)
        waiting = sum(not state.ready for state in self.states.values())
        self.last = f"{waiting} of {len(self.states)} model(s) not ready yet"
        return None


class Live(Condition[bool]):
    """``probe`` (a ``GET /v2/health/live``) answers 200; OSError from it means nothing answers yet.

    With ``unless``, the wait is over once that event is set (whoever waited has stopped caring), probed or not.
    """

    expected = "/v2/health/live to answer 200"

    def __init__(self, probe: Callable[[], bool], *, unless: threading.Event | None = None) -> None:
        super().__init__()
        self.probe = probe
        self.unless = unless
        self.last = "nothing answered"

    def check(self, clock: Clock) -> bool | None:
        if self.unless is not None and self.unless.is_set():
            return True
        try:
            if self.probe():
                return True
            self.last = "it answers, but /v2/health/live is not 200"
        except OSError as exc:
            self.last = reason(exc)
        return None


class Gone(Condition[str]):
    """What runs the server ended: the runner's verdict, in words."""

    expected = "what runs the server to end"

    def __init__(self, verdict: Verdict) -> None:
        super().__init__()
        self.verdict = verdict
        self.last = "it runs"

    def check(self, clock: Clock) -> str | None:
        return self.verdict()


class GroupGone(Condition[bool]):
    """No process of the process group ``pgid`` is left (orphans are reaped by init, not by us)."""

    def __init__(self, pgid: int) -> None:
        super().__init__()
        self.pgid = pgid
        self.expected = f"process group {pgid} to empty"
        self.last = "processes left in it"

    def check(self, clock: Clock) -> bool | None:
        try:
            os.killpg(self.pgid, 0)
        except (ProcessLookupError, PermissionError):
            return True
        return None
