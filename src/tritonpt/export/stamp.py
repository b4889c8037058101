"""Skipping a re-export that would write the same files: a stamp of what a built-in export was made from.

``<model>/.export-stamp.json`` (Triton reads only numeric sub-folders and config.pbtxt): the fingerprint of the
code, the versions, the model's name and the seed, and a sha256 of every file the export wrote, so that an
edited or damaged folder is exported again.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.resources
import json
import platform

import numpy as np
import torch

from tritonpt.repository import ModelDir

STAMP = ".export-stamp.json"

EXPORT_CODE = ("builtin.py", "spec.py", "reference.py", "repository.py", "dtypes.py")
"""The modules whose code decides what a built-in model's export writes, besides the export package itself
(the model lives in builtin)."""


NOT_EXPORT_CODE = frozenset({"beside.py", "builtin_set.py"})
"""Modules of the export package that decide nothing an export writes (the backend build beside it, the export run
as a child): a change of theirs keeps every cached export. Every other module of the package is in the key."""


def _code() -> list[bytes]:
    package = importlib.resources.files("tritonpt")
    exporting = sorted(
        (
            p
            for p in package.joinpath("export").iterdir()
            if p.name.endswith(".py") and p.name not in NOT_EXPORT_CODE
        ),
        key=lambda p: p.name,
    )
    return [package.joinpath(name).read_bytes() for name in EXPORT_CODE] + [p.read_bytes() for p in exporting]


def builtin_fingerprint(name: str, seed: int, *, machine: str = "") -> str:
    """sha256 over what a built-in export depends on: the code that builds and writes it, the torch,
    torchvision, numpy and Python versions, the model's name and the seed, and ``machine`` where the export
    compiles for the machine it runs on (a PT2 copy: :func:`tritonpt.export.cache.machine`)."""
    digest = hashlib.sha256()
    for code in _code():
        digest.update(code)
    for part in (
        torch.__version__,
        importlib.metadata.version("torchvision"),
        np.__version__,
        platform.python_version(),
        name,
        str(seed),
        machine,
    ):
        digest.update(b"\0" + part.encode())
    return digest.hexdigest()


def _file_digests(model: ModelDir) -> dict[str, str]:
    return {
        str(path.relative_to(model.root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(model.root.rglob("*"))
        if path.is_file() and path.name != STAMP
    }


def write_stamp(model: ModelDir, fingerprint: str, *, seconds: float | None = None) -> None:
    """Record the export: its fingerprint, every file's digest, and how long it took (for shard balancing)."""
    stamp: dict[str, object] = {"fingerprint": fingerprint, "files": _file_digests(model)}
    if seconds is not None:
        stamp["seconds"] = round(seconds, 3)
    staged = model.root / f"{STAMP}.partial"
    staged.write_text(json.dumps(stamp, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    staged.replace(model.root / STAMP)


def restamp(model: ModelDir) -> None:
    """After a change made on purpose (``invoke tune --apply``): the stamp records the files as they are now,
    with the fingerprint it had, so the next export keeps them. A model without a stamp stays without one."""
    try:
        fingerprint = json.loads((model.root / STAMP).read_text(encoding="utf-8"))["fingerprint"]
    except (OSError, ValueError, KeyError, TypeError):
        return
    write_stamp(model, str(fingerprint), seconds=export_seconds(model))


def export_seconds(model: ModelDir) -> float | None:
    """How long the export that made this folder took, as its stamp records (None: no stamp, or an older one)."""
    try:
        return float(json.loads((model.root / STAMP).read_text(encoding="utf-8"))["seconds"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def stamp_matches(model: ModelDir, fingerprint: str) -> bool:
    """The folder holds exactly the files its stamp records, unchanged, from an export of ``fingerprint``."""
    try:
        stamp = json.loads((model.root / STAMP).read_text(encoding="utf-8"))
        return bool(stamp["fingerprint"] == fingerprint and stamp["files"] == _file_digests(model))
    except (OSError, ValueError, KeyError, TypeError):
        return False
