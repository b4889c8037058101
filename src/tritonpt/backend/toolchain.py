"""What the build runs against: this environment's torch (found without importing it) and the compilers, CMake and, for the GPU variant, nvcc."""

from __future__ import annotations

import os
import re
import runpy
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from tritonpt.backend.layout import CUDA_HOME, NVIDIA_DEVICE, Variant, package_folder
from tritonpt.errors import HINT, BackendError
from tritonpt.options import BACKEND_CHOICES as CHOICES
from tritonpt.options import BackendChoice as Choice
from tritonpt.versions import VERSIONS

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

    @property
    def cxx_standard(self) -> int:
        """The C++ standard code that includes this torch's headers must compile as: the one ``ATen/ATen.h``
        demands (its ``__cplusplus < 202002L`` guard before ``#error C++20 or later ...``, torch 2.14 on,
        pytorch#178150; 2023 for C++23, and so on), at least 17, the pytorch backend's own floor (its CMakeLists'
        ``TRITON_MIN_CXX_STANDARD``)."""
        try:
            header = (self.root / "include" / "ATen" / "ATen.h").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return 17
        years = [int(year) for year in re.findall(r"__cplusplus\s*<\s*(20\d\d)\d\dL", header)]
        return max([17, *(year % 100 for year in years)])

    @classmethod
    def locate(cls) -> Torch:
        root = package_folder("torch")
        if root is None:
            msg = (
                f"Cannot build or serve the pytorch backend, as there is no torch in {sys.prefix}.\n"
                f"{HINT} install torch=={VERSIONS.pytorch.torch} in this environment (nox sessions do)."
            )
            raise BackendError(msg)
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
                f"{HINT} install a C++17 compiler (Debian/Ubuntu: `apt-get install g++`)."
            )
            raise BackendError(msg)
        headers = Path(sysconfig.get_paths()["include"]) / "Python.h"
        if not headers.is_file():
            version = f"{sys.version_info.major}.{sys.version_info.minor}"
            msg = (
                f"Cannot build the pytorch backend, as the Python headers of {sys.executable} are missing "
                f"(no {headers}; torch's headers include Python.h).\n"
                f"{HINT} install them (Debian/Ubuntu: `apt-get install libpython{version}-dev`)."
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


SANITIZER_RUNTIMES = {"address": "libasan.so", "undefined": "libubsan.so"}
"""The runtime each sanitizer's instrumented code needs (GCC's names), preloaded into an uninstrumented server."""
SANITIZER_OPTIONS = {
    "address": ("ASAN_OPTIONS", "detect_leaks=0:abort_on_error=1:halt_on_error=1:print_summary=1"),
    "undefined": ("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=0:print_summary=1"),
}
"""Each sanitizer's settings unless the environment gives its own: the first invalid access aborts the server
(SIGABRT, which the matrix names as a crash, its report above it in the log); leaks at exit are not hunted (the
server and torch keep what they allocate until the end); UBSan reports every finding and goes on."""


def sanitizer_runtime(sanitizer: str) -> Path:
    """The runtime library of ``sanitizer`` ("address", "undefined") as this machine's C++ compiler finds it
    (``c++ -print-file-name=libasan.so``); ``BackendError`` where it finds none."""
    name = SANITIZER_RUNTIMES[sanitizer]
    cxx = _program(os.environ.get("CXX"), "c++", "g++", "clang++")
    found = Path(_first_line([str(cxx), f"-print-file-name={name}"])) if cxx is not None else None
    if found is None or not found.is_absolute() or not found.is_file():
        msg = (
            f"Cannot serve a build instrumented with the {sanitizer} sanitizer, as the C++ compiler "
            f"({cxx or 'none on PATH'}) knows no {name}, the runtime it must preload into tritonserver.\n"
            f"{HINT} install GCC's runtime (Debian/Ubuntu: `apt-get install g++`, which brings libasan and "
            "libubsan), or serve the stock build (leave --sanitize out)."
        )
        raise BackendError(msg)
    return found.resolve()


def sanitizer_environment(sanitizers: Sequence[str], env: Mapping[str, str]) -> dict[str, str]:
    """What a server of builds instrumented with ``sanitizers`` needs in its environment: their runtimes first on
    ``LD_PRELOAD`` (an uninstrumented tritonserver loads them before anything else), and each one's settings where
    ``env`` has none."""
    runtimes = [str(sanitizer_runtime(s)) for s in sanitizers]
    added = {"LD_PRELOAD": " ".join([*runtimes, *filter(None, [env.get("LD_PRELOAD")])])}
    for sanitizer in sanitizers:
        variable, settings = SANITIZER_OPTIONS[sanitizer]
        added[variable] = env.get(variable) or settings
    return added


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


CXX_PROBES = {
    17: "#include <optional>\nint main() { std::optional<int> v{1}; return *v - 1; }\n",
    20: "#include <span>\n#include <concepts>\nstatic_assert(std::integral<int>);\n"
    "int main() { int a[1]{0}; return std::span<int>(a).front(); }\n",
}
"""A program each C++ standard the build may ask for must compile (what torch's headers and the backend use)."""


def check_cxx(cxx: Path, standard: int = 17) -> None:
    """The compiler compiles C++ of ``standard`` (17, or 20 for torch 2.14 on), else a ``BackendError``."""
    probe = subprocess.run(
        [str(cxx), f"-std=c++{standard}", "-x", "c++", "-fsyntax-only", "-"],
        input=CXX_PROBES[standard],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    if probe.returncode != 0:
        first = (probe.stderr.strip().splitlines() or ["no output"])[0]
        msg = (
            f"Cannot build the pytorch backend with {cxx}, as it does not compile C++{standard} ({first}).\n"
            f"{HINT} install g++ {10 if standard == 20 else 9} or newer, or point $CXX at a C++{standard} compiler."
        )
        raise BackendError(msg)


def _cmake() -> tuple[Path, str]:
    """CMake from the cmake wheel of this environment (PyPI), else the one on PATH; its version checked."""
    wheel = package_folder("cmake")
    candidate = wheel / "data" / "bin" / "cmake" if wheel else None
    found = candidate if candidate is not None and candidate.is_file() else _program("cmake")
    wanted = VERSIONS.backend.cmake
    if found is None:
        msg = (
            "Cannot build the pytorch backend, as CMake is not installed in this environment.\n"
            f'{HINT} pip install "cmake=={wanted}" (the PyPI wheel; pytorch_backend r25.10 needs >= 3.31.8).'
        )
        raise BackendError(msg)
    line = _first_line([str(found), "--version"])
    match = re.search(r"(\d+)\.(\d+)\.(\d+)", line)
    version = match.group(0) if match else "unknown"
    if match is None or tuple(int(p) for p in match.groups()) < (3, 31, 8):
        msg = (
            f"Cannot build the pytorch backend with {found} ({line or 'no version'}), as pytorch_backend r25.10 "
            f'needs CMake >= 3.31.8.\n{HINT} pip install "cmake=={wanted}".'
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
