"""This machine's processes (psutil): what the fault tier and the workflow runs count as left behind, and how a
process tree is signalled as a CI runner signals one.

    marked(variable, value)   live processes whose environment holds ``variable=value`` (a run's marker, which
                              every process it starts inherits), or whose command line names a folder
    children(pid) / tree(pid) a process's children, and its whole tree (parents first)
    signal_all / wait_gone / kill_trees / group(pgid)
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

COMMAND_CHARS = 160
"""How much of a command line a leftover's line shows."""
GONE = (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied)
"""What reading a process may meet: it ended while we looked, or it is not ours to read."""


@dataclass(frozen=True, kw_only=True)
class Process:
    pid: int
    parent: int
    environ: dict[str, str]
    argv: tuple[str, ...]

    @property
    def command(self) -> str:
        """Its command line (shortened), for a message."""
        line = " ".join(self.argv)
        return line if len(line) <= COMMAND_CHARS else f"{line[: COMMAND_CHARS - 3]}..."

    def names(self, text: str) -> bool:
        """Whether a word of its command line holds ``text``."""
        return any(text in word for word in self.argv)


def _of(process: psutil.Process) -> Process | None:
    try:
        with process.oneshot():
            if process.status() == psutil.STATUS_ZOMBIE:
                return None
            argv, parent = tuple(process.cmdline()), process.ppid()
            try:
                environ = process.environ()
            except psutil.AccessDenied:
                environ = {}
    except GONE:
        return None
    return Process(pid=process.pid, parent=parent, environ=environ, argv=argv)


def read(pid: int) -> Process | None:
    """A live process, or None when it ended (or is a zombie, or not ours to read) while we looked."""
    try:
        return _of(psutil.Process(pid))
    except GONE:
        return None


def every() -> list[Process]:
    """Every live process but this one, zombies left out."""
    found = (_of(p) for p in psutil.process_iter() if p.pid != os.getpid())
    return [p for p in found if p is not None]


def marked(variable: str, value: str, folder: Path | None = None) -> list[Process]:
    """Live processes whose environment holds ``variable=value``, or whose command line names ``folder``."""
    inside = str(folder.resolve()) if folder is not None else None
    return [
        p for p in every() if p.environ.get(variable) == value or (inside is not None and p.names(inside))
    ]


def children(parent: int) -> list[int]:
    try:
        return [child.pid for child in psutil.Process(parent).children()]
    except GONE:
        return []


def tree(root: int) -> list[int]:
    """``root`` and every descendant, parents first."""
    found, pending = [], [root]
    while pending:
        pid = pending.pop(0)
        found.append(pid)
        pending += children(pid)
    return found


def group(pgid: int, *, zombies: bool = False) -> list[int]:
    """The live processes of process group ``pgid``; with ``zombies``, those that exited and were not reaped too
    (a test that its server was waited for)."""
    found = []
    for process in psutil.process_iter():
        with contextlib.suppress(*GONE, ProcessLookupError):
            if os.getpgid(process.pid) == pgid and (zombies or process.status() != psutil.STATUS_ZOMBIE):
                found.append(process.pid)
    return found


def signal_all(pids: list[int], sig: signal.Signals) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def wait_gone(pids: list[int], seconds: float) -> None:
    """Until none of ``pids`` lives (a zombie counts as gone), at most ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(read(pid) is not None for pid in pids):
        time.sleep(0.1)


def kill_trees(roots: list[int]) -> None:
    """SIGKILL each root's process tree, taken whole first so that no child is orphaned out of it."""
    signal_all([pid for root in roots for pid in tree(root)], signal.SIGKILL)
