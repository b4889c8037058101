"""Shared fixtures: a repository of exported built-in models and the official pytorch backend, once per session;
and an environment without forced colour for what the tests start."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tritonpt import backend, export
from tritonpt.versions import VERSIONS

from .helpers import SMALL_MODELS
from .prerequisites import pytest_runtest_makereport  # noqa: F401 - a hook: a missing prerequisite fails CI

FORCED_COLOUR = ("FORCE_COLOR", "CLICOLOR_FORCE", "PY_COLORS")
"""What makes rich (and most tools) colour output that is not a terminal: a CI workflow sets FORCE_COLOR for its
logs (ci.yml does). The front doors the tests run, and whose words they read, must print plain text, as they do
for a user whose output is a file or a pipe (seen under act: 33 system tests read ANSI codes)."""


@pytest.fixture(scope="session", autouse=True)
def _no_forced_colour() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        for name in FORCED_COLOUR:
            patch.delenv(name, raising=False)
        yield


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


@pytest.fixture(scope="session")
def pt2_backend() -> backend.BuiltBackend:
    """The PT2 build (pytorch_backend r26.05) for this torch: from the cache, else built (a few minutes cold)."""
    return backend.ensure(pins=VERSIONS.pt2.build)


@pytest.fixture(scope="session")
def pt2_patched() -> backend.BuiltBackend:
    """The PT2 build with our patches (pytorch_backend r26.05+tritonpt.1): from the cache, else built."""
    pins = VERSIONS.pt2.build
    return backend.ensure(pins=pins, flavor=backend.patched(pins))


@pytest.fixture(scope="session")
def exported_pt2(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """multi_io and token_encoder as PT2 packages (multi_io_pt2, token_encoder_pt2), compiled once per session
    (AOTInductor: tens of seconds each); copy before changing it."""
    repository = tmp_path_factory.mktemp("exported-pt2") / "repository"
    export.export_builtin(["multi_io", "token_encoder"], repository=repository, model_formats=("pt2",))
    return repository
