"""Our Python-based ``pytorch`` backend for Triton: where its file lives and how to install a copy.

``pytorch/model.py`` is not a module of this package: it imports ``triton_python_backend_utils``, which exists
only inside Triton's Python backend stub. It is data that :mod:`tritonpt.server.local` and the image recipes
copy to ``<backend-directory>/pytorch/model.py``, where Triton uses it in place of ``libtriton_pytorch.so``
(see the file's own docstring for what it mirrors and what it cannot).
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

MODEL_PY = Path(__file__).resolve().parent / "pytorch" / "model.py"
"""The stand-in backend's source, copied unchanged wherever Triton should find it."""

STAND_IN_RUNTIME = "model.py"
"""The ``runtime`` Triton reports in a model's config when our stand-in serves it."""

OFFICIAL_RUNTIME = "libtriton_pytorch.so"
"""The ``runtime`` Triton reports when the official LibTorch backend serves a model."""


def digest(length: int = 12) -> str:
    """A short SHA-256 of ``model.py``: names cached backend folders and image layers after their content."""
    return hashlib.sha256(MODEL_PY.read_bytes()).hexdigest()[:length]


def install(backend_directory: Path) -> Path:
    """Copy ``model.py`` to ``<backend_directory>/pytorch/model.py`` and return that path."""
    target = backend_directory / "pytorch" / "model.py"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(MODEL_PY, target)
    return target
