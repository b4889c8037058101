"""What the backend build is made of: its choices, files, environment variables and the one CMake definition."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import util as importlib_util
from pathlib import Path
from typing import Literal

from tritonpt import caches

Variant = Literal["cpu", "gpu"]

LIBRARY = "libtriton_pytorch.so"
"""The official backend's shared library; Triton loads ``<backend-directory>/pytorch/libtriton_pytorch.so``."""
MANIFEST = "build.json"
TARGET = "triton-pytorch-backend"
SOURCES_ENV = "TRITONPT_SOURCES"
CACHE_ENV = caches.CACHE_ENV
CUDA_HOME = Path("/usr/local/cuda")
NVIDIA_DEVICE = Path("/dev/nvidiactl")
"""Present on a host whose NVIDIA driver is loaded."""

# The one CMake definition of the backend, for `invoke build-backend` and docker/pytorch.Dockerfile alike
# (paths are added by configure_command). TorchVision is off: the torch wheel has no libtorchvision.so
# (linking fails with `cannot find -ltorchvision`, reported on Triton's server tracker against the pytorch_backend
# build: https://github.com/triton-inference-server/server/issues/3010 and
# https://github.com/triton-inference-server/server/issues/3058); TorchTRT needs TensorRT. NVSHMEM follows the
# variant (only CUDA torch has it).
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


def quiet(_: str) -> None:
    pass


cache_root = caches.root


def package_folder(name: str) -> Path | None:
    """Where an installed package lives, found without importing it (None when it is not installed)."""
    spec = importlib_util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))
