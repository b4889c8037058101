"""A watchdog for a running server: when it dies, say so at once instead of waiting out a client's timeout.

    with Watchdog(server, on_death=abort):     # a daemon thread, every 0.5 s:
        run_the_matrix()                      #   what runs the server says it ended (a process, a container)
                                              #   or it stopped answering /v2/health/live (an engine that went away)

``on_death`` gets one paragraph (what died, how, the last log lines and a ``Hint:``) and is called once, from
the watchdog's thread: requests in flight on other threads are not waited for, so it is the caller's to end the
run (the integration harness writes its reports and exits).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from types import TracebackType

from tritonpt import client
from tritonpt.server.base import Server

INTERVAL_S = 0.5
PROBE_TIMEOUT_S = 1.0
MISSES = 5
"""Probes in a row without an answer before a server that its runner still calls alive counts as gone
(at most about 7.5 s); a runner's own verdict (the process exited) counts at once."""


class Watchdog:
    """Watch ``server`` from a daemon thread; call ``on_death(paragraph)`` once if it dies."""

    def __init__(
        self,
        server: Server,
        on_death: Callable[[str], None],
        *,
        interval: float = INTERVAL_S,
        misses: int = MISSES,
        what: str = "while it was in use",
    ) -> None:
        self.server = server
        self.on_death = on_death
        self.interval = interval
        self.misses = misses
        self.what = what
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="tritonpt-watchdog", daemon=True)

    def __enter__(self) -> Watchdog:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def hold_while_unanswered(self, timeout: float) -> None:
        """Block while the server does not answer a live probe, at most ``timeout`` seconds.

        For a check that just failed: a server on its way down (SIGTERM: Triton closes its ports a moment
        before its process ends) fails every check at once, and this gives the watchdog's verdict, one
        paragraph, the time to end the run before the failures pile up. A server that answers costs one probe.
        """
        deadline = time.monotonic() + timeout
        while not self._stop.is_set():
            try:
                if client.is_live(self.server.endpoints, timeout=PROBE_TIMEOUT_S):
                    return
            except OSError:
                pass
            if time.monotonic() >= deadline:
                return
            time.sleep(self.interval)

    def verdict(self, missed: int) -> tuple[str | None, int]:
        """How the server ended (or None), and the probes missed in a row so far."""
        ended = self.server._exit_state()
        if ended is not None:
            return ended, missed
        try:
            answered = client.is_live(self.server.endpoints, timeout=PROBE_TIMEOUT_S)
        except OSError:
            answered = False
        missed = 0 if answered else missed + 1
        if missed >= self.misses:
            return f"stopped answering /v2/health/live ({missed} probes in a row)", missed
        return None, missed

    def _watch(self) -> None:
        missed = 0
        while not self._stop.wait(self.interval):
            ended, missed = self.verdict(missed)
            if ended is not None and not self._stop.is_set():
                noticed = time.strftime("%H:%M:%S")
                self.on_death(
                    self.server.failure(f"{self.server.describe()} {ended} {self.what} (noticed {noticed})")
                )
                return
