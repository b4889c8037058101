"""Helpers the test tiers share (fixtures stay in conftest.py; what tests import lives here)."""

from __future__ import annotations

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
