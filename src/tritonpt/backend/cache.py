"""What was built: a cache entry Triton takes as --backend-directory, its manifest, its key, and finding one."""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from tritonpt.backend.flavor import SANITIZER_LABEL, STOCK, Flavor
from tritonpt.backend.layout import (
    DEFINITION,
    LIBRARY,
    MANIFEST,
    NVIDIA_DEVICE,
    RAPIDJSON_DEFINITION,
    VARIANT_DEFINITION,
    Variant,
    cache_root,
)
from tritonpt.backend.toolchain import Toolchain, Torch
from tritonpt.errors import BackendError
from tritonpt.versions import VERSIONS, Backend

# --- What was built -----------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Origin:
    """Where a served ``libtriton_pytorch.so`` came from, as the reports name it."""

    ref: str  # pytorch_backend ref, "r25.10"
    commit: str  # pytorch_backend commit
    torch: str  # the torch it was built against, "2.9.1+cu128"
    variant: str  # "cpu" or "gpu"
    flavor: str = ""  # "" (stock), "+tritonpt.1" (our patches), "+asan": tritonpt.backend.flavor

    @property
    def build(self) -> str:
        """``r26.05+tritonpt.1``: the ref and what this build changes of it."""
        return f"{self.ref}{self.flavor}"

    @property
    def patches(self) -> str:
        """The flavor without a sanitizer's label: what the build does differently, "+tritonpt.1" for our
        patches, "" for stock (an instrumented stock build serves as stock does)."""
        labels = set(SANITIZER_LABEL.values())
        return "".join(f"+{part}" for part in self.flavor.split("+")[1:] if part not in labels)

    def describe(self) -> str:
        return f"pytorch_backend {self.build} ({self.commit[:7]}), built against torch {self.torch}, {self.variant}"


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
    flavor: str = ""  # Flavor.label: "" stock, "+tritonpt.1" patched, "+asan" / "+ubsan" instrumented
    patches: tuple[str, ...] = ()  # "<name> <sha256>" of each patch applied, in order
    sanitizer: str | None = None  # "address" / "undefined": its runtime must be preloaded into tritonserver
    cached: bool = False  # True when this call found it in the cache

    @property
    def library(self) -> Path:
        return self.directory / "pytorch" / LIBRARY

    @property
    def origin(self) -> Origin:
        return Origin(
            ref=self.ref,
            commit=self.commit,
            torch=self.torch_version,
            variant=self.variant,
            flavor=self.flavor,
        )

    def describe(self) -> str:
        """``libtriton_pytorch.so from pytorch_backend r25.10 (3281319), built against torch 2.9.1+cu128, cpu``."""
        return f"{LIBRARY} from {self.origin.describe()}"

    def matches(self, torch: Torch, *, backend: Backend = VERSIONS.backend, flavor: Flavor = STOCK) -> bool:
        """Built from today's pins, with this flavor's very patches and sanitizer, against this very torch build."""
        return (
            self.torch_version == torch.version
            and self.torch_git_version == torch.git_version
            and dict(self.commits) == {s.name: s.commit for s in backend.sources}
            and self.flavor == flavor.label
            and self.patches == _patch_ids(flavor)
            and self.sanitizer == flavor.sanitizer
        )

    def manifest(self) -> dict[str, object]:
        data = asdict(self)
        for transient in ("directory", "cached"):
            data.pop(transient)
        data["library_dirs"] = list(self.library_dirs)
        data["patches"] = list(self.patches)
        return data

    @classmethod
    def read(cls, directory: Path) -> BuiltBackend:
        """The build in ``directory``; raises ``BackendError`` when its manifest or library is missing."""
        manifest = directory / MANIFEST
        try:
            data = json.loads(manifest.read_text(encoding="utf-8"))
            built = cls(
                directory=directory,
                cached=True,
                **{
                    **data,
                    "library_dirs": tuple(data["library_dirs"]),
                    "patches": tuple(data.get("patches", ())),
                },
            )
        except (OSError, ValueError, TypeError, KeyError) as exc:
            msg = f"Cannot read the backend build in {directory} ({exc}); remove that folder and build again."
            raise BackendError(msg) from exc
        if not built.library.is_file():
            msg = f"The backend build in {directory} has no {built.library.name}; remove that folder and build again."
            raise BackendError(msg)
        return built


def _patch_ids(flavor: Flavor) -> tuple[str, ...]:
    return tuple(f"{p.name} {p.sha256}" for p in flavor.patches)


def build_key(
    torch: Torch,
    toolchain: Toolchain,
    variant: Variant,
    backend: Backend = VERSIONS.backend,
    flavor: Flavor = STOCK,
) -> str:
    """``r25.10-3281319-torch2.9.1+cu128-cpu-<hash of every input>``: the cache entry's name; a flavor's label
    follows the ref (``r26.05+tritonpt.1-55bbe27-...``) and its patches and flags are hashed too."""
    inputs: dict[str, object] = {
        "sources": {s.name: [s.commit, s.sha256] for s in backend.sources},
        "torch": [torch.version, torch.git_version, torch.cuda],
        "compiler": toolchain.compiler,
        "cmake": toolchain.cmake_version,
        "cuda_toolkit": toolchain.cuda_version,
        "variant": variant,
        "definition": [dict(DEFINITION), dict(VARIANT_DEFINITION[variant]), dict(RAPIDJSON_DEFINITION)],
    }
    if torch.cxx_standard != 17:  # keys of a torch that builds as C++17 stay what they were before
        inputs["cxx_standard"] = torch.cxx_standard
    if not flavor.stock:  # stock keys stay what they were before flavors existed
        inputs["flavor"] = flavor.key_inputs()
    digest = hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:12]
    source = backend.pytorch_backend
    return f"{source.ref}{flavor.label}-{source.commit[:7]}-torch{torch.version}-{variant}-{digest}"


def find(
    variant: Variant | None = None,
    *,
    torch: Torch | None = None,
    cache: Path | None = None,
    pins: Backend = VERSIONS.backend,
    flavor: Flavor = STOCK,
) -> BuiltBackend | None:
    """The cached build that :func:`tritonpt.backend.ensure` would use for this torch, today's pins and this
    flavor (stock by default: a patched or instrumented build is found only when asked for), or None.

    Several entries can fit: two environments with the same torch but another compiler or CMake build the same
    sources under two keys. The answer is defined, whatever order the folder lists them in:

    1. the entry whose key is the one ``ensure()`` computes here (this compiler and CMake, asked for their
       versions as ``ensure()`` asks them);
    2. where that entry is missing, or no compiler or CMake can be found here, the newest-built of the entries
       that fit (their ``build.json``'s modification time, then the key, so two of the same age still give one
       answer).

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
            if built.matches(torch, backend=pins, flavor=flavor):
                found.append(built)
    wanted: tuple[Variant, ...] = (
        (variant,) if variant else (("gpu", "cpu") if NVIDIA_DEVICE.exists() else ("cpu",))
    )
    for kind in wanted:
        fitting = [b for b in found if b.variant == kind]
        if not fitting:
            continue
        key = _key_here(torch, kind, pins, flavor)
        keyed = [b for b in fitting if b.key == key]
        if keyed:
            return keyed[0]
        return max(fitting, key=lambda b: ((b.directory / MANIFEST).stat().st_mtime, b.key))
    return None


def _key_here(torch: Torch, variant: Variant, pins: Backend, flavor: Flavor) -> str | None:
    """The key ``ensure()`` would build under in this environment; None where it has no compiler or CMake."""
    try:
        return build_key(torch, Toolchain.find(variant), variant, pins, flavor)
    except BackendError:
        return None
