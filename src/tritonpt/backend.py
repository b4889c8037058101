"""Stage "backend": the official Triton pytorch backend, ``libtriton_pytorch.so``, built from pinned sources.

    sources    a folder of tarballs (--sources DIR, $TRITONPT_SOURCES) or GitHub at the pinned commits;
               every tarball's sha256 checked against versions.toml [backend]
      -> unpacked into a staging folder beside the cache
      -> RapidJSON configured and installed into a local prefix (headers only)
      -> pytorch_backend configured against the running environment's torch (LIB_PATHS mode), with
         core, backend, common and googletest given as FetchContent source folders (nothing is cloned)
      -> compiled (target ``triton-pytorch-backend`` only) -> moved into the cache in one rename

The cache entry is a folder Triton takes as ``--backend-directory``: ``<entry>/pytorch/libtriton_pytorch.so``
plus ``build.json`` (what it was built from). Its name carries a hash of every input: the six commits, the
torch build, the compiler, the CUDA toolkit for the GPU variant, CMake and the definition below. A hit costs a
``c++ --version``; a build never leaves a half-built entry (it is staged and renamed, and the staging folder is
removed whatever happens).

The same code builds the backend inside recipes/pytorch.Dockerfile (``python3 -m tritonpt.backend``), so this
module imports only the standard library and :mod:`tritonpt.versions` / :mod:`tritonpt.errors`; it finds torch
without importing it.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import re
import runpy
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from importlib import util as importlib_util
from pathlib import Path
from typing import Literal, get_args

from tritonpt.errors import BackendError
from tritonpt.versions import VERSIONS, Backend, Source

Variant = Literal["cpu", "gpu"]
Choice = Literal["cpu", "gpu", "auto"]
CHOICES: tuple[Choice, ...] = get_args(Choice)

LIBRARY = "libtriton_pytorch.so"
"""The official backend's shared library; Triton loads ``<backend-directory>/pytorch/libtriton_pytorch.so``."""
MANIFEST = "build.json"
TARGET = "triton-pytorch-backend"
SOURCES_ENV = "TRITONPT_SOURCES"
CACHE_ENV = "TRITONPT_CACHE"
CUDA_HOME = Path("/usr/local/cuda")
NVIDIA_DEVICE = Path("/dev/nvidiactl")
"""Present on a host whose NVIDIA driver is loaded."""
DOWNLOAD_TIMEOUT_S = 60.0

# The one CMake definition of the backend, for `invoke build-backend` and recipes/pytorch.Dockerfile alike
# (paths are added by configure_command). TorchVision is off: the torch wheel has no libtorchvision.so
# (reference/triton.md 2.3); TorchTRT needs TensorRT. NVSHMEM follows the variant (only CUDA torch has it).
DEFINITION: Mapping[str, str] = {
    "CMAKE_BUILD_TYPE": "Release",
    "TRITON_PYTORCH_ENABLE_TORCHVISION": "OFF",
    "TRITON_PYTORCH_ENABLE_TORCHTRT": "OFF",
    "FETCHCONTENT_FULLY_DISCONNECTED": "ON",
}
VARIANT_DEFINITION: Mapping[Variant, Mapping[str, str]] = {
    "cpu": {"TRITON_ENABLE_GPU": "OFF", "TRITON_PYTORCH_NVSHMEM": "OFF"},
    "gpu": {"TRITON_ENABLE_GPU": "ON", "TRITON_PYTORCH_NVSHMEM": "ON"},
}
RAPIDJSON_DEFINITION: Mapping[str, str] = {
    "RAPIDJSON_BUILD_DOC": "OFF",
    "RAPIDJSON_BUILD_EXAMPLES": "OFF",
    "RAPIDJSON_BUILD_TESTS": "OFF",
    # RapidJSON's CMakeLists asks for an old minimum; CMake 4 refuses those without this floor.
    "CMAKE_POLICY_VERSION_MINIMUM": "3.5",
}
# FetchContent names in pytorch_backend's CMakeLists -> our source names.
FETCHED: Mapping[str, str] = {
    "REPO-COMMON": "common",
    "REPO-CORE": "core",
    "REPO-BACKEND": "backend",
    "GOOGLETEST": "googletest",
}

