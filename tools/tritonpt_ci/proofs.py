"""What a run already proved on this very tree, so that an act job of the same commit need not prove it again.

    tree_digest(root)                   sha256 of the checkout's files as git sees them (act's snapshot)
    record(session, args, digest, ...)  a session that passed: <cache>/proofs/<digest>/<session>-<args>.json
    find(session, args, digest)         the proof, or None

noxfile.py records every session that passes; a proof is reused only where ``$TRITONPT_PROOFS`` is ``reuse``
(the workflows harness sets it). Standard library only: noxfile.py imports it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
import subprocess
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from tritonpt import caches

PROOFS_ENV = "TRITONPT_PROOFS"
REUSE = "reuse"
KEEP = 50
"""Trees whose proofs are kept (the most recent)."""


@dataclass(frozen=True, kw_only=True)
class Proof:
    session: str
    args: tuple[str, ...]
    digest: str
    run: str
    seconds: float
    at: float

    def describe(self) -> str:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.at))
        return (
            f"nox -s {self.session} passed on this very tree (files {self.digest[:12]}) in run {self.run} at {when} "
            f"({self.seconds:.0f} s); ${PROOFS_ENV}={REUSE}: not run again"
        )


def tree_digest(root: Path) -> str | None:
    """sha256 over the checkout's files (name, executable bit, content), or None outside a git checkout."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=root,
            capture_output=True,
            check=True,
            timeout=60,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    digest = hashlib.sha256()
    for name in sorted(filter(None, listed.decode().split("\0"))):
        path = root / name
        if not path.is_file() or path.is_symlink():
            continue
        executable = bool(path.stat().st_mode & stat.S_IXUSR)
        digest.update(f"\0{name}\0{int(executable)}\0".encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _path(session: str, args: Sequence[str], digest: str) -> Path:
    said = hashlib.sha256("\0".join(args).encode()).hexdigest()[:12]
    return caches.root() / "proofs" / digest / f"{session}-{said}.json"


def record(session: str, args: Sequence[str], digest: str, *, run: str, seconds: float) -> None:
    proof = Proof(
        session=session, args=tuple(args), digest=digest, run=run, seconds=round(seconds, 1), at=time.time()
    )
    path = _path(session, args, digest)
    path.parent.mkdir(parents=True, exist_ok=True)
    staged = path.with_suffix(f".{os.getpid()}.partial")
    staged.write_text(json.dumps(asdict(proof), indent=2) + "\n", encoding="utf-8")
    staged.replace(path)
    _prune(path.parent.parent)


def _prune(root: Path) -> None:
    """The oldest trees beyond :data:`KEEP`; what another process removed meanwhile is passed over."""
    dated = []
    for tree in root.iterdir():
        with contextlib.suppress(OSError):
            dated.append((tree.stat().st_mtime, tree))
    for _, old in sorted(dated, reverse=True)[KEEP:]:
        with contextlib.suppress(OSError):
            for entry in old.iterdir():
                entry.unlink(missing_ok=True)
            old.rmdir()


def find(session: str, args: Sequence[str], digest: str) -> Proof | None:
    """The proof of ``session`` with ``args`` on the tree ``digest``, where proofs may be reused here."""
    if os.environ.get(PROOFS_ENV) != REUSE:
        return None
    try:
        data = json.loads(_path(session, args, digest).read_text(encoding="utf-8"))
        data["args"] = tuple(data["args"])
        return Proof(**data)
    except (OSError, ValueError, TypeError, KeyError):
        return None
