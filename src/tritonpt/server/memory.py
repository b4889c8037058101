"""A process's memory as this host's kernel counts it (/proc), for the servers whose process runs here."""

from __future__ import annotations

from pathlib import Path

__all__ = ["rss_mb"]


def rss_mb(pid: int) -> tuple[float, float]:
    """``(VmRSS, VmHWM)`` of a process in MiB, from /proc/<pid>/status (the current and the peak RSS)."""
    found: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/status").read_text(encoding="ascii").splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            found[key] = int(value.split()[0]) / 1024  # the kernel writes kB
    return found["VmRSS"], found["VmHWM"]
