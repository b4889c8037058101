"""What a stop signal does: which signals interrupt a front door, and which steps they cannot cut in half.

:func:`stop_signals_interrupt` turns SIGTERM and SIGHUP into :class:`Interrupted` and SIGINT into
``KeyboardInterrupt`` (even where it was ignored), so every stop tears down as Ctrl-C does; :func:`ctrl_c_held`
runs a step with interrupts set aside; :func:`forward_stop_signals` lets nox pass a stop on to its command;
:func:`stop_group` stops a child's process group; :func:`hold_at` pauses a front door at the step a fault test
names (``$TRITONPT_HOLD_AT``). Standard library only: noxfile.py imports it before anything is installed.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import FrameType

__all__ = [
    "INTERRUPTS",
    "Interrupted",
    "ctrl_c_held",
    "exit_code",
    "forward_stop_signals",
    "hold_at",
    "install_stop_signals",
    "stop_signals_interrupt",
]

INTERRUPTS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
"""The signals that end a front door the way Ctrl-C does (once :func:`stop_signals_interrupt` is in force)."""

RESEND_S = 0.01
"""How long after a stop that landed where it cannot be raised it is sent again (if it lands so again, again)."""

Handler = Callable[[int, FrameType | None], object] | int | None

HOLD_ENV = "TRITONPT_HOLD_AT"
"""Text of a step (a progress line, ``check <test id>`` in the matrix) where a front door pauses for a fault test."""
HELD_ENV = "TRITONPT_HELD"
"""The file a paused front door writes ``holding at: <step>`` to (default: its stderr; pytest captures that)."""
HOLD_S = 600.0
"""How long a front door waits at its hold for the stop the test sends; then it goes on."""


class Interrupted(KeyboardInterrupt):
    """A stop signal other than SIGINT, raised where Ctrl-C's ``KeyboardInterrupt`` would be; ``signum`` is which."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(signal.Signals(signum).name)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    """Raise the stop where the signal lands (``KeyboardInterrupt`` for SIGINT, else :class:`Interrupted`); in a
    finalizer, where Python would swallow it (a client's ``__del__``: the fault tier saw a stop lost that way and
    the run went on), send the signal again a moment later instead, so that it is raised after the finalizer.
    The same where the landing bytecode has no source line: the traceback's ``tb_lineno`` would be ``None``, and
    pytest's ``pytest_keyboard_interrupt`` (9.2) fails on it with a ``TypeError``, so that a matrix stopped by
    SIGHUP once exited 1 with two tracebacks instead of 2 (the fault tier, 2026-12-05)."""
    if _in_finalizer(frame) or _lineless(frame):
        _resend(signum)
        return
    raise _stop(signum)


def _stop(signum: int) -> KeyboardInterrupt:
    return KeyboardInterrupt() if signum == signal.SIGINT else Interrupted(signum)


class _Resend:
    """A stop set aside, sent again :data:`RESEND_S` later from another thread (re-sent from the handler, the
    signal would run the handler again at once, inside itself), unless the block it interrupts claims it first."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        self._lock = threading.Lock()
        self._done = False
        timer = threading.Timer(RESEND_S, self._fire)
        timer.daemon = True
        timer.start()

    def _fire(self) -> None:
        with self._lock:  # the block's end cannot claim it (and restore the old handlers) between these two
            if self._done:
                return
            self._done = True
            os.kill(os.getpid(), self.signum)

    def claim(self) -> bool:
        """True once, for whoever comes first: the timer (which sends it) or the block's end (which raises it)."""
        with self._lock:
            first, self._done = not self._done, True
        return first


_RESENDING: list[_Resend] = []


def _resend(signum: int) -> None:
    _RESENDING.append(_Resend(signum))


def _lineless(frame: FrameType | None) -> bool:
    """Whether the frame, or one it was called from, stands on a bytecode without a line: a stop raised there
    carries that frame in its traceback. The callers count too: a stop can land inside this handler's own resend
    (in ``Thread.start``) while the frame it interrupted has no line (8 parallel runs of the test saw it twice)."""
    while frame is not None:
        if frame.f_lineno is None:
            return True
        frame = frame.f_back
    return False


def _in_finalizer(frame: FrameType | None) -> bool:
    while frame is not None:
        if frame.f_code.co_name == "__del__":
            return True
        frame = frame.f_back
    return False