Step = Callable[[str], None]


def _quiet(_: str) -> None:
    pass


def cache_root() -> Path:
    """``$TRITONPT_CACHE``, else ``$XDG_CACHE_HOME/tritonpt`` (``~/.cache/tritonpt``)."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tritonpt"


# --- What the build runs against ----------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Torch:
    """The torch of the running environment, found without importing it (``torch/version.py``)."""

    version: str  # "2.9.1+cu128"
    git_version: str
    cuda: str | None  # "12.8", or None for a CPU build
    root: Path  # .../site-packages/torch

    @property
    def lib_dir(self) -> Path:
        return self.root / "lib"

    @property
    def include_dirs(self) -> tuple[Path, Path]:
        return self.root / "include", self.root / "include" / "torch" / "csrc" / "api" / "include"

    @classmethod
    def locate(cls) -> Torch:
        spec = importlib_util.find_spec("torch")
        if spec is None or not spec.submodule_search_locations:
            msg = (
                f"Cannot build or serve the pytorch backend, as there is no torch in {sys.prefix}.\n"
                f"Hint: install torch=={VERSIONS.pytorch.torch} in this environment (nox sessions do)."
            )
            raise BackendError(msg)
        root = Path(next(iter(spec.submodule_search_locations)))
        try:
            info = runpy.run_path(str(root / "version.py"))
        except (OSError, SyntaxError, ImportError) as exc:
            msg = f"Cannot read {root / 'version.py'} ({exc}); reinstall torch=={VERSIONS.pytorch.torch}."
            raise BackendError(msg) from exc
        return cls(
            version=str(info["__version__"]),
            git_version=str(info.get("git_version", "")),
            cuda=str(info["cuda"]) if info.get("cuda") else None,
            root=root,
        )


@dataclass(frozen=True, kw_only=True)
class Toolchain:
    """What compiles the backend: C and C++ compilers, CMake (PyPI), the Python headers, and nvcc for GPU."""

    cc: Path
    cxx: Path
    compiler: str  # first line of `c++ --version`
    cmake: Path
    cmake_version: str
    python: Path
    python_include: Path
    nvcc: Path | None = None
    cuda_version: str | None = None  # the toolkit's release, e.g. "13.0"

    @classmethod
    def find(cls, variant: Variant) -> Toolchain:
        cxx = _program(os.environ.get("CXX"), "c++", "g++", "clang++")
        cc = _program(os.environ.get("CC"), "cc", "gcc", "clang")
        if cxx is None or cc is None:
            missing = "C++" if cxx is None else "C"
            msg = (
                f"Cannot build the pytorch backend, as no {missing} compiler was found (looked for $CXX/$CC, "
                "c++, g++, clang++, cc, gcc, clang on PATH).\n"
                "Hint: install a C++17 compiler (Debian/Ubuntu: `apt-get install g++`)."
            )
            raise BackendError(msg)
        _check_cxx17(cxx)
        headers = Path(sysconfig.get_paths()["include"]) / "Python.h"
        if not headers.is_file():
            version = f"{sys.version_info.major}.{sys.version_info.minor}"
            msg = (
                f"Cannot build the pytorch backend, as the Python headers of {sys.executable} are missing "
                f"(no {headers}; torch's headers include Python.h).\n"
                f"Hint: install them (Debian/Ubuntu: `apt-get install libpython{version}-dev`)."
            )
            raise BackendError(msg)
        cmake, cmake_version = _cmake()
        nvcc, cuda_version = (None, None)
        if variant == "gpu":
            nvcc = _nvcc()
            if nvcc is None:
                msg = (
                    "Cannot build the GPU variant of the pytorch backend, as no CUDA toolkit was found (no nvcc on "
                    f"PATH, in $CUDA_HOME or in {CUDA_HOME}/bin); build the CPU variant (--variant cpu) or install "
                    "the toolkit."
                )
                raise BackendError(msg)
            cuda_version = _nvcc_release(nvcc)
        return cls(
            cc=cc,
            cxx=cxx,
            compiler=_first_line([str(cxx), "--version"]),
            cmake=cmake,
            cmake_version=cmake_version,
            python=Path(sys.executable),
            python_include=headers.parent,
            nvcc=nvcc,
            cuda_version=cuda_version,
        )


def _program(*names: str | None) -> Path | None:
    for name in names:
        if name:
            found = shutil.which(name)
            if found:
                return Path(found)
    return None


def _first_line(command: Sequence[str]) -> str:
    result = subprocess.run(command, capture_output=True, text=True, check=False, timeout=30)
    return (
        (result.stdout or result.stderr).strip().splitlines()[0] if (result.stdout or result.stderr) else ""
    )


def _check_cxx17(cxx: Path) -> None:
    probe = subprocess.run(
        [str(cxx), "-std=c++17", "-x", "c++", "-fsyntax-only", "-"],
        input="#include <optional>\nint main() { std::optional<int> v{1}; return *v - 1; }\n",
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    if probe.returncode != 0:
        first = (probe.stderr.strip().splitlines() or ["no output"])[0]
        msg = (
            f"Cannot build the pytorch backend with {cxx}, as it does not compile C++17 ({first}).\n"
            "Hint: install g++ 9 or newer, or point $CXX at a C++17 compiler."
        )
        raise BackendError(msg)


def _cmake() -> tuple[Path, str]:
    """CMake from the cmake wheel of this environment (PyPI), else the one on PATH; its version checked."""
    found: Path | None = None
    spec = importlib_util.find_spec("cmake")
    if spec is not None and spec.submodule_search_locations:
        candidate = Path(next(iter(spec.submodule_search_locations))) / "data" / "bin" / "cmake"
        found = candidate if candidate.is_file() else None
    found = found or _program("cmake")
    wanted = VERSIONS.backend.cmake
    if found is None:
        msg = (
            "Cannot build the pytorch backend, as CMake is not installed in this environment.\n"
            f'Hint: pip install "cmake=={wanted}" (the PyPI wheel; pytorch_backend r25.10 needs >= 3.31.8).'
        )
        raise BackendError(msg)
    line = _first_line([str(found), "--version"])
    match = re.search(r"(\d+)\.(\d+)\.(\d+)", line)
    version = match.group(0) if match else "unknown"
    if match is None or tuple(int(p) for p in match.groups()) < (3, 31, 8):
        msg = (
            f"Cannot build the pytorch backend with {found} ({line or 'no version'}), as pytorch_backend r25.10 "
            f'needs CMake >= 3.31.8.\nHint: pip install "cmake=={wanted}".'
        )
        raise BackendError(msg)
    return found, version


def _nvcc() -> Path | None:
    candidates = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), str(CUDA_HOME)]
    for home in candidates:
        if home and (Path(home) / "bin" / "nvcc").is_file():
            return Path(home) / "bin" / "nvcc"
    return _program("nvcc")


def _nvcc_release(nvcc: Path) -> str:
    match = re.search(r"release (\d+\.\d+)", subprocess.run(
        [str(nvcc), "--version"], capture_output=True, text=True, check=False, timeout=60
    ).stdout)  # fmt: skip
    return match.group(1) if match else "unknown"


def resolve_variant(choice: Choice, torch: Torch) -> Variant:
    """``cpu`` and ``gpu`` as given (``gpu`` needs a CUDA torch); ``auto``: ``gpu`` where a CUDA torch, a CUDA
    toolkit and an NVIDIA driver are all present, else ``cpu``."""
    if choice not in CHOICES:
        msg = f"Cannot build the variant {choice!r}: choose one of {', '.join(CHOICES)}."
        raise BackendError(msg)
    if choice == "auto":
        return "gpu" if torch.cuda and _nvcc() is not None and NVIDIA_DEVICE.exists() else "cpu"
    if choice == "gpu" and not torch.cuda:
        msg = (
            f"Cannot build the GPU variant of the pytorch backend, as torch {torch.version} in {torch.root} is a "
            "CPU build; install a CUDA build of torch or build --variant cpu."
        )
        raise BackendError(msg)
    return choice


# --- What was built -----------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Origin:
    """Where a served ``libtriton_pytorch.so`` came from, as the reports name it."""

    ref: str  # pytorch_backend ref, "r25.10"
    commit: str  # pytorch_backend commit
    torch: str  # the torch it was built against, "2.9.1+cu128"
    variant: str  # "cpu" or "gpu"

    def describe(self) -> str:
        return f"pytorch_backend {self.ref} ({self.commit[:7]}), built against torch {self.torch}, {self.variant}"


@dataclass(frozen=True, kw_only=True)
class BuiltBackend:
    """One build of the official backend in the cache: a folder Triton takes as ``--backend-directory``."""

    directory: Path
    key: str
    variant: Variant
    ref: str  # pytorch_backend ref, "r25.10"
    commit: str  # pytorch_backend commit
    commits: Mapping[str, str]  # every source's commit
    torch_version: str
    torch_git_version: str
    torch_cuda: str | None
    compiler: str
    cmake_version: str
    cuda_toolkit: str | None
    library_dirs: tuple[
        str, ...
    ]  # besides torch/lib, what the library needs at run time (the CUDA toolkit's)
    seconds: float  # how long the build took
    cached: bool = False  # True when this call found it in the cache

    @property
    def library(self) -> Path:
        return self.directory / "pytorch" / LIBRARY

    @property
    def origin(self) -> Origin:
        return Origin(ref=self.ref, commit=self.commit, torch=self.torch_version, variant=self.variant)

    def describe(self) -> str:
        """``libtriton_pytorch.so from pytorch_backend r25.10 (3281319), built against torch 2.9.1+cu128, cpu``."""
        return f"{LIBRARY} from {self.origin.describe()}"

    def matches(self, torch: Torch, *, backend: Backend = VERSIONS.backend) -> bool:
        """Built from today's pins against this very torch build."""
        return (
            self.torch_version == torch.version
            and self.torch_git_version == torch.git_version
            and dict(self.commits) == {s.name: s.commit for s in backend.sources}
        )

    def manifest(self) -> dict[str, object]:
        data = asdict(self)
        for transient in ("directory", "cached"):
            data.pop(transient)
        data["library_dirs"] = list(self.library_dirs)
        return data

    @classmethod
    def read(cls, directory: Path) -> BuiltBackend:
        """The build in ``directory``; raises ``BackendError`` when its manifest or library is missing."""
        manifest = directory / MANIFEST
        try:
            data = json.loads(manifest.read_text(encoding="utf-8"))
            built = cls(
                directory=directory, cached=True, **{**data, "library_dirs": tuple(data["library_dirs"])}
            )
        except (OSError, ValueError, TypeError, KeyError) as exc:
            msg = f"Cannot read the backend build in {directory} ({exc}); remove that folder and build again."
            raise BackendError(msg) from exc
        if not built.library.is_file():
            msg = f"The backend build in {directory} has no {built.library.name}; remove that folder and build again."
            raise BackendError(msg)
        return built


