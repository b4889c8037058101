"""The official pytorch backend's build: pins, sources, the cache key, the cache, and each failure's paragraph.

Built for real against this environment's torch (once per machine: later runs hit the cache). Sources come
from $TRITONPT_SOURCES (.ci/run points it at the mirror CI has), else from GitHub.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
from dataclasses import replace
from pathlib import Path

import pytest

from tritonpt import backend
from tritonpt.backend import BuiltBackend, Toolchain, Torch, toolchain
from tritonpt.errors import BackendError
from tritonpt.versions import VERSIONS, Source

SRC = Path(__file__).resolve().parents[2] / "src"


def _tarball(path: Path, *, commit: str, top: str) -> Path:
    """A small git-archive-like tarball: a pax header carrying the commit, one folder with one file."""
    with tarfile.open(path, "w:gz", format=tarfile.PAX_FORMAT, pax_headers={"comment": commit}) as archive:
        data = b"cmake_minimum_required(VERSION 3.5)\n"
        info = tarfile.TarInfo(f"{top}/CMakeLists.txt")
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    return path


def test_every_source_is_pinned_to_a_commit_and_a_digest() -> None:
    names = [s.name for s in VERSIONS.backend.sources]
    assert names == ["pytorch_backend", "backend", "core", "common", "rapidjson", "googletest"]
    for source in VERSIONS.backend.sources:
        assert len(source.commit) == 40
        assert int(source.commit, 16) >= 0
        assert len(source.sha256) == 64
        assert source.url == f"https://github.com/{source.repository}/archive/{source.commit}.tar.gz"
        assert source.tarball == f"{source.name}-{source.commit}.tar.gz"
    triton = [s for s in VERSIONS.backend.sources if s.repository.startswith("triton-inference-server/")]
    assert {s.ref for s in triton} == {"r25.10"}  # the release the default ngc recipe ships


def test_a_tarball_that_is_not_the_pinned_one_is_refused_with_what_it_is(tmp_path: Path) -> None:
    source = VERSIONS.backend.pytorch_backend
    other = "0" * 40
    folder = tmp_path / "sources"
    folder.mkdir()
    _tarball(folder / source.tarball, commit=other, top=f"pytorch_backend-{other}")
    with pytest.raises(BackendError) as failure:
        backend.verify(source, folder / source.tarball, where=f"in {folder}")
    message = str(failure.value)
    assert "as the pytorch_backend source, as its sha256 is" in message
    assert source.sha256 in message
    assert f"it is an archive of commit {other}" in message
    assert f"Hint: replace it with {source.url}" in message


def test_a_missing_source_names_which_and_where(tmp_path: Path) -> None:
    with pytest.raises(
        BackendError, match=rf"no {VERSIONS.backend.sources[0].tarball} in {tmp_path}"
    ) as failure:
        backend.fetch_sources(tmp_path)
    assert "TRITONPT_SOURCES" in str(failure.value)
    with pytest.raises(BackendError, match="is not a folder"):
        backend.fetch_sources(tmp_path / "nope")


def test_the_sources_folder_comes_from_the_option_then_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TRITONPT_SOURCES", "/from/env")
    assert backend.sources_folder("/given") == Path("/given")
    assert backend.sources_folder() == Path("/from/env")
    monkeypatch.delenv("TRITONPT_SOURCES")
    assert backend.sources_folder() is None  # then they are downloaded


def test_torch_is_found_without_importing_it() -> None:
    script = "import sys; from tritonpt.backend import Torch; t = Torch.locate(); print(t.version, 'torch' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(SRC)},
    )
    version, imported = result.stdout.split()
    assert version == Torch.locate().version
    assert version.startswith(VERSIONS.pytorch.torch)
    assert imported == "False"


def test_the_module_runs_on_the_standard_library_alone() -> None:
    """recipes/pytorch.Dockerfile runs it with no package installed: -S leaves site-packages out."""
    result = subprocess.run(
        [sys.executable, "-S", "-m", "tritonpt.backend", "--help"],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": str(SRC)},
    )
    assert result.returncode == 0, result.stderr
    assert "--sources" in result.stdout


def test_the_key_changes_with_each_input() -> None:
    torch = Torch.locate()
    toolchain = Toolchain.find("cpu")
    key = backend.build_key(torch, toolchain, "cpu")
    source = VERSIONS.backend.pytorch_backend
    assert key.startswith(f"{source.ref}-{source.commit[:7]}-torch{torch.version}-cpu-")
    assert backend.build_key(torch, toolchain, "cpu") == key
    others = {
        backend.build_key(torch, toolchain, "gpu"),
        backend.build_key(replace(torch, git_version="another"), toolchain, "cpu"),
        backend.build_key(torch, replace(toolchain, compiler="g++ 99"), "cpu"),
        backend.build_key(torch, replace(toolchain, cmake_version="3.31.8"), "cpu"),
    }
    assert key not in others
    assert len(others) == 4


def test_the_gpu_variant_needs_a_cuda_torch() -> None:
    cpu_torch = replace(Torch.locate(), version="2.9.1+cpu", cuda=None)
    with pytest.raises(BackendError, match=r"torch 2\.9\.1\+cpu .* is a CPU build"):
        backend.resolve_variant("gpu", cpu_torch)
    assert backend.resolve_variant("auto", cpu_torch) == "cpu"
    assert backend.resolve_variant("cpu", Torch.locate()) == "cpu"
    with pytest.raises(BackendError, match="choose one of cpu, gpu, auto"):
        backend.resolve_variant("tpu", cpu_torch)  # type: ignore[arg-type]


def test_no_compiler_is_one_paragraph(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.delenv("CC", raising=False)
    with pytest.raises(BackendError, match="no C\\+\\+ compiler was found") as failure:
        Toolchain.find("cpu")
    assert "Hint: install a C++17 compiler" in str(failure.value)


def test_missing_python_headers_are_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(toolchain.sysconfig, "get_paths", lambda: {"include": str(tmp_path)})
    with pytest.raises(BackendError, match=rf"no {tmp_path / 'Python.h'}") as failure:
        Toolchain.find("cpu")
    assert "libpython" in str(failure.value)


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


def test_nothing_is_found_in_an_empty_cache(tmp_path: Path) -> None:
    assert backend.find(cache=tmp_path) is None


def test_without_a_sources_folder_each_tarball_is_downloaded_once_and_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The download path, with GitHub's archive URLs pointed at file:// copies of the pinned tarballs."""
    mirror = backend.sources_folder()
    if mirror is None:
        pytest.skip("$TRITONPT_SOURCES is unset: this test serves the pinned tarballs from that folder")
    monkeypatch.setattr(Source, "url", property(lambda self: (mirror / self.tarball).absolute().as_uri()))
    steps: list[str] = []
    found = backend.fetch_sources(None, cache=tmp_path, step=steps.append)
    assert {path.parent for path in found.values()} == {tmp_path / "sources"}
    assert len([s for s in steps if s.startswith("downloading")]) == len(VERSIONS.backend.sources)
    steps.clear()
    backend.fetch_sources(None, cache=tmp_path, step=steps.append)
    assert steps == []  # the second time they come from the cache
    assert sorted(p.name for p in (tmp_path / "sources").iterdir()) == sorted(
        s.tarball for s in VERSIONS.backend.sources
    )


def test_a_download_that_is_not_the_pinned_tarball_is_not_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = _tarball(tmp_path / "other.tar.gz", commit="1" * 40, top="x")
    monkeypatch.setattr(Source, "url", property(lambda self: other.as_uri()))
    with pytest.raises(BackendError, match="sha256 is") as failure:
        backend.fetch_sources(None, cache=tmp_path / "cache")
    assert f"archive of commit {'1' * 40}" in str(failure.value)
    assert list((tmp_path / "cache" / "sources").iterdir()) == []  # neither the file nor a partial one
