"""Helpers the test tiers share (fixtures stay in conftest.py; what tests import lives here)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

SMALL_MODELS = ("multi_io", "token_encoder", "scripted_gate", "fixed_shape")
"""The small built-in models: together they cover several inputs/outputs, int64, variable length, scripting,
bool/int outputs and max_batch_size 0, and export in well under a second."""


def group_members(pgid: int) -> list[int]:
    """Processes whose process group is ``pgid`` (field 5 of /proc/<pid>/stat)."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # the process ended while we looked
        if int(fields[2]) == pgid:
            members.append(int(entry.name))
    return members


ROOT = Path(__file__).resolve().parents[1]
"""The repository root: front doors in subprocesses run from here."""


def matrix_command(repository: Path, reports: Path, *args: str) -> list[str]:
    """`pytest tests/integration` as a person runs it, on ``repository``, writing its reports to ``reports``."""
    return [
        sys.executable, "-m", "pytest", "tests/integration", "-p", "no:cacheprovider", "-q",
        "--repository", str(repository), "--reports", str(reports), *args,
    ]  # fmt: skip


def invoke_command(*args: str) -> list[str]:
    """`invoke TASK ...` with this checkout's tasks, from any folder."""
    return [sys.executable, "-m", "invoke", "--search-root", str(ROOT), *args]


def server_pids(marker: str) -> list[int]:
    """tritonserver processes whose command line names ``marker`` (a test's own repository)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if (
            command
            and command[0].endswith(b"tritonserver")
            and any(marker.encode() in part for part in command)
        ):
            found.append(int(entry.name))
    return found


def wait_for_text(path: Path, text: str, timeout: float) -> bool:
    """Wait until the file ``path`` holds ``text``; False when ``timeout`` seconds passed first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.is_file() and text in path.read_text(encoding="utf-8", errors="replace"):
            return True
        time.sleep(0.1)
    return False