def _swallowed(args: sys.UnraisableHookArgs) -> None:
    """Python's unraisable hook, for a stop it would otherwise print and drop: raised where no exception can leave
    (a weakref callback, a C library's callback, a finalizer the frame test above did not see; the fault tier saw
    a Ctrl-C printed that way as a one-frame traceback while the run went on). The stop is sent again a moment
    later, to land where it can interrupt; anything else goes to the hook that was there."""
    stop = args.exc_value
    if isinstance(stop, KeyboardInterrupt):
        _resend(stop.signum if isinstance(stop, Interrupted) else signal.SIGINT)
        return
    _PREVIOUS_HOOK(args)


_PREVIOUS_HOOK = sys.unraisablehook


def hold_at(step: str) -> None:
    """A fault test's pause: where ``$TRITONPT_HOLD_AT`` is part of ``step``, say ``holding at: <step>`` (to the
    file ``$TRITONPT_HELD``, else stderr) and wait up to :data:`HOLD_S` for a stop, in short sleeps so that a stop
    (or an interrupt another thread raises here) ends the wait at once. Nothing at all where the variable is unset.
    Each process holds once, at the first step that matches."""
    wanted = os.environ.get(HOLD_ENV)
    if not wanted or wanted not in step or _HELD.is_set():
        return
    _HELD.set()
    said = f"holding at: {step}\n"
    target = os.environ.get(HELD_ENV)
    if target:
        with Path(target).open("a", encoding="utf-8") as stream:
            stream.write(said)
    else:
        sys.stderr.write(said)
        sys.stderr.flush()
    deadline = time.monotonic() + HOLD_S
    while time.monotonic() < deadline:
        time.sleep(0.05)


_HELD = threading.Event()


def exit_code(interrupt: KeyboardInterrupt) -> int:
    """128 + the signal's number, as a shell reports a process ended by it: 130 for Ctrl-C, 143 for SIGTERM."""
    return 128 + (interrupt.signum if isinstance(interrupt, Interrupted) else signal.SIGINT)


def quiet_while_loading() -> dict[signal.Signals, Handler]:
    """For a program's first moments, while it imports: a stop ends it at once with 128 + the signal's number and
    no traceback (a build started beside an export, stopped with it straight away). The handlers it replaced, for
    :func:`restore` once the program is loaded. Nothing outside the main thread."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    saved = {sig: signal.getsignal(sig) for sig in INTERRUPTS}
    for sig in INTERRUPTS:
        signal.signal(sig, _exit_at_once)
    return saved


def _exit_at_once(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


def restore(saved: dict[signal.Signals, Handler]) -> None:
    """Put back the handlers that :func:`quiet_while_loading` or :func:`install_stop_signals` replaced."""
    for sig, handler in saved.items():
        if handler is not None:
            signal.signal(sig, handler)


def run_stoppable(command: Sequence[str], grace: float) -> int:
    """``command``'s exit status, run in a session of its own so that a stop reaches it once, from here: on a stop,
    :func:`stop_group` gives it ``grace`` seconds to stop what it started, then the stop goes on up."""
    child = subprocess.Popen(command, start_new_session=True)
    try:
        return child.wait()
    except KeyboardInterrupt:
        stop_group(child, grace)
        raise


def stop_group(child: subprocess.Popen[str] | subprocess.Popen[bytes], grace: float) -> None:
    """Ctrl-C to ``child``'s process group (a child started in a session of its own: a build and its compilers, an
    export), as a terminal sends it, then SIGKILL after ``grace`` seconds."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(child.pid, signal.SIGINT)
    try:
        child.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)
        child.wait()


