"""Scratch folders that never outlive their block, and steps that a Ctrl-C cannot cut in half.

A Ctrl-C raises ``KeyboardInterrupt`` between any two Python bytecodes, ``shutil.rmtree``'s and a
``finally`` block's included: the fault tier once saw a staging folder left behind that way. Here the
removal, and any step given to :func:`ctrl_c_held`, runs with SIGINT caught and set aside; the interrupt is
delivered as soon as the step is done, so a run still stops where the user asked, only a moment later.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType

__all__ = ["ctrl_c_held", "folder", "remove"]


@contextlib.contextmanager
def ctrl_c_held() -> Iterator[None]:
    """Run the block whole: a SIGINT that arrives meanwhile reaches the previous handler after it, also when
    the block raises (the interrupt then wins, with the block's error as its context).

    Only the main thread can set a signal handler (and only it receives ``KeyboardInterrupt``); elsewhere,
    or when the handler was not set from Python (it cannot be put back), the block runs as it is.
    """
    previous = signal.getsignal(signal.SIGINT)
    if threading.current_thread() is not threading.main_thread() or previous is None:
        yield
        return
    arrived: list[FrameType | None] = []
    signal.signal(signal.SIGINT, lambda _signum, frame: arrived.append(frame))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if arrived:
            _deliver(previous, arrived[0])


def _deliver(handler: Callable[[int, FrameType | None], object] | int, frame: FrameType | None) -> None:
    if callable(handler):
        handler(signal.SIGINT, frame)
    elif handler == signal.SIG_DFL:
        raise KeyboardInterrupt


def remove(path: Path) -> None:
    """Remove a folder tree, whole, even if a Ctrl-C arrives meanwhile; missing or unreadable parts are skipped."""
    with ctrl_c_held():
        shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def folder(prefix: str, *, inside: Path | None = None) -> Iterator[Path]:
    """A new, empty folder (``inside`` the given one, else in the system's temporary folder), removed after
    the block however it ends. Created and removed with Ctrl-C held, so no interrupt falls between making
    it and being responsible for it."""
    made: Path | None = None
    try:
        with ctrl_c_held():
            made = Path(tempfile.mkdtemp(prefix=prefix, dir=inside))
        yield made
    finally:
        if made is not None:
            remove(made)
