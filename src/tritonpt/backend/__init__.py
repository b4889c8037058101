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
``c++ --version`` and a ``cmake --version`` (the key names both); a build never leaves a half-built entry (it is staged and renamed, and the staging folder is
removed whatever happens).

The same code builds the backend inside docker/pytorch.Dockerfile (``python3 -m tritonpt.backend``), so this
package imports only the standard library and :mod:`tritonpt.versions` / :mod:`tritonpt.errors`; it finds torch
without importing it. Its modules, in the order they import each other: ``layout`` (choices, files, the CMake
definition), ``toolchain`` (torch, compilers, CMake, nvcc), ``cache`` (what was built, its key, finding it),
``flavor`` (our patches, a sanitizer: builds of their own name), ``pins`` and ``sources`` (the pinned tarballs), ``build``, ``serving`` (one backend folder for the TorchScript
and the PT2 builds), and ``__main__`` (the command line). Two builds share all of it: the TorchScript one
(versions.toml [backend], r25.10) and the PT2 one ([pt2], r26.05), each passed as ``pins``.
"""

from tritonpt.backend.build import configure_command, ensure, ensure_serving
from tritonpt.backend.cache import BuiltBackend, Origin, build_key, find
from tritonpt.backend.flavor import SANITIZERS, STOCK, Flavor, Patch, Sanitizer, of_pt2_build, patched
from tritonpt.backend.layout import (
    CACHE_ENV,
    CHOICES,
    DEFINITION,
    LIBRARY,
    MANIFEST,
    SOURCES_ENV,
    Choice,
    Step,
    Variant,
    cache_root,
    package_folder,
)
from tritonpt.backend.serving import PT2_LIBRARY, PT2_NAME, backend_directory
from tritonpt.backend.sources import fetch_sources, sources_folder, verify
from tritonpt.backend.toolchain import Toolchain, Torch, resolve_variant, sanitizer_environment

__all__ = [
    "CACHE_ENV",
    "CHOICES",
    "DEFINITION",
    "LIBRARY",
    "MANIFEST",
    "PT2_LIBRARY",
    "PT2_NAME",
    "SANITIZERS",
    "SOURCES_ENV",
    "STOCK",
    "BuiltBackend",
    "Choice",
    "Flavor",
    "Origin",
    "Patch",
    "Sanitizer",
    "Step",
    "Toolchain",
    "Torch",
    "Variant",
    "backend_directory",
    "build_key",
    "cache_root",
    "configure_command",
    "ensure",
    "ensure_serving",
    "fetch_sources",
    "find",
    "of_pt2_build",
    "package_folder",
    "patched",
    "resolve_variant",
    "sanitizer_environment",
    "sources_folder",
    "verify",
]
