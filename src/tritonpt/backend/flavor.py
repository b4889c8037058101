"""What a build changes of the stock backend: patches of ours carried on the pinned sources, and a sanitizer.

    STOCK                  the pinned sources as NVIDIA publishes them: the default, what NGC's images run
    patched(pins)          the patch set versions.toml names, from ``backend/patches/<folder>/series``
    apply(flavor, folder)  each patch dry-run, then applied; one that no longer applies is an error naming it
    Flavor(sanitizer=...)  ASan or UBSan instrumentation of the backend

A flavor other than stock is a build of its own name (``r26.05+tritonpt.1``) in its cache key and reports.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from tritonpt.errors import HINT, BackendError
from tritonpt.options import Sanitizer
from tritonpt.versions import Backend

SANITIZER_LABEL: Mapping[Sanitizer, str] = {"address": "asan", "undefined": "ubsan"}

PATCHES = Path(__file__).parent / "patches"
"""``<folder>/series`` and its ``.patch`` files, one folder per release they apply to (``r26.05``)."""
SERIES = "series"

# Compiler and linker flags per sanitizer, added to the build's own. Frame pointers and debug lines make the
# reports name functions and lines; RelWithDebInfo keeps the optimisation of a release build.
SANITIZER_FLAGS: Mapping[Sanitizer, str] = {
    "address": "-fsanitize=address -fno-omit-frame-pointer -g",
    "undefined": "-fsanitize=undefined -fno-omit-frame-pointer -g",
}


@dataclass(frozen=True, kw_only=True)
class Patch:
    """One patch of ours to a pinned source, as a file of the package."""

    name: str  # "0001-pt2-dynamic-batching.patch"
    path: Path
    sha256: str


@dataclass(frozen=True, kw_only=True)
class Flavor:
    """What a build changes of the stock sources and flags; ``Flavor()`` is stock."""

    patch_set: str = ""  # "tritonpt.1": the name the patched build carries; "" without patches
    patches: tuple[Patch, ...] = ()
    sanitizer: Sanitizer | None = None

    @property
    def stock(self) -> bool:
        return not self.patches and self.sanitizer is None

    @property
    def label(self) -> str:
        """What follows the ref in names: "" (stock), "+tritonpt.1", "+asan", "+tritonpt.1+ubsan"."""
        parts = [self.patch_set] if self.patches else []
        parts += [SANITIZER_LABEL[self.sanitizer]] if self.sanitizer else []
        return "".join(f"+{part}" for part in parts)

    def with_sanitizer(self, sanitizer: Sanitizer | None) -> Flavor:
        return replace(self, sanitizer=sanitizer)

    def definition(self) -> Mapping[str, str]:
        """CMake definitions this flavor adds (the compiler flags are joined to the build's own by the caller)."""
        if self.sanitizer is None:
            return {}
        flags = SANITIZER_FLAGS[self.sanitizer]
        return {
            "CMAKE_BUILD_TYPE": "RelWithDebInfo",
            "CMAKE_SHARED_LINKER_FLAGS": flags,
        }

    @property
    def cxx_flags(self) -> str:
        """Compiler flags to add to CMAKE_CXX_FLAGS ("" for stock and patched builds)."""
        return SANITIZER_FLAGS[self.sanitizer] if self.sanitizer else ""

    def key_inputs(self) -> dict[str, object]:
        """What the cache key hashes of this flavor (empty for stock, so stock keys stay as they were)."""
        if self.stock:
            return {}
        return {
            "patch_set": self.patch_set,
            "patches": [[p.name, p.sha256] for p in self.patches],
            "sanitizer": self.sanitizer,
            "flags": dict(self.definition()),
        }


STOCK = Flavor()


def patched(pins: Backend, *, sanitizer: Sanitizer | None = None, root: Path = PATCHES) -> Flavor:
    """The patch set versions.toml names for the build ``pins``; ``BackendError`` when it names none or a file is
    missing."""
    if not pins.patches:
        msg = (
            f"Cannot build the {pins.label} backend with patches, as versions.toml names no patch set for it.\n"
            f"{HINT} patches are carried for the PT2 build only (versions.toml [pt2] patches); build it with --pt2."
        )
        raise BackendError(msg)
    folder = root / pins.patches
    series = folder / SERIES
    try:
        names = [
            line.strip()
            for line in series.read_text(encoding="utf-8").splitlines()
            if line.strip() and not line.lstrip().startswith("#")
        ]
    except OSError as exc:
        msg = (
            f"Cannot read the patch series {series} ({exc.strerror}); reinstall tritonpt or restore the file."
        )
        raise BackendError(msg) from exc
    found: list[Patch] = []
    for name in names:
        path = folder / name
        try:
            data = path.read_bytes()
        except OSError as exc:
            msg = f"Cannot read {path}, which {series} lists ({exc.strerror}); restore it or take it off the series."
            raise BackendError(msg) from exc
        found.append(Patch(name=name, path=path, sha256=hashlib.sha256(data).hexdigest()))
    if not found:
        msg = f"The patch series {series} lists no patch; a patched build without patches would be stock."
        raise BackendError(msg)
    return Flavor(patch_set=pins.patch_set, patches=tuple(found), sanitizer=sanitizer)


def of_pt2_build(build: str, pins: Backend) -> Flavor:
    """The flavor of the PT2 build a front door names (``--pt2-build``, tritonpt.options.Pt2Build, which the
    image's backend stage does not carry): ``patched``, the patch set of ``pins``; anything else stock."""
    return patched(pins) if build == "patched" else STOCK


def apply(flavor: Flavor, folder: Path) -> Iterator[tuple[str, list[str]]]:
    """Apply the flavor's patches to the source tree ``folder`` in order, yielding each one's name and what
    ``patch`` said. Each is tried first (``--dry-run``), so one that no longer applies changes nothing of the
    tree and raises ``BackendError`` naming it and its failed hunks (the pinned sources moved, or it was edited).
    ``--fuzz=0``: a patch applies where it was written, or not at all."""
    program = shutil.which("patch") if flavor.patches else None
    if flavor.patches and program is None:
        msg = (
            f"Cannot apply the {flavor.patch_set} patches, as there is no `patch` program on PATH.\n"
            f"{HINT} install it (Debian/Ubuntu: apt-get install patch; build-essential brings it)."
        )
        raise BackendError(msg)
    for patch in flavor.patches:
        command = [
            str(program),
            "-p1",
            "--forward",
            "--batch",
            "--fuzz=0",
            "-d",
            str(folder),
            "-i",
            str(patch.path),
        ]
        tried = subprocess.run([*command, "--dry-run"], capture_output=True, text=True, check=False)
        said = (tried.stdout + tried.stderr).splitlines()
        if tried.returncode != 0:
            failed = [
                line.strip() for line in said if "FAILED" in line or "malformed" in line or "Reversed" in line
            ]
            detail = "; ".join(failed) or (
                said[-1].strip() if said else f"patch exited with {tried.returncode}"
            )
            msg = (
                f"Cannot apply {patch.path} to {folder.name}, as it no longer applies: {detail}.\n"
                f"{HINT} refresh it against the pinned sources (versions.toml), or take it off "
                f"{patch.path.parent / SERIES}."
            )
            raise BackendError(msg)
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        said = (done.stdout + done.stderr).splitlines()
        if done.returncode != 0:  # the dry run passed: only the file system can refuse now
            msg = f"Cannot apply {patch.path} to {folder.name}: {'; '.join(said) or done.returncode}."
            raise BackendError(msg)
        yield patch.name, [f"$ {' '.join(command)}", *said]
