"""Pinned downloads: a file fetched once into the cache, checked before it is kept, never half-written.

The backend's source tarballs (:mod:`tritonpt.backend.sources`) and perf_analyzer's wheel
(:mod:`tritonpt.perf_analyzer`) come through here. A download goes to a temporary file beside its target, is
checked by the caller's ``check`` (a digest), and only then renamed into place; whatever goes wrong, the
partial file is removed. Standard library only: the backend's build runs with nothing installed.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from tritonpt.errors import HINT, TritonPtError

TIMEOUT_S = 60.0
"""How long a download may wait for the next bytes."""


def sha256(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def download(
    url: str,
    target: Path,
    *,
    check: Callable[[Path], None],
    what: str,
    offline: str,
    error: type[TritonPtError],
) -> None:
    """Fetch ``url`` into ``target`` (its folder created): ``check(partial)`` must pass before it is kept.

    A failed connection raises ``error`` naming ``what`` and the URL, followed by ``offline``: what to do on a
    machine that cannot reach it (which option or variable points at a local copy).
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, name = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    partial = Path(name)
    try:
        with os.fdopen(handle, "wb") as out:
            response = urllib.request.urlopen(url, timeout=TIMEOUT_S)  # noqa: S310 - a pinned https URL
            with response:
                shutil.copyfileobj(response, out)
        check(partial)
        partial.replace(target)
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", None) or exc
        msg = f"Cannot download {what} from {url}, as {reason}.\n{HINT} {offline}"
        raise error(msg) from exc
    finally:
        partial.unlink(missing_ok=True)
