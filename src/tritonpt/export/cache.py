"""Built-in exports kept by what made them, so that a run exports each model once and every later session, clone
and act job copies it.

    <cache>/exports/<folder>/<fingerprint>/     the model folder as export wrote it, its stamp included

The fingerprint is the stamp's (:func:`tritonpt.export.stamp.builtin_fingerprint`: the model's code and seed, the
export code, torch and its neighbours, the format and the PT2 build), and for a PT2 copy also the machine
AOTInductor compiled it for (:func:`machine`). An entry is stored staged and renamed, read back only when every
file still has the digest its stamp records, and copied (never linked) into a repository. The newest few are kept.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import platform
import shutil
import subprocess
from pathlib import Path

import torch

from tritonpt import caches, scratch
from tritonpt.export.stamp import stamp_matches
from tritonpt.repository import ModelDir, staged_model

KEEP = 4
"""Entries kept per model folder: a run with a changed export code writes new ones, older ones go."""


def folder() -> Path:
    return caches.root() / "exports"


@functools.cache
def machine() -> str:
    """What an AOTInductor package is compiled for besides the model: the device, this CPU's flags (inductor picks
    its vector ISA and compile flags from them) and the C++ compiler (a package made on another CPU may not load
    here). Cheap: /proc/cpuinfo and one ``--version``, never a compile."""
    try:
        lines = Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines()
    except OSError:
        lines = []
    flags = next((line.split(":", 1)[1].split() for line in lines if line.startswith("flags")), [])
    compiler = os.environ.get("CXX") or "g++"
    try:
        version = subprocess.run(
            [compiler, "--version"], capture_output=True, text=True, check=False, timeout=60
        ).stdout.splitlines()[:1]
    except OSError:
        version = []
    device = f"cuda {torch.cuda.get_device_name()}" if torch.cuda.is_available() else "cpu"
    cpu = hashlib.sha256(" ".join(sorted(flags)).encode()).hexdigest()[:16]
    return f"{device}; {platform.machine()} cpu flags {cpu}; {compiler} {' '.join(version)}"


class _EntryChangedError(Exception):
    """The entry changed while it was copied."""


def _entry(name: str, fingerprint: str) -> Path:
    return folder() / name / fingerprint


def restore(fingerprint: str, model: ModelDir) -> bool:
    """Put the cached export of ``fingerprint`` in place of ``model`` (staged, then renamed, as an export writes
    it); False when there is none, or the entry no longer holds what its stamp records (it is removed)."""
    entry = _entry(model.name, fingerprint)
    if not entry.is_dir():
        return False
    if not stamp_matches(ModelDir(root=entry), fingerprint):
        scratch.remove(entry)
        return False
    try:
        with staged_model(model.root.parent, model.name) as staged:
            _copy(entry, staged, fingerprint)
    except (
        _EntryChangedError,
        shutil.Error,
        OSError,
    ):  # changed (or pruned) while it was read: the staged copy
        return False  # is gone, and an export makes the model anew
    with contextlib.suppress(OSError):
        entry.touch()  # used now: pruned last
    return True


def _copy(entry: Path, staged: ModelDir, fingerprint: str) -> None:
    shutil.copytree(entry, staged.root, dirs_exist_ok=True)
    if not stamp_matches(staged, fingerprint):
        raise _EntryChangedError


def store(model: ModelDir, fingerprint: str) -> None:
    """Keep a copy of the stamped export ``model`` under its fingerprint (another process may have stored the same
    one meanwhile: the first rename wins, both are the same export)."""
    parent = folder() / model.name
    parent.mkdir(parents=True, exist_ok=True)
    with scratch.folder(".staging-", inside=parent) as staging:
        shutil.copytree(model.root, staging / "entry")
        with contextlib.suppress(OSError):
            (staging / "entry").replace(_entry(model.name, fingerprint))
    _prune(parent)


def _prune(parent: Path) -> None:
    """The oldest entries beyond :data:`KEEP`; one another process removed meanwhile is passed over."""
    dated = []
    for entry in parent.iterdir():
        with contextlib.suppress(OSError):
            if entry.is_dir() and not entry.name.startswith("."):
                dated.append((entry.stat().st_mtime, entry))
    for _, old in sorted(dated, reverse=True)[KEEP:]:
        scratch.remove(old)
