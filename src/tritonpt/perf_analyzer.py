"""NVIDIA's perf_analyzer, the load generator of the bench and the tune: fetched on first use, then reused.

``locate(step)`` gives the binary and the environment it runs with: from the cache, else taken out of the
tritonclient wheel that versions.toml [bench] pins (from ``$TRITONPT_WHEELS``, the cache's wheels/ or PyPI,
its sha256 checked), with the libb64 it links, staged and renamed into the cache. It runs beside whatever
tritonclient the environment imports, and finds ``libcudart.so.12`` in torch's ``nvidia-cuda-runtime``.
"""

from __future__ import annotations

import os
import platform
import shutil
import zipfile
from collections.abc import Callable
from pathlib import Path

from tritonpt import fetch, scratch, stopping
from tritonpt.backend import Torch, cache_root, package_folder
from tritonpt.errors import HINT, TritonPtError
from tritonpt.versions import VERSIONS, Wheel

WHEELS_ENV = "TRITONPT_WHEELS"
"""A folder of wheels by their PyPI file names, for machines that cannot reach PyPI."""
LIBB64 = "libb64.so.0d"

Step = Callable[[str], None]
Tool = tuple[Path, dict[str, str]]
"""perf_analyzer's path and the environment to run it with."""


class PerfAnalyzerError(TritonPtError):
    """perf_analyzer could not be fetched or unpacked."""


def tool_dir(cache: Path | None = None) -> Path:
    """``<cache>/tools/perf_analyzer-<tritonclient version>/``."""
    return (cache or cache_root()) / "tools" / f"perf_analyzer-{VERSIONS.bench.tritonclient}"


def pinned_wheel(machine: str | None = None) -> Wheel:
    machine = machine or platform.machine()
    wheel = VERSIONS.bench.wheel(machine)
    if wheel is None:
        known = ", ".join(w.machine for w in VERSIONS.bench.wheels)
        msg = (
            f"Cannot install perf_analyzer on a {machine} machine: tritonclient {VERSIONS.bench.tritonclient} "
            f"is pinned for {known} only (versions.toml [bench])."
        )
        raise PerfAnalyzerError(msg)
    return wheel


def locate(step: Step = lambda _: None, *, cache: Path | None = None) -> Tool:
    """perf_analyzer ready to run: from the cache, else installed there first (see the module docstring)."""
    binary = tool_dir(cache) / "perf_analyzer"
    if not binary.is_file():
        install(wheel_file(step, cache=cache), cache=cache)
        step(f"perf_analyzer {VERSIONS.bench.tritonclient} installed in {binary.parent}")
    cudart = Torch.locate().root.parent / "nvidia" / "cuda_runtime" / "lib"
    folders = [str(binary.parent / "lib"), str(cudart), os.environ.get("LD_LIBRARY_PATH", "")]
    return binary, {**os.environ, "LD_LIBRARY_PATH": os.pathsep.join(f for f in folders if f)}


def _check(wheel: Wheel, path: Path, where: str) -> None:
    digest = fetch.sha256(path)
    if digest != wheel.sha256:
        msg = (
            f"Cannot use {path} ({where}) as {wheel.file}, as its sha256 is {digest}, not the pinned "
            f"{wheel.sha256}.\n{HINT} replace it with {wheel.url}."
        )
        raise PerfAnalyzerError(msg)


def wheel_file(step: Step = lambda _: None, *, cache: Path | None = None) -> Path:
    """The pinned wheel, checked: ``$TRITONPT_WHEELS/<file>``, else the cache's copy, else downloaded into it."""
    wheel = pinned_wheel()
    given = os.environ.get(WHEELS_ENV)
    if given:
        path = Path(given) / wheel.file
        if not path.is_file():
            msg = (
                f"Cannot find {wheel.file} in {given} (${WHEELS_ENV}).\n{HINT} put {wheel.url} there under that "
                f"name, or unset ${WHEELS_ENV} to download it."
            )
            raise PerfAnalyzerError(msg)
        _check(wheel, path, f"in ${WHEELS_ENV}")
        return path
    path = (cache or cache_root()) / "wheels" / wheel.file
    if not path.is_file():
        step(f"downloading {wheel.file} (about 14 MB, once) for perf_analyzer")
        fetch.download(
            wheel.url,
            path,
            check=lambda partial: _check(wheel, partial, "downloaded"),
            what=wheel.file,
            offline=f"without PyPI, download it elsewhere and point ${WHEELS_ENV} at the folder that holds it "
            f"(or run `python -m tritonpt.bench --install-perf-analyzer WHEEL`).",
            error=PerfAnalyzerError,
        )
    _check(wheel, path, "in the cache")
    return path


def install(wheel: Path, *, cache: Path | None = None) -> Path:
    """Take perf_analyzer and the libb64 it needs into the cache, staged beside it and renamed in; return it."""
    member = f"tritonclient-{VERSIONS.bench.tritonclient}.data/data/bin/perf_analyzer"
    pytriton = package_folder("pytriton")
    libs = sorted(pytriton.parent.glob("nvidia_pytriton.libs/libb64-*.so.0d")) if pytriton else []
    if not libs:
        msg = (
            f"Cannot install perf_analyzer without {LIBB64}, which it links: nvidia_pytriton.libs has none. "
            f"{HINT} install nvidia-pytriton=={VERSIONS.embedded.pytriton} in this environment."
        )
        raise PerfAnalyzerError(msg)
    folder = tool_dir(cache)
    folder.parent.mkdir(parents=True, exist_ok=True)
    with scratch.folder(f".{folder.name}-", inside=folder.parent) as staging:
        tool = staging / "tool"
        (tool / "lib").mkdir(parents=True)
        try:
            with (
                zipfile.ZipFile(wheel) as archive,
                archive.open(member) as source,
                (tool / "perf_analyzer").open("wb") as target,
            ):
                shutil.copyfileobj(source, target)
        except (OSError, KeyError, zipfile.BadZipFile) as exc:
            msg = (
                f"Cannot take perf_analyzer out of {wheel} ({exc}); it must be tritonclient "
                f"{VERSIONS.bench.tritonclient}'s manylinux wheel."
            )
            raise PerfAnalyzerError(msg) from exc
        (tool / "perf_analyzer").chmod(0o755)
        shutil.copy2(libs[0], tool / "lib" / LIBB64)
        with stopping.ctrl_c_held():  # the old install moves aside and the new one in, in two renames
            if folder.exists():
                folder.replace(staging / "previous")
            tool.replace(folder)
    return folder / "perf_analyzer"