def build_key(
    torch: Torch, toolchain: Toolchain, variant: Variant, backend: Backend = VERSIONS.backend
) -> str:
    """``r25.10-3281319-torch2.9.1+cu128-cpu-<hash of every input>``: the cache entry's name."""
    inputs = {
        "sources": {s.name: [s.commit, s.sha256] for s in backend.sources},
        "torch": [torch.version, torch.git_version, torch.cuda],
        "compiler": toolchain.compiler,
        "cmake": toolchain.cmake_version,
        "cuda_toolkit": toolchain.cuda_version,
        "variant": variant,
        "definition": [dict(DEFINITION), dict(VARIANT_DEFINITION[variant]), dict(RAPIDJSON_DEFINITION)],
    }
    digest = hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:12]
    source = backend.pytorch_backend
    return f"{source.ref}-{source.commit[:7]}-torch{torch.version}-{variant}-{digest}"


def find(
    variant: Variant | None = None, *, torch: Torch | None = None, cache: Path | None = None
) -> BuiltBackend | None:
    """The newest cached build for this torch and today's pins, or None; no compiler is asked.

    ``variant`` None: the GPU variant where an NVIDIA driver is loaded and a GPU build exists, else the CPU one.
    """
    torch = torch or Torch.locate()
    folder = (cache or cache_root()) / "backends"
    if not folder.is_dir():
        return None
    found: list[BuiltBackend] = []
    for entry in folder.iterdir():
        if entry.name.startswith(".") or not (entry / MANIFEST).is_file():
            continue
        with contextlib.suppress(BackendError):
            built = BuiltBackend.read(entry)
            if built.matches(torch):
                found.append(built)
    wanted: tuple[Variant, ...] = (
        (variant,) if variant else (("gpu", "cpu") if NVIDIA_DEVICE.exists() else ("cpu",))
    )
    for kind in wanted:
        builds = sorted((b for b in found if b.variant == kind), key=lambda b: b.library.stat().st_mtime)
        if builds:
            return builds[-1]
    return None


