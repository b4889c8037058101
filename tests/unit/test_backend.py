"""The official pytorch backend's build: pins, sources, the cache key, the cache, and each failure's paragraph.

Built for real against this environment's torch (once per machine: later runs hit the cache). Sources come
from $TRITONPT_SOURCES (.ci/run points it at the mirror CI has), else from GitHub.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import subprocess
import sys
import tarfile
from dataclasses import replace
from pathlib import Path

import pytest

from tritonpt import backend, fetch
from tritonpt.backend import BuiltBackend, Toolchain, Torch, pins, toolchain
from tritonpt.errors import BackendError
from tritonpt.versions import VERSIONS, Source

from .conftest import MakeBackend

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
    assert (
        f"as the pytorch_backend source, as its files are not those of {source.repository} {source.commit}"
        in message
    )
    assert f"outside {source.top_folder}/" in message  # its top folder names the other commit
    assert f"it is an archive of commit {other}" in message
    assert f"Hint: replace it with {source.url}" in message


def _git_archive(path: Path, top: str, files: dict[str, bytes], *, level: int) -> Path:
    """A tarball as `git archive | gzip -<level>` writes one: a top folder, files with git's modes."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for name, data in sorted(files.items()):
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size, info.mode = len(data), 0o775 if name.endswith(".sh") else 0o664
            archive.addfile(info, io.BytesIO(data))
    path.write_bytes(gzip.compress(buffer.getvalue(), compresslevel=level, mtime=0))
    return path


@pytest.fixture
def pinned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Source, dict[str, bytes]]:
    """A source pinned as versions.toml pins one (tarball sha256, tree digest, kept manifest), in tmp_path."""
    monkeypatch.setattr(pins, "TREES", tmp_path / "trees")
    files = {"CMakeLists.txt": b"project(x)\n", "src/a.cc": b"int a;\n", "tools/run.sh": b"#!/bin/sh\n"}
    commit = "a" * 40
    first = _git_archive(tmp_path / f"x-{commit}.tar.gz", f"x-{commit}", files, level=9)
    source = Source(
        name="x", repository="example/x", ref="main", commit=commit, sha256=fetch.sha256(first), tree=""
    )
    digests = pins.write_manifests(tmp_path, (source,))
    return replace(source, tree=digests["x"]), files


def test_the_same_files_compressed_another_way_are_the_pinned_source(
    tmp_path: Path, pinned: tuple[Source, dict[str, bytes]]
) -> None:
    """GitHub's archive of a commit holds the same files as our mirror's, not the same compressed bytes."""
    source, files = pinned
    other = _git_archive(tmp_path / "github.tar.gz", source.top_folder, files, level=1)
    assert fetch.sha256(other) != source.sha256
    backend.verify(source, other, where="downloaded")  # accepted: the files are the commit's


def test_one_byte_changed_in_one_file_is_refused_naming_the_file(
    tmp_path: Path, pinned: tuple[Source, dict[str, bytes]]
) -> None:
    source, files = pinned
    changed = _git_archive(
        tmp_path / "bad.tar.gz", source.top_folder, {**files, "src/a.cc": b"int b;\n"}, level=9
    )
    with pytest.raises(
        BackendError,
        match=r"its files are not those of example/x a{40}: it holds other contents in src/a\.cc\.",
    ):
        backend.verify(source, changed, where="downloaded")
    fewer = _git_archive(
        tmp_path / "fewer.tar.gz",
        source.top_folder,
        {k: v for k, v in files.items() if k != "tools/run.sh"},
        level=9,
    )
    with pytest.raises(BackendError, match=r"it holds no tools/run\.sh\."):
        backend.verify(source, fewer, where="downloaded")


