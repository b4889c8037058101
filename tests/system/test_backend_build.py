"""The real build: cached and found again, and a build that fails for real (CMake configures the pinned sources,
the compiler stops at the first file)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tritonpt import backend
from tritonpt.backend import BuiltBackend, Toolchain, Torch
from tritonpt.errors import BackendError
from tritonpt.versions import VERSIONS

pytestmark = pytest.mark.slow


def test_a_compile_error_gives_its_first_line_and_the_log_and_leaves_no_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pytorch_backend: BuiltBackend
) -> None:
    """A compiler that fails on the first source file: configure runs for real, the compile fails at once."""
    real = Toolchain.find("cpu").cxx
    wrapper = tmp_path / "bin" / "c++"
    wrapper.parent.mkdir()
    wrapper.write_text(
        "#!/bin/sh\n"
        'case "$*" in *tritonserver_stub.cc*) echo "tritonserver_stub.cc:1:1: error: injected failure" >&2; exit 1;; esac\n'
        f'exec {real} "$@"\n',
        encoding="utf-8",
    )
    wrapper.chmod(0o755)
    monkeypatch.setenv("CXX", str(wrapper))
    cache = tmp_path / "cache"
    sources = backend.sources_folder()
    if sources is None:
        pytest.skip(
            "$TRITONPT_SOURCES is unset: this test builds in an empty cache and would download every source"
        )
    with pytest.raises(BackendError) as failure:
        backend.ensure(sources=sources, cache=cache)
    message = str(failure.value)
    assert message.startswith("Cannot compile libtriton_pytorch.so:")
    assert "First error: tritonserver_stub.cc:1:1: error: injected failure" in message
    log = Path(message.rsplit("Full log: ", 1)[1].strip())
    assert log.is_file()
    assert "injected failure" in log.read_text(encoding="utf-8")
    assert [p.name for p in (cache / "backends").iterdir()] == []  # neither an entry nor a staging folder


def test_the_build_is_cached_and_found(pytorch_backend: BuiltBackend) -> None:
    assert pytorch_backend.library.is_file()
    assert pytorch_backend.library.name == "libtriton_pytorch.so"
    assert (pytorch_backend.commit, pytorch_backend.ref) == (
        VERSIONS.backend.pytorch_backend.commit,
        VERSIONS.backend.pytorch_backend.ref,
    )
    assert pytorch_backend.torch_version == Torch.locate().version
    again = backend.ensure()
    assert again.cached
    assert again.directory == pytorch_backend.directory
    assert backend.find("cpu") == again
    assert BuiltBackend.read(again.directory).origin == again.origin
    leftovers = [p.name for p in again.directory.parent.iterdir() if p.name.startswith(f".build-{again.key}")]
    assert leftovers == []  # no staging folder of this build is left beside the entries