# --- Sources ------------------------------------------------------------------------------------------------


def sources_folder(explicit: Path | str | None = None) -> Path | None:
    """``--sources DIR``, else ``$TRITONPT_SOURCES``, else None (download from GitHub)."""
    if explicit:
        return Path(explicit)
    env = os.environ.get(SOURCES_ENV)
    return Path(env) if env else None


def _sha256(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _archived_commit(path: Path) -> str:
    """The commit ``git archive`` recorded in the tarball's pax header, or "" when there is none."""
    with contextlib.suppress(tarfile.TarError, OSError), tarfile.open(path) as archive:
        return str(archive.pax_headers.get("comment", ""))
    return ""


def verify(source: Source, path: Path, *, where: str) -> None:
    """Raise ``BackendError`` unless ``path`` is the pinned tarball of ``source`` (sha256)."""
    digest = _sha256(path)
    if digest == source.sha256:
        return
    commit = _archived_commit(path)
    what = f"it is an archive of commit {commit}" if commit else "it is not a git archive tarball"
    msg = (
        f"Cannot use {path} ({where}) as the {source.name} source, as its sha256 is {digest}, not the pinned "
        f"{source.sha256} ({source.repository} {source.commit}); {what}.\n"
        f"Hint: replace it with {source.url}, or fix the pin in versions.toml [backend] if the commit changed on purpose."
    )
    raise BackendError(msg)


def fetch_sources(
    folder: Path | None,
    *,
    cache: Path | None = None,
    step: Step = _quiet,
    backend: Backend = VERSIONS.backend,
) -> dict[str, Path]:
    """Each pinned source's tarball, verified: from ``folder``, or downloaded into the cache once."""
    found: dict[str, Path] = {}
    if folder is not None:
        if not folder.is_dir():
            msg = (
                f"Cannot read the backend sources from {folder}, as it is not a folder (--sources / ${SOURCES_ENV}).\n"
                "Hint: point it at a folder of <name>-<commit>.tar.gz tarballs, or leave both unset to download them."
            )
            raise BackendError(msg)
        for source in backend.sources:
            path = folder / source.tarball
            if not path.is_file():
                msg = (
                    f"Cannot find the {source.name} source: there is no {source.tarball} in {folder} "
                    f"(--sources / ${SOURCES_ENV}).\nHint: put {source.url} there under that name, or unset "
                    f"${SOURCES_ENV} to download every source."
                )
                raise BackendError(msg)
            verify(source, path, where=f"in {folder}")
            found[source.name] = path
        return found
    downloads = (cache or cache_root()) / "sources"
    downloads.mkdir(parents=True, exist_ok=True)
    for source in backend.sources:
        path = downloads / source.tarball
        if not path.is_file():
            step(f"downloading {source.name} {source.commit[:7]} from {source.url}")
            _download(source, path)
        verify(source, path, where="downloaded")
        found[source.name] = path
    return found


def _download(source: Source, target: Path) -> None:
    handle, name = tempfile.mkstemp(prefix=f".{source.tarball}.", dir=target.parent)
    partial = Path(name)
    try:
        url = source.url  # https://github.com/..., built from the pins
        with os.fdopen(handle, "wb") as out:
            response = urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT_S)  # noqa: S310
            with response:
                shutil.copyfileobj(response, out)
        verify(source, partial, where=f"downloaded from {source.url}")
        partial.replace(target)
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", None) or exc
        msg = (
            f"Cannot download the {source.name} source from {source.url}, as {reason}.\n"
            f"Hint: without GitHub, give a folder of the tarballs with --sources DIR or ${SOURCES_ENV} "
            f"(files named <name>-<commit>.tar.gz, e.g. {source.tarball})."
        )
        raise BackendError(msg) from exc
    finally:
        partial.unlink(missing_ok=True)