def test_every_pinned_source_has_its_manifest_and_the_mirror_matches_it() -> None:
    for source in VERSIONS.backend.sources:
        assert pins.pinned_tree(source) is not None, f"{pins.manifest_path(source)} is missing or not the pin"
    mirror = backend.sources_folder()
    if mirror is None:
        pytest.skip("$TRITONPT_SOURCES is unset: the mirror's tarballs are checked against the trees there")
    for source in VERSIONS.backend.sources:
        assert pins.digest(pins.tree_of(mirror / source.tarball, source.top_folder)) == source.tree


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
    """docker/pytorch.Dockerfile runs it with no package installed: -S leaves site-packages out."""
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


# ATen/ATen.h of torch 2.14 on (seen in the PyPI wheels of 2.14.1 and 2.15.0), and of torch 2.9.1, in part
ATEN_2_15 = """#pragma once

#if (defined(_MSVC_LANG) && _MSVC_LANG < 202002L) || \\
    (!defined(_MSVC_LANG) && __cplusplus < 202002L)
#error C++20 or later compatible compiler is required to use ATen.
#endif
"""
ATEN_2_9 = """#pragma once

#if !defined(_MSC_VER) && __cplusplus < 201703L
#error C++17 or later compatible compiler is required to use ATen.
#endif
"""


def _torch_with(header: str, tmp_path: Path) -> Torch:
    aten = tmp_path / "torch" / "include" / "ATen"
    aten.mkdir(parents=True)
    (aten / "ATen.h").write_text(header, encoding="utf-8")
    return replace(Torch.locate(), root=tmp_path / "torch")


def test_a_torch_whose_headers_refuse_cxx17_is_built_as_cxx20_under_a_key_of_its_own(tmp_path: Path) -> None:
    here = Torch.locate()
    assert here.cxx_standard == 17  # torch 2.9.1, the pins
    newer = _torch_with(ATEN_2_15, tmp_path / "new")
    older = _torch_with(ATEN_2_9, tmp_path / "old")
    assert (newer.cxx_standard, older.cxx_standard) == (20, 17)
    later = ATEN_2_15.replace("202002L", "202302L").replace("C++20", "C++23")  # what a later torch may ask
    assert _torch_with(later, tmp_path / "later").cxx_standard == 23
    chain = Toolchain.find("cpu")
    assert backend.build_key(older, chain, "cpu") == backend.build_key(
        here, chain, "cpu"
    )  # keys stay as they were
    assert backend.build_key(newer, chain, "cpu") != backend.build_key(here, chain, "cpu")
    source_dirs = {
        name: tmp_path / name for name in ("pytorch_backend", "common", "core", "backend", "googletest")
    }
    line = {
        t: backend.configure_command(
            source_dirs=source_dirs, build_dir=tmp_path / "b", prefix=tmp_path / "p", torch=t, toolchain=chain,
            variant="cpu",
        )
        for t in (newer, older)
    }  # fmt: skip
    assert "-DTRITON_MIN_CXX_STANDARD=20" in line[newer]
    assert not any(arg.startswith("-DTRITON_MIN_CXX_STANDARD") for arg in line[older])
    toolchain.check_cxx(chain.cxx, 20)  # this machine's compiler takes C++20 (g++ 12)


def test_a_compiler_without_cxx20_is_one_paragraph(tmp_path: Path) -> None:
    fake = tmp_path / "c++"
    fake.write_text("#!/bin/sh\necho \"error: unrecognized command-line option '-std=c++20'\" >&2\nexit 1\n")
    fake.chmod(0o755)
    with pytest.raises(BackendError) as failure:
        toolchain.check_cxx(fake, 20)
    message = str(failure.value)
    assert "as it does not compile C++20 (error: unrecognized command-line option '-std=c++20')" in message
    assert "Hint: install g++ 10 or newer" in message


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


