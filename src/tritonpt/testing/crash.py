"""Whether a matrix run ended because Triton crashed on its own, for CI's one rerun of such a run.

    crash_of(reports)      the log lines that show it ("malloc_consolidate(): ...", "Signal (6) received."), or None
    keep_crashed(reports)  copy that run's summary, junit.xml and server log into <reports>/crashed-run/

A crash on its own: the run was aborted (summary.json's ``aborted``) and the server's log ends in a signal that
a process raises against itself (SIGABRT from a failed check, SIGSEGV, SIGBUS, SIGFPE, SIGILL). A check that
failed, a server killed from outside (SIGKILL prints nothing; SIGTERM and SIGINT are asked for) and a matrix
that errs are never that. Server 2.51.0 was seen once here to abort with glibc's "malloc_consolidate():
unaligned fastbin chunk detected" while the matrix unloaded a model; NVIDIA's trackers hold the same message
without a cause (triton-inference-server/server#7517).

Read by noxfile.py before any install, so this module uses the standard library only.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

RERUN_ENV = "TRITONPT_RERUN_ON_CRASH"
"""Set to 1 (.ci/run does) for the matrix sessions to run once more after a crash of the server on its own."""
CRASH_SIGNAL = re.compile(r"^Signal \((?:4|6|7|8|11)\) received\.?$")
"""Triton's own line on a fatal signal: SIGILL, SIGABRT, SIGBUS, SIGFPE or SIGSEGV."""
KEPT = "crashed-run"
KEPT_FILES = ("summary.md", "summary.json", "junit.xml", "tritonserver.log")
CONTEXT_LINES = 2
"""Lines of the log before the signal line that say why (glibc's message, "terminate called after ...")."""


def crash_of(reports: Path) -> str | None:
    """The log lines showing that the run in ``reports`` ended because the server crashed on its own, else None."""
    try:
        summary = json.loads((reports / "summary.json").read_text(encoding="utf-8"))
        log = (reports / "tritonserver.log").read_text(encoding="utf-8", errors="replace").splitlines()
    except (OSError, ValueError):
        return None
    if not isinstance(summary, dict) or not summary.get("aborted"):
        return None
    for index in range(len(log) - 1, -1, -1):
        if CRASH_SIGNAL.match(log[index].strip()):
            return "\n".join(line.strip() for line in log[max(0, index - CONTEXT_LINES) : index + 1])
    return None


def keep_crashed(reports: Path) -> Path:
    """Copy the crashed run's files into ``<reports>/crashed-run/`` (replacing an earlier copy); return it."""
    kept = reports / KEPT
    shutil.rmtree(kept, ignore_errors=True)
    kept.mkdir(parents=True)
    for name in KEPT_FILES:
        if (reports / name).is_file():
            shutil.copy2(reports / name, kept / name)
    return kept