# --- The build ----------------------------------------------------------------------------------------------


def configure_command(
    *,
    source_dirs: Mapping[str, Path],
    build_dir: Path,
    prefix: Path,
    torch: Torch,
    toolchain: Toolchain,
    variant: Variant,
) -> list[str]:
    """The cmake configure line of pytorch_backend: :data:`DEFINITION` plus the paths of this build."""
    include, api_include = torch.include_dirs
    definitions = {
        **DEFINITION,
        **VARIANT_DEFINITION[variant],
        "CMAKE_C_COMPILER": str(toolchain.cc),
        "CMAKE_CXX_COMPILER": str(toolchain.cxx),
        "Python3_EXECUTABLE": str(toolchain.python),
        # FindPython (CMake 4.1) does not ask a venv's interpreter for its headers; we know where they are.
        "Python3_INCLUDE_DIR": str(toolchain.python_include),
        "TRITON_PYTORCH_INCLUDE_PATHS": f"{include};{api_include}",
        "TRITON_PYTORCH_LIB_PATHS": str(torch.lib_dir),
        "RapidJSON_DIR": str(prefix / "lib" / "cmake" / "RapidJSON"),
        # RapidJSON's CMake config puts no include folder on common's targets (FACTS: triton_json.h fails).
        "CMAKE_CXX_FLAGS": f"-isystem {prefix / 'include'}",
        **{f"FETCHCONTENT_SOURCE_DIR_{name}": str(source_dirs[source]) for name, source in FETCHED.items()},
    }
    if variant == "gpu" and toolchain.nvcc is not None:
        definitions["CUDAToolkit_ROOT"] = str(toolchain.nvcc.parent.parent)
    args = [str(toolchain.cmake), "-S", str(source_dirs["pytorch_backend"]), "-B", str(build_dir)]
    return args + [f"-D{key}={value}" for key, value in definitions.items()]


