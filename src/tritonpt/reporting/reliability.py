"""The reliability report's parts: each tier that judges reliability writes one JSON object, ``<folder>/<part>.json``
(the integration matrix's bad-request probes among them, so this is runtime code, not a test helper).

    folder_in(reports)            <reports>/reliability/parts: where every tier's parts go, below its reports
    write_part("soak", {...})     reports/reliability/parts/soak.json, written atomically (temp file + rename)
    count_tracebacks(*texts)      how often "Traceback (most recent call last)" appears in what a tier captured

Every part holds at least ``{"part": name, "tracebacks": int}``; ``python -m tritonpt_ci.reliability``
merges the parts that exist into reports/reliability.md and .json.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

BELOW_REPORTS = Path("reliability/parts")
PARTS = Path("reports") / BELOW_REPORTS
TRACEBACK = "Traceback (most recent call last)"


def folder_in(reports: Path) -> Path:
    """The parts folder of a tier whose reports go to ``reports``."""
    return reports / BELOW_REPORTS


def count_tracebacks(texts: Iterable[str]) -> int:
    """How many Python tracebacks the texts hold (the goal in every user-facing output: none)."""
    return sum(text.count(TRACEBACK) for text in texts)


def write_part(part: str, data: Mapping[str, Any], folder: Path = PARTS) -> Path:
    """Write ``{"part": part, **data}`` to ``folder/<part>.json`` in one rename; ``data`` must hold ``tracebacks``."""
    if "tracebacks" not in data:
        msg = (
            f"The reliability part {part!r} must say how many tracebacks its tier saw (a 'tracebacks' field)."
        )
        raise ValueError(msg)
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{part}.json"
    handle, staged = tempfile.mkstemp(prefix=f".{part}.", suffix=".partial", dir=folder)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            json.dump({"part": part, **data}, stream, indent=2)
            stream.write("\n")
        Path(staged).replace(target)
    except BaseException:
        Path(staged).unlink(missing_ok=True)
        raise
    return target
