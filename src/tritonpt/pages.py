"""Docs pages that are generated, not typed: one command line for each (write it, or ``--check`` that the committed
page is what the generator makes now). The validator's rule reference and the compatibility table use it.

    python -m tritonpt.validate.reference [--check] [--page PATH]
    python -m tritonpt.doctor.compat [--check] [--page PATH]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path


def write(page: Path, text: str) -> bool:
    """Write the page; whether it changed."""
    if page.is_file() and page.read_text(encoding="utf-8") == text:
        return False
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(text, encoding="utf-8")
    return True


def main(
    argv: Sequence[str] | None,
    *,
    prog: str,
    description: str,
    page: Path,
    render: Callable[[], str],
    what: str = "",
) -> int:
    """``prog [--page PATH] [--check]``: write the page from ``render()``, or exit 1 when the committed one is stale."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--page", type=Path, default=page, help=f"the page to write (default: {page})")
    parser.add_argument("--check", action="store_true", help="only say whether the page is stale (exit 1)")
    args = parser.parse_args(argv)
    target: Path = args.page
    text = render()
    if args.check:
        stale = not target.is_file() or target.read_text(encoding="utf-8") != text
        if stale:
            print(f"{target} is stale: run `{prog}` from the repository root.", file=sys.stderr)
        return int(stale)
    print(f"{target}: {'written' if write(target, text) else 'up to date'}{f' ({what})' if what else ''}")
    return 0
