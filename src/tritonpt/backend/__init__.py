"""Stage "backend": the official Triton pytorch backend, ``libtriton_pytorch.so``, built from pinned sources.

Pinned tarballs (sha256-checked) are unpacked into a staging folder, built against this environment's torch,
and renamed into the cache as one ``--backend-directory`` entry, named by a hash of every input. Modules, in
import order: ``layout``, ``toolchain``, ``cache``, ``flavor``, ``pins``, ``sources``, ``build``, ``serving``
and ``__main__``. Two builds share them: TorchScript (versions.toml [backend]) and PT2 ([pt2]). Standard
library only, because docker/pytorch.Dockerfile runs it too (``python3 -m tritonpt.backend``).
"""

from tritonpt.backend.build import configure_command, ensure, ensure_serving
from tritonpt.backend.cache import BuiltBackend, Origin, build_key, find
from tritonpt.backend.flavor import STOCK, Flavor, Patch, of_pt2_build, patched
from tritonpt.backend.layout import (
    CACHE_ENV,
    DEFINITION,
    LIBRARY,
    MANIFEST,
    SOURCES_ENV,
    Step,
    Variant,
    cache_root,
    package_folder,
)
from tritonpt.backend.serving import PT2_LIBRARY, PT2_NAME, backend_directory
from tritonpt.backend.sources import fetch_sources, sources_folder, verify
from tritonpt.backend.toolchain import Toolchain, Torch, resolve_variant, sanitizer_environment
from tritonpt.options import BACKEND_CHOICES as CHOICES
from tritonpt.options import SANITIZERS, Sanitizer
from tritonpt.options import BackendChoice as Choice

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