class _Log:
    """The build's full output in one file; remembers the first error line."""

    ERROR = re.compile(r"(^CMake Error|\berror:|undefined reference|cannot find -l)")

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._handle = path.open("w", encoding="utf-8")
        self.first_error = ""

    def run(self, command: Sequence[str], *, on_line: Step | None = None, cwd: Path | None = None) -> int:
        self.first_error = ""  # of the command that fails, not of an earlier one
        self._handle.write(f"$ {' '.join(command)}\n")
        self._handle.flush()
        with subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace", cwd=cwd
        ) as process:
            assert process.stdout is not None  # noqa: S101 - stdout=PIPE above
            for line in process.stdout:
                self._handle.write(line)
                text = line.rstrip()
                if not self.first_error and self.ERROR.search(text):
                    self.first_error = text.strip()
                if on_line is not None:
                    on_line(text)
            code = process.wait()
        self._handle.flush()
        return code

    def close(self) -> None:
        self._handle.close()


def ensure(
    *,
    sources: Path | str | None = None,
    variant: Choice = "cpu",
    cache: Path | None = None,
    force: bool = False,
    step: Step = _quiet,
    jobs: int | None = None,
) -> BuiltBackend:
    """The backend for this environment's torch: from the cache when it holds the same inputs, else built."""
    torch = Torch.locate()
    chosen = resolve_variant(variant, torch)
    toolchain = Toolchain.find(chosen)
    root = cache or cache_root()
    key = build_key(torch, toolchain, chosen)
    entry = root / "backends" / key
    if not force and (entry / MANIFEST).is_file():
        with contextlib.suppress(BackendError):
            return BuiltBackend.read(entry)
    tarballs = fetch_sources(sources_folder(sources), cache=root, step=step)
    return _build(
        key, entry, tarballs, torch=torch, toolchain=toolchain, variant=chosen, step=step, jobs=jobs
    )


