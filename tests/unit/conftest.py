"""The unit tier is hermetic: it never reads or writes the user's cache, builds nothing and starts no server.

Every unit test runs with ``$TRITONPT_CACHE`` (and ``$XDG_CACHE_HOME``) pointed at a folder of the session's
own, so whatever the user's ``~/.cache/tritonpt`` holds (several builds, none, a broken one) cannot change an
answer here, and nothing here can change what it holds. A test that needs a real build of the backend belongs
in tests/system; a test that needs a build's *shape* makes one with the ``make_backend`` fixture.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tritonpt import backend
from tritonpt.backend import BuiltBackend, Torch
from tritonpt.versions import VERSIONS


@pytest.fixture(scope="session", autouse=True)
def private_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """This session's cache, in place of the user's."""
    root = tmp_path_factory.mktemp("cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(backend.CACHE_ENV, str(root / "tritonpt"))
        patch.setenv("XDG_CACHE_HOME", str(root))
        yield root / "tritonpt"


@pytest.fixture(scope="session")
def pytorch_backend() -> BuiltBackend:
    """Shadows the shared fixture: a real build takes a compiler and most of a minute (tests/system has it)."""
    pytest.fail("a unit test asked for a real backend build; use make_backend or move it to tests/system")


MakeBackend = Callable[..., BuiltBackend]


@pytest.fixture
def make_backend(tmp_path: Path) -> MakeBackend:
    """``make_backend(key=..., cache=tmp_path / "cache")``: a cache entry with the manifest a build writes and
    a placeholder library, which is what reading, finding and staging a build look at; nothing is compiled."""

    def make(*, key: str, cache: Path = tmp_path / "cache", variant: str = "cpu") -> BuiltBackend:
        return _entry(cache, key=key, variant=variant)

    return make


def _entry(cache: Path, *, key: str, variant: str) -> BuiltBackend:
    torch = Torch.locate()
    source = VERSIONS.backend.pytorch_backend
    entry = cache / "backends" / key
    (entry / "pytorch").mkdir(parents=True)
    (entry / "pytorch" / backend.LIBRARY).write_bytes(b"\x7fELF placeholder for " + key.encode())
    built = BuiltBackend(
        directory=entry,
        key=key,
        variant="gpu" if variant == "gpu" else "cpu",
        ref=source.ref,
        commit=source.commit,
        commits={s.name: s.commit for s in VERSIONS.backend.sources},
        torch_version=torch.version,
        torch_git_version=torch.git_version,
        torch_cuda=torch.cuda,
        compiler="c++ (placeholder) 0",
        cmake_version="0.0.0",
        cuda_toolkit=None,
        library_dirs=(),
        seconds=0.0,
    )
    (entry / backend.MANIFEST).write_text(json.dumps(built.manifest(), indent=2) + "\n", encoding="utf-8")
    return built
