"""A watchdog for a running server: when it dies, say so at once instead of waiting out a client's timeout.

    with Watchdog(server, on_death=abort):     # a daemon thread, every 0.5 s: has what runs the server
        run_the_matrix()                      # ended, or has it stopped answering /v2/health/live?

``on_death`` gets one :class:`Ending` (a paragraph, and whether the server hung rather than died), once, from
the watchdog's thread. :func:`end_now` ends a run for it the same way everywhere: reports written, the
paragraph said once, the server stopped, exit 1.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import NoReturn

from tritonpt import client
from tritonpt.server import logtext, waiting
from tritonpt.server.base import Server

INTERVAL_S = 0.5
PROBE_TIMEOUT_S = 1.0
MISSES = 5
"""Probes in a row without an answer before a server that its runner still calls alive counts as gone
(at most about 7.5 s); a runner's own verdict (the process exited) counts at once."""
STOP_WAIT_S = 5.0
"""How long an ending run gives the server's runner to clean up (a container to remove). Right after a container
was killed the engine answers slowly: up to 3.2 s to stop, check and remove it on our 2-core machine."""
HUNG = "stopped answering"
HUNG_HINT = (
    "what runs the server still runs, but Triton answers nothing: it was stopped (SIGSTOP, `kill -STOP`, a "
    "debugger, `docker pause`) or is deadlocked. It is killed now (SIGKILL, with its process group or its "
    "container), so that it does not hold its ports and GPU after this run. To see where a deadlocked server "
    "waits, run it again and `gdb -p PID -batch -ex 'thread apply all bt'` once it hangs."
)


@dataclass(frozen=True, kw_only=True)
class Ending:
    """How a watched server ended: the paragraph to say, and whether it hung (its runner says it runs, but it
    no longer answers) rather than died."""

    paragraph: str
    hung: bool
    ended_as: str = "died"  # what the server did, in end_now's words, where it did not hang

    @property
    def headline(self) -> str:
        return "stopped answering" if self.hung else self.ended_as


def end_now(
    server: Server,
    ending: Ending,
    *,
    what: str,
    write_reports: Callable[[], str],
    then: Callable[[], None] | None = None,
) -> NoReturn:
    """End a run whose server died or hung: reports first (``write_reports`` returns where they went), the
    paragraph once on stderr, then the server stopped within :data:`STOP_WAIT_S`, ``then`` (the matrix's rerun
    policy, which may replace the process) and the process gone (exit 1).

    A hung server is SIGKILLed at once (:meth:`Server.kill`: its process group, or ``docker kill`` and the
    container removed): a graceful stop would wait on a process that cannot answer, and it must not outlive the
    run, holding its ports and its GPU. Requests in flight are abandoned (``os._exit``): nobody waits out a
    client timeout, and no client library gets to print a traceback.
    """
    reports = "?"
    with contextlib.suppress(Exception):  # the reports are written if they can be; the exit comes anyway
        reports = write_reports()
    sys.stderr.write(
        f"\nThe {what} was aborted, as the Triton server {ending.headline}.\n{ending.paragraph}\n"
    )
    sys.stderr.write(f"Reports: {reports}\n")
    sys.stderr.flush()
    cleanup = threading.Thread(target=server.kill if ending.hung else server.stop, daemon=True)
    cleanup.start()
    cleanup.join(timeout=STOP_WAIT_S)
    if cleanup.is_alive():  # held up (an engine that is stopping): what runs the server is removed later
        server.reap_later()
    sys.stderr.write(left_behind(server))
    sys.stderr.flush()
    if then is not None:
        with contextlib.suppress(Exception):  # a policy that fails must not keep the run from ending
            then()
    os._exit(1)


def left_behind(server: Server) -> str:
    """After a stop, what it could not take back from the server (an upload it could not unload), as lines to
    say; empty when nothing was left."""
    if not server.left_behind:
        return ""
    return (
        f"Left on {server.describe()} (unload them yourself: POST /v2/repository/models/NAME/unload):\n"
        + ("".join(f"    {item}\n" for item in server.left_behind))
    )


class Watchdog:
    """Watch ``server`` from a daemon thread; call ``on_death(ending)`` once if it dies or hangs."""

    def __init__(
        self,
        server: Server,
        on_death: Callable[[Ending], None],
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
        live = waiting.Live(
            lambda: client.is_live(self.server.endpoints, timeout=PROBE_TIMEOUT_S), unless=self._stop
        )
        waiting.within(live, timeout, interval=self.interval)

    def verdict(self, missed: int) -> tuple[str | None, int]:
        """How the server ended (or None), and the probes missed in a row so far."""
        ended = self.server.exit_state()
        if ended is not None:
            return ended, missed
        try:
            answered = client.is_live(self.server.endpoints, timeout=PROBE_TIMEOUT_S)
        except OSError:
            answered = False
        missed = 0 if answered else missed + 1
        if missed >= self.misses:
            return f"{HUNG} /v2/health/live ({missed} probes in a row)", missed
        return None, missed

    def _watch(self) -> None:
        missed = 0
        while not self._stop.wait(self.interval):
            ended, missed = self.verdict(missed)
            if ended is not None and not self._stop.is_set():
                noticed = time.strftime("%H:%M:%S")
                # A server on its way down after a signal (SIGTERM: Triton closes its ports, then unloads) does
                # not answer either; its log says so, and it is not hung: it is ended gracefully, as it began.
                # A server this run does not run (at a URL) cannot be told hung from gone: it says how itself.
                hung = (
                    self.server.runs_server
                    and ended.startswith(HUNG)
                    and not logtext.signalled(self.server.log_tail(60))
                )
                paragraph = self.server.failure(
                    f"{self.server.describe()} {ended} {self.what} (noticed {noticed})",
                    hint=HUNG_HINT if hung else None,
                )
                self.on_death(Ending(paragraph=paragraph, hung=hung, ended_as=self.server.ended_as(ended)))
                return