def _build(
    key: str,
    entry: Path,
    tarballs: Mapping[str, Path],
    *,
    torch: Torch,
    toolchain: Toolchain,
    variant: Variant,
    step: Step,
    jobs: int | None,
) -> BuiltBackend:
    started = time.perf_counter()
    entry.parent.mkdir(parents=True, exist_ok=True)
    log = _Log(entry.parent.parent / "logs" / f"{key}.log")
    with _staging(entry.parent, key) as staging:
        source_dirs = _unpack(tarballs, staging / "src", step)
        prefix, build_dir = staging / "rapidjson", staging / "build"
        step("configuring and installing RapidJSON (headers) into the build folder")
        rapidjson = [
            str(toolchain.cmake),
            "-S",
            str(source_dirs["rapidjson"]),
            "-B",
            str(staging / "rapidjson-build"),
        ]
        rapidjson += [
            f"-D{k}={v}" for k, v in {**RAPIDJSON_DEFINITION, "CMAKE_INSTALL_PREFIX": str(prefix)}.items()
        ]
        _checked(log, rapidjson, "configure RapidJSON")
        _checked(
            log, [str(toolchain.cmake), "--install", str(staging / "rapidjson-build")], "install RapidJSON"
        )
        source = VERSIONS.backend.pytorch_backend
        step(
            f"configuring pytorch_backend {source.ref} ({source.commit[:7]}), {variant} variant, against torch "
            f"{torch.version} in {torch.root}"
        )
        configure = configure_command(
            source_dirs=source_dirs,
            build_dir=build_dir,
            prefix=prefix,
            torch=torch,
            toolchain=toolchain,
            variant=variant,
        )
        _checked(log, configure, "configure pytorch_backend")
        parallel = str(jobs or os.cpu_count() or 2)
        step(f"compiling {LIBRARY} ({parallel} jobs; full log: {log.path})")
        seen: set[str] = set()

        def progress(line: str) -> None:
            match = re.match(
                r"\[\s*(\d+)%\]\s+(Building|Linking)\s+\S+\s+(?:object|(?:shared|static) (?:library|module))\s+(\S+)",
                line,
            )
            if match and match.group(3) not in seen:
                seen.add(match.group(3))
                step(f"  [{match.group(1):>3}%] {match.group(2).lower()} {Path(match.group(3)).name}")

        build = [str(toolchain.cmake), "--build", str(build_dir), "--target", TARGET, "--parallel", parallel]
        _checked(log, build, f"compile {LIBRARY}", on_line=progress)
        log.close()
        built_library = build_dir / LIBRARY
        if not built_library.is_file():
            msg = f"Cannot find {built_library} after a successful build; the full log is {log.path}."
            raise BackendError(msg)
        result = staging / "entry"
        (result / "pytorch").mkdir(parents=True)
        shutil.copy2(built_library, result / "pytorch" / LIBRARY)
        built = BuiltBackend(
            directory=entry,
            key=key,
            variant=variant,
            ref=source.ref,
            commit=source.commit,
            commits={s.name: s.commit for s in VERSIONS.backend.sources},
            torch_version=torch.version,
            torch_git_version=torch.git_version,
            torch_cuda=torch.cuda,
            compiler=toolchain.compiler,
            cmake_version=toolchain.cmake_version,
            cuda_toolkit=toolchain.cuda_version,
            library_dirs=_cuda_library_dirs(toolchain) if variant == "gpu" else (),
            seconds=round(time.perf_counter() - started, 1),
        )
        (result / MANIFEST).write_text(json.dumps(built.manifest(), indent=2) + "\n", encoding="utf-8")
        if entry.exists():  # --force: the old build makes way in one rename too
            entry.replace(staging / "previous")
        result.replace(entry)
    step(f"built {built.describe()} in {built.seconds:.1f} s: {entry}")
    return built


