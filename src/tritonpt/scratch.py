"""Scratch folders that never outlive their block: made and removed whole, even when a Ctrl-C lands meanwhile.

A Ctrl-C raises ``KeyboardInterrupt`` between any two Python bytecodes, ``shutil.rmtree``'s and a ``finally``
block's included: the fault tier once saw a staging folder left behind that way. Here making and removing a
folder run with the interrupts held (:func:`tritonpt.stopping.ctrl_c_held`); the interrupt follows as soon as
the step is done. Standard library only, like :mod:`tritonpt.stopping`.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from tritonpt.stopping import ctrl_c_held

__all__ = ["folder", "remove"]


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