@contextlib.contextmanager
def stop_signals_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM and SIGHUP raise :class:`Interrupted` and SIGINT raises ``KeyboardInterrupt``
    even if it was ignored on entry; the handlers found on entry are put back afterwards. A stop set aside to be
    sent again that the block outran is raised as it ends, not sent to handlers that no longer raise it (SIGTERM's
    default would kill the process). Main thread only (elsewhere the block runs as it is: only the main thread
    receives signals in Python)."""
    hook = sys.unraisablehook
    saved = install_stop_signals()
    try:
        yield
    finally:
        pending = [resend.signum for resend in _RESENDING if resend.claim()]
        _RESENDING.clear()
        restore(saved)
        sys.unraisablehook = hook
        if pending:
            raise _stop(pending[0])


def install_stop_signals() -> dict[signal.Signals, Handler]:
    """What :func:`stop_signals_interrupt` sets, for the rest of the process (a pytest run, nox); the handlers
    it replaced. Nothing outside the main thread."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    saved = {sig: signal.getsignal(sig) for sig in INTERRUPTS}
    sys.unraisablehook = _swallowed  # process-wide, like the handlers; it passes on whatever is not a stop
    if saved[signal.SIGINT] in (signal.SIG_IGN, signal.SIG_DFL, None, signal.default_int_handler):
        signal.signal(signal.SIGINT, _interrupt)  # Python's own, but not swallowed in a finalizer
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _interrupt)
    return saved


def _children() -> list[int]:
    """This process's live child processes (/proc's parent links)."""
    mine = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            state, parent = (entry / "stat").read_text().rsplit(")", 1)[1].split()[:2]
        except (OSError, IndexError, ValueError):
            continue
        if int(parent) == os.getpid() and state != "Z":
            mine.append(int(entry.name))
    return mine


def _terminal_foreground() -> bool:
    """Whether this process runs in the foreground of a terminal, whose Ctrl-C reaches its whole group."""
    try:
        return os.isatty(0) and os.tcgetpgrp(0) == os.getpgrp()
    except OSError:
        return False


def forward_stop_signals() -> None:
    """For a process that runs commands and waits for them (nox): a stop that was sent to it alone is passed on to
    its children as Ctrl-C, and only its first stop interrupts it.

    A CI runner cancelling a step signals the step's process alone (GitHub's runner: SIGINT, SIGTERM 7.5 s later,
    the process tree killed 2.5 s after that); nox then waits for its command (its ``interrupt_timeout``) but never
    signals it, so the command would run on, and the second signal would end nox's wait and leave the command
    without it. Here each stop is passed on (SIGINT first, SIGTERM after), except a SIGINT that a terminal sent to
    the whole foreground group (the children have it already); the first stop interrupts this process as
    :func:`install_stop_signals` does, later ones only pass on. Main thread only."""
    if threading.current_thread() is not threading.main_thread():
        return
    stopped: list[int] = []

    def handler(signum: int, frame: FrameType | None) -> None:
        if signum != signal.SIGINT or not _terminal_foreground():
            for child in _children():
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(child, signal.SIGTERM if stopped else signal.SIGINT)
        if stopped:
            return
        stopped.append(signum)  # before raising: a stop during the raise must not raise again
        _interrupt(signum, frame)  # raises, unless it landed in a finalizer and is sent again a moment later
        stopped.clear()  # ... and then that one interrupts

    sys.unraisablehook = _swallowed
    for sig in INTERRUPTS:
        signal.signal(sig, handler)


@contextlib.contextmanager
def ctrl_c_held() -> Iterator[None]:
    """Run the block whole: an interrupt (:data:`INTERRUPTS`) that arrives meanwhile reaches its previous
    handler after it, also when the block raises (the interrupt then wins, with the block's error as its context).

    Only signals whose handler was set from Python are held (SIGTERM's default, ending the process at once, is
    left alone). Only the main thread can set a signal handler (and only it receives ``KeyboardInterrupt``);
    elsewhere the block runs as it is.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.getsignal(sig) for sig in INTERRUPTS}
    held = [
        sig
        for sig, handler in previous.items()
        if callable(handler) or (sig == signal.SIGINT and handler == signal.SIG_DFL)
    ]
    arrived: list[tuple[int, FrameType | None]] = []
    for sig in held:
        signal.signal(sig, lambda signum, frame: arrived.append((signum, frame)))
    try:
        yield
    finally:
        for sig in held:
            signal.signal(sig, previous[sig])
        if arrived:
            signum, frame = arrived[0]
            _deliver(previous[signal.Signals(signum)], signum, frame)


def _deliver(handler: Handler, signum: int, frame: FrameType | None) -> None:
    if callable(handler):
        handler(signum, frame)
    elif handler == signal.SIG_DFL:
        raise KeyboardInterrupt