def _cuda_library_dirs(toolchain: Toolchain) -> tuple[str, ...]:
    assert toolchain.nvcc is not None  # noqa: S101 - the GPU variant always has one
    home = toolchain.nvcc.parent.parent
    return tuple(str(p) for p in (home / "lib64", home / "lib") if p.is_dir())


def _checked(log: _Log, command: Sequence[str], what: str, *, on_line: Step | None = None) -> None:
    code = log.run(command, on_line=on_line)
    if code != 0:
        log.close()
        first = log.first_error or "no line says 'error'"
        msg = (
            f"Cannot {what}: `{Path(command[0]).name} {' '.join(command[1:3])} ...` exited with {code}.\n"
            f"First error: {first}\nFull log: {log.path}"
        )
        raise BackendError(msg)


@contextlib.contextmanager
def _staging(folder: Path, key: str) -> Iterator[Path]:
    """A build folder beside the cache entries (same file system, so the result moves in one rename), always removed."""
    staging = Path(tempfile.mkdtemp(prefix=f".build-{key}-", dir=folder))
    try:
        yield staging
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _unpack(tarballs: Mapping[str, Path], into: Path, step: Step) -> dict[str, Path]:
    step(f"unpacking {len(tarballs)} sources")
    into.mkdir(parents=True)
    folders: dict[str, Path] = {}
    for source in VERSIONS.backend.sources:
        with tarfile.open(tarballs[source.name]) as archive:
            _extract(archive, into, tarballs[source.name])
        folder = into / source.top_folder
        if not folder.is_dir():
            msg = f"Cannot find {source.top_folder}/ in {tarballs[source.name]}: it is not {source.repository}'s archive."
            raise BackendError(msg)
        folders[source.name] = folder
    return folders


def _extract(archive: tarfile.TarFile, into: Path, path: Path) -> None:
    """Unpack with tarfile's ``data`` filter; on Pythons without it (Debian 12's 3.11.2), refuse the same things."""
    if hasattr(tarfile, "data_filter"):
        archive.extractall(into, filter="data")
        return
    for member in archive.getmembers():
        name = Path(member.name)
        if name.is_absolute() or ".." in name.parts or not (member.isfile() or member.isdir()):
            msg = f"Cannot unpack {path}: it holds {member.name!r}, which is not a plain file or folder inside it."
            raise BackendError(msg)
    archive.extractall(into)  # noqa: S202 - every member was checked above


# --- Command line (also run inside recipes/pytorch.Dockerfile) -----------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """``python3 -m tritonpt.backend``: build (or find in the cache) the backend; print its folder."""
    parser = argparse.ArgumentParser(
        prog="python3 -m tritonpt.backend",
        description="Build the official Triton pytorch backend (libtriton_pytorch.so) from the sources pinned in "
        "versions.toml, against this environment's torch; reuse the cached build when nothing changed.",
    )
    parser.add_argument(
        "--sources", type=Path, help=f"folder of the source tarballs (default ${SOURCES_ENV}, else download)"
    )
    parser.add_argument("--variant", choices=CHOICES, default="cpu", help="cpu (default), gpu, or auto")
    parser.add_argument(
        "--cache", type=Path, help=f"cache folder (default ${CACHE_ENV} or ~/.cache/tritonpt)"
    )
    parser.add_argument("--force", action="store_true", help="build even when the cache has this build")
    parser.add_argument(
        "--copy-to", type=Path, help="then copy the pytorch/ folder into this backends folder"
    )
    parser.add_argument("--quiet", action="store_true", help="print only the build folder")
    options = parser.parse_args(argv)

    def echo(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    try:
        built = ensure(
            sources=options.sources,
            variant=options.variant,
            cache=options.cache,
            force=options.force,
            step=_quiet if options.quiet else echo,
        )
    except BackendError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if options.copy_to is not None:
        target = options.copy_to / "pytorch"
        target.mkdir(parents=True, exist_ok=True)
        shutil.copy2(built.library, target / LIBRARY)
        shutil.copy2(built.directory / MANIFEST, target / MANIFEST)
    print(built.directory)
    return 0


if __name__ == "__main__":
    sys.exit(main())
