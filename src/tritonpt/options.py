"""Values typed on the command line that more than one front door reads the same way."""

from __future__ import annotations

import re
from collections.abc import Iterable

from tritonpt.errors import TritonPtError

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def parse_assignments(
    values: Iterable[str], *, option: str, example: str, error: type[TritonPtError]
) -> dict[str, str]:
    """``["K=V", ...]`` typed after a repeatable option, as a mapping; a value may itself hold ``=``."""
    parsed: dict[str, str] = {}
    for value in values:
        key, sep, setting = value.partition("=")
        if not sep or not _NAME.fullmatch(key):
            msg = f"Cannot read {option} {value!r}: write it as NAME=VALUE, e.g. {option} {example}."
            raise error(msg)
        parsed[key] = setting
    return parsed
