"""perf_analyzer on first use: the pinned wheel, checked wherever it comes from, unpacked into the cache once.

The real wheel is fetched by `nox -s bench-smoke` (and its figures are never judged); here wheels made on the
spot stand in for it, so nothing is downloaded and the user's cache is not touched.
"""

from __future__ import annotations

import zipfile
from dataclasses import replace
from pathlib import Path

import pytest

from tritonpt import fetch, perf_analyzer
from tritonpt.perf_analyzer import PerfAnalyzerError
from tritonpt.versions import VERSIONS

MEMBER = f"tritonclient-{VERSIONS.bench.tritonclient}.data/data/bin/perf_analyzer"


def _wheel(path: Path, *, binary: bytes = b"#!/bin/sh\necho perf_analyzer\n") -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(MEMBER, binary)
    return path


def _pin(monkeypatch: pytest.MonkeyPatch, wheel: Path) -> None:
    """Pin this machine's wheel to ``wheel``'s bytes, served from a file:// URL."""
    pinned = perf_analyzer.pinned_wheel()
    ours = replace(pinned, sha256=fetch.sha256(wheel), url=wheel.as_uri())
    monkeypatch.setattr(perf_analyzer, "pinned_wheel", lambda machine=None: ours)


def test_first_use_downloads_the_wheel_once_and_unpacks_perf_analyzer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(perf_analyzer.WHEELS_ENV, raising=False)
    _pin(monkeypatch, _wheel(tmp_path / "published.whl"))
    cache = tmp_path / "cache"
    steps: list[str] = []
    binary, env = perf_analyzer.locate(steps.append, cache=cache)
    assert binary == perf_analyzer.tool_dir(cache) / "perf_analyzer"
    assert binary.read_bytes().startswith(b"#!/bin/sh")
    assert binary.stat().st_mode & 0o111
    assert (binary.parent / "lib" / perf_analyzer.LIBB64).is_file()
    assert str(binary.parent / "lib") in env["LD_LIBRARY_PATH"]
    assert [s for s in steps if s.startswith("downloading")], steps
    steps.clear()
    assert perf_analyzer.locate(steps.append, cache=cache)[0] == binary
    assert steps == []  # the second use finds it in the cache
    assert [p.name for p in binary.parent.parent.iterdir()] == [binary.parent.name]  # no staging left


def test_a_wheel_that_is_not_the_pinned_one_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _pin(monkeypatch, _wheel(tmp_path / "published.whl"))
    local = tmp_path / "wheels"
    local.mkdir()
    _wheel(local / perf_analyzer.pinned_wheel().file, binary=b"something else")
    monkeypatch.setenv(perf_analyzer.WHEELS_ENV, str(local))
    with pytest.raises(PerfAnalyzerError, match=r"in \$TRITONPT_WHEELS\) as .*, as its sha256 is"):
        perf_analyzer.locate(cache=tmp_path / "cache")
    assert not (tmp_path / "cache" / "tools").exists() or not any((tmp_path / "cache" / "tools").iterdir())


def test_a_local_copy_is_taken_from_the_wheels_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    local = tmp_path / "wheels"
    local.mkdir()
    wheel = _wheel(local / "copy.whl")
    _pin(monkeypatch, wheel)
    wheel.rename(local / perf_analyzer.pinned_wheel().file)
    monkeypatch.setenv(perf_analyzer.WHEELS_ENV, str(local))
    binary, _ = perf_analyzer.locate(cache=tmp_path / "cache")
    assert binary.is_file()
    assert not (tmp_path / "cache" / "wheels").exists()  # nothing was downloaded


def test_without_pypi_the_error_names_the_wheel_and_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(perf_analyzer.WHEELS_ENV, raising=False)
    pinned = perf_analyzer.pinned_wheel()
    unreachable = replace(pinned, url=(tmp_path / "nowhere" / pinned.file).as_uri())
    monkeypatch.setattr(perf_analyzer, "pinned_wheel", lambda machine=None: unreachable)
    with pytest.raises(PerfAnalyzerError) as failure:
        perf_analyzer.locate(cache=tmp_path / "cache")
    message = str(failure.value)
    assert f"Cannot download {pinned.file} from" in message
    assert "$TRITONPT_WHEELS" in message
    assert list((tmp_path / "cache" / "wheels").iterdir()) == []  # no partial file


def test_every_machine_has_a_pinned_wheel_and_others_are_refused() -> None:
    for wheel in VERSIONS.bench.wheels:
        assert wheel.file.startswith(f"tritonclient-{VERSIONS.bench.tritonclient}-")
        assert wheel.url.endswith("/" + wheel.file)
        assert len(wheel.sha256) == 64
    with pytest.raises(PerfAnalyzerError, match="pinned for x86_64, aarch64 only"):
        perf_analyzer.pinned_wheel("riscv64")
