"""The processes of this machine, as /proc shows them: what the fault tier and the workflow runs count as left
behind, and how a process tree is signalled as a CI runner signals one.

    marked(variable, value)   live processes whose environment holds ``variable=value`` (a run's marker, which
                              every process it starts inherits), or whose command line names a folder
    children(pid) / tree(pid) a process's children, and its whole tree (parents first)
    signal_all / wait_gone / kill_trees
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

COMMAND_CHARS = 160
"""How much of a command line a leftover's line shows."""


@dataclass(frozen=True, kw_only=True)
class Process:
    pid: int
    state: str  # stat's state letter: "Z" for a zombie
    parent: int
    environ: tuple[bytes, ...]
    cmdline: bytes

    @property
    def command(self) -> str:
        """Its command line (shortened), for a message."""
        line = " ".join(w.decode(errors="replace") for w in self.cmdline.rstrip(b"\0").split(b"\0") if w)
        return line if len(line) <= COMMAND_CHARS else f"{line[: COMMAND_CHARS - 3]}..."


def read(pid: int) -> Process | None:
    """A live process, or None when it ended (or is not ours to read) while we looked."""
    entry = Path("/proc") / str(pid)
    try:
        state, parent = (entry / "stat").read_text().rsplit(")", 1)[1].split()[:2]
        environ = tuple((entry / "environ").read_bytes().split(b"\0"))
        cmdline = (entry / "cmdline").read_bytes()
    except (OSError, IndexError, ValueError):
        return None
    return Process(pid=pid, state=state, parent=int(parent), environ=environ, cmdline=cmdline)


def every() -> list[Process]:
    """Every process but this one, zombies left out."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            process = read(int(entry.name))
            if process is not None and process.state != "Z":
                found.append(process)
    return found


def marked(variable: str, value: str, folder: Path | None = None) -> list[Process]:
    """Live processes whose environment holds ``variable=value``, or whose command line names ``folder``."""
    needle = f"{variable}={value}".encode()
    inside = str(folder.resolve()).encode() if folder is not None else None
    return [p for p in every() if needle in p.environ or (inside is not None and inside in p.cmdline)]


def children(parent: int) -> list[int]:
    return [p.pid for p in every() if p.parent == parent]


def tree(root: int) -> list[int]:
    """``root`` and every descendant, parents first."""
    found, pending = [], [root]
    while pending:
        pid = pending.pop(0)
        found.append(pid)
        pending += children(pid)
    return found


def signal_all(pids: list[int], sig: signal.Signals) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def wait_gone(pids: list[int], seconds: float) -> None:
    """Until none of ``pids`` lives, at most ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(
        (p := read(pid)) is not None and p.state != "Z" for pid in pids
    ):
        time.sleep(0.1)


def kill_trees(roots: list[int]) -> None:
    """SIGKILL each root's process tree, taken whole first so that no child is orphaned out of it."""
    signal_all([pid for root in roots for pid in tree(root)], signal.SIGKILL)
