"""Shared fixtures: a repository of exported built-in models and the official pytorch backend, once per session."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tritonpt import backend, export

from .helpers import SMALL_MODELS


@pytest.fixture(scope="session")
def exported_small(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A repository holding the small built-in models, exported once; copy before changing it."""
    repository = tmp_path_factory.mktemp("exported") / "repository"
    export.export_builtin(SMALL_MODELS, repository=repository)
    return repository


@pytest.fixture
def repository_copy(exported_small: Path, tmp_path: Path) -> Callable[..., Path]:
    """Copy chosen models of the exported repository into a fresh folder the test may break."""

    def copy(*names: str) -> Path:
        target = tmp_path / "repository"
        target.mkdir(exist_ok=True)
        for name in names:
            shutil.copytree(exported_small / name, target / name)
        return target

    return copy


@pytest.fixture(scope="session")
def pytorch_backend() -> backend.BuiltBackend:
    """The official libtriton_pytorch.so for this torch: from the cache, else built ($TRITONPT_SOURCES or GitHub)."""
    return backend.ensure()