def test_of_several_fitting_builds_find_names_the_one_ensure_would_use(
    make_backend: MakeBackend, tmp_path: Path
) -> None:
    """Two environments with the same torch and another CMake build the same sources under two keys; which
    one a server gets must not depend on the order the folder lists them in."""
    torch = Torch.locate()
    cache = tmp_path / "cache"
    key = backend.build_key(torch, Toolchain.find("cpu"), "cpu")
    mine = make_backend(key=key, cache=cache)
    other = make_backend(key=key.rsplit("-", 1)[0] + "-0123456789ab", cache=cache)
    os.utime(other.directory / backend.MANIFEST, (2e9, 2e9))  # the other one is newer
    assert backend.find("cpu", cache=cache) == BuiltBackend.read(mine.directory)


def test_without_the_key_ensure_would_use_find_takes_the_newest_build(
    make_backend: MakeBackend, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    older = make_backend(key="r25.10-3281319-torchX-cpu-aaaaaaaaaaaa", cache=cache)
    newer = make_backend(key="r25.10-3281319-torchX-cpu-bbbbbbbbbbbb", cache=cache)
    os.utime(older.directory / backend.MANIFEST, (1e9, 1e9))
    os.utime(newer.directory / backend.MANIFEST, (2e9, 2e9))
    assert backend.find("cpu", cache=cache) == BuiltBackend.read(newer.directory)
    os.utime(older.directory / backend.MANIFEST, (2e9, 2e9))  # the same age: the key decides
    assert backend.find("cpu", cache=cache) == BuiltBackend.read(newer.directory)


def test_a_build_for_another_torch_or_other_pins_is_not_found(
    make_backend: MakeBackend, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    built = make_backend(key="r25.10-3281319-torchX-cpu-cccccccccccc", cache=cache)
    manifest = json.loads((built.directory / backend.MANIFEST).read_text(encoding="utf-8"))
    manifest["torch_git_version"] = "another"
    (built.directory / backend.MANIFEST).write_text(json.dumps(manifest), encoding="utf-8")
    assert backend.find("cpu", cache=cache) is None


def test_the_unit_tier_has_a_cache_of_its_own(private_cache: Path) -> None:
    assert backend.cache_root() == private_cache
    assert Path.home() not in private_cache.parents


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
    with pytest.raises(BackendError, match=rf"Cannot use {other.as_uri()} \(downloaded\)") as failure:
        backend.fetch_sources(None, cache=tmp_path / "cache")
    assert f"archive of commit {'1' * 40}" in str(failure.value)
    assert list((tmp_path / "cache" / "sources").iterdir()) == []  # neither the file nor a partial one


def test_a_pair_folder_left_by_other_copies_of_the_same_builds_is_replaced(
    make_backend: MakeBackend, tmp_path: Path
) -> None:
    """Two runs whose builds have the same keys but live in other folders (taken out of an image, in each run's
    own temporary folder) share the pair's folder: the second finds the first's links stale and remakes it."""
    import shutil  # noqa: PLC0415

    from tritonpt.backend.serving import PT2_LIBRARY, PT2_NAME, backend_directory  # noqa: PLC0415

    first = make_backend(key="ts-key"), make_backend(key="pt2-key")
    runs = []
    for run in ("run-1", "run-2"):
        moved = []
        for built in first:
            target = tmp_path / "runs" / run / built.key
            shutil.copytree(built.directory, target)
            moved.append(replace(built, directory=target))
        runs.append(moved)
    folders = [backend_directory(*run) for run in runs]
    assert folders[0] == folders[1] == tmp_path / "runs" / "served" / "ts-key+pt2-key"
    shutil.rmtree(tmp_path / "runs" / "run-1")  # the first run's copies are gone
    again = backend_directory(*runs[1])
    assert (again / "pytorch" / backend.LIBRARY).resolve() == runs[1][0].library.resolve()
    assert (again / PT2_NAME / PT2_LIBRARY).resolve() == runs[1][1].library.resolve()
    assert [p.name for p in (tmp_path / "runs" / "served").iterdir()] == ["ts-key+pt2-key"]
