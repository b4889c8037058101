"""What the doctor knows and says: the facts it judges, each check's result, the report; constants of the image layout."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from tritonpt import image as images
from tritonpt.versions import TritonRelease, stated

Version = tuple[int, ...]

SERVER_BINARY = "/opt/tritonserver/bin/tritonserver"
SERVER_LIBRARIES = "/opt/tritonserver/lib"
BACKENDS = "/opt/tritonserver/backends"
PYTORCH_BACKEND = f"{BACKENDS}/pytorch/libtriton_pytorch.so"
SCANNED = (SERVER_BINARY, SERVER_LIBRARIES, BACKENDS)
"""What the glibc check reads: every ELF file in (or at) these paths of the image."""

LABEL_BACKEND_TORCH = images.LABEL_BACKEND_TORCH
LABEL_PT2_BACKEND = images.LABEL_PT2_BACKEND
LABEL_MIN_DRIVER = images.LABEL_MIN_DRIVER
LABEL_NGC = images.LABEL_NGC
LABEL_CUDA = images.LABEL_CUDA
LABEL_SERVER = images.LABEL_SERVER
NVIDIA_SERVER_LABEL = "com.nvidia.tritonserver.version"
"""NGC images carry this label (server version, ``2.62.0``) and ``ENV NVIDIA_TRITON_SERVER_VERSION`` (``25.10``)."""

CONTAINER_LABEL = images.LABEL_DOCTOR
"""Label on the short-lived containers the doctor runs (they are removed at once; this finds strays)."""
COMMAND_TIMEOUT_S = 120
DOCKER_FIX = (
    "Start a Docker engine: on a Debian/Ubuntu machine run `sudo bash .ci/docker-engine.sh` (installs docker.io "
    "and starts dockerd), elsewhere install Docker Engine (https://docs.docker.com/engine/install/), or set "
    "DOCKER_HOST to an engine that runs."
)
TOOLKIT_FIX = (
    "Install the NVIDIA Container Toolkit and register it with Docker: `sudo nvidia-ctk runtime configure "
    "--runtime=docker && sudo systemctl restart docker`; then `docker run --rm --gpus all {image} nvidia-smi -L` "
    "must list the GPUs."
)

GLIBC_SYMBOL = re.compile(r"^GLIBC_(\d+(?:\.\d+)+)$")
_VERSION = re.compile(r"(\d+(?:\.\d+)*)")
NOT_FOUND = re.compile(r"^\s*(\S+) => not found\s*$")
VERSION_NOT_FOUND = re.compile(r"version `([^']+)' not found \(required by ([^)]+)\)")
DRIVER_LIBRARY = re.compile(r"^(libcuda\.so|libcudadebugger\.so|libnvidia-[\w.-]+\.so|libnvcuvid\.so)")
"""Libraries the NVIDIA driver provides at run time (the container toolkit mounts them); never in an image."""


class Status(StrEnum):
    OK = "ok"
    WARN = "warn"
    FAIL = "fail"
    SKIP = "skip"


# The checks' names, as the report shows them (per-model rows add the model's name: "model NAME format").
DOCKER = "docker"
NVIDIA_RUNTIME = "nvidia runtime"
GPU_IN_CONTAINER = "gpu in container"
DRIVER = "driver"
IMAGE = "image"
GLIBC = "glibc"
PYTORCH_BACKEND_CHECK = "pytorch backend"
MODELS = "models"
IMAGE_CHECKS = (IMAGE, GLIBC, PYTORCH_BACKEND_CHECK)
"""The rows an image gets; each is SKIP, with the reason, when there is no image to look at."""


@dataclass(frozen=True, kw_only=True)
class Result:
    """The outcome of one check: a one-line finding, and for anything but OK the fix as a full sentence."""

    name: str
    status: Status
    finding: str
    fix: str = ""

    @classmethod
    def ok(cls, name: str, finding: str) -> Result:
        return cls(name=name, status=Status.OK, finding=finding)

    @classmethod
    def warn(cls, name: str, finding: str, fix: str) -> Result:
        return cls(name=name, status=Status.WARN, finding=finding, fix=fix)

    @classmethod
    def fail(cls, name: str, finding: str, fix: str) -> Result:
        return cls(name=name, status=Status.FAIL, finding=finding, fix=fix)

    @classmethod
    def skip(cls, name: str, finding: str, fix: str = "") -> Result:
        return cls(name=name, status=Status.SKIP, finding=finding, fix=fix)


@dataclass(frozen=True, kw_only=True)
class Report:
    """Every result of one doctor run, in the order they are shown."""

    image: str | None
    repository: Path
    results: tuple[Result, ...]

    def __iter__(self) -> Iterator[Result]:
        return iter(self.results)

    def __getitem__(self, name: str) -> Result:
        for result in self.results:
            if result.name == name:
                return result
        msg = f"No check named {name!r}; the checks were {', '.join(r.name for r in self.results)}."
        raise KeyError(msg)

    def count(self, status: Status) -> int:
        return sum(r.status is status for r in self.results)

    @property
    def exit_code(self) -> int:
        """1 when any check failed, else 0 (warnings and skips do not fail a run)."""
        return int(self.count(Status.FAIL) > 0)


@dataclass(frozen=True, kw_only=True)
class Backend:
    """What the image (or, without one, versions.toml) says the server runs: the checks compare against it."""

    ngc: str
    """The NGC release (``25.10``); empty when the image does not say."""
    server: str
    """The server version (``2.62.0``); empty when the image does not say."""
    torch: str
    """The pytorch backend's libtorch version, e.g. ``2.9.0a0+145a3a7bda``."""
    min_driver: str
    """Lowest host driver for the image's CUDA, ``none`` (an image without CUDA, like the stand-in), or
    ``not stated`` (a release whose notes name none)."""
    cuda: str
    source: str
    """Where the values came from, for the findings: ``labels of TAG`` or ``versions.toml release 25.10``."""
    release: TritonRelease | None
    """The versions.toml entry of this release, when it is one we know."""
    pt2: str = ""
    """The PT2 build the image carries under the second backend name (its ``io.tritonpt.pt2-backend`` label)."""
    named: bool = True
    """True where an image (``--image``) or a release (``--ngc``) names what serves; False: neither was given, the
    checks are against versions.toml's default release, and torch_aoti models are served on the embedded server."""
    torchvision: bool = True
    """Whether the backend links libtorchvision and so resolves ``torchvision::`` operators: NVIDIA's builds do
    (pytorch_backend's TRITON_PYTORCH_ENABLE_TORCHVISION is ON by default), ours do not (PyPI's torch has no
    libtorchvision.so: the build here and the pytorch recipe's image)."""

    @classmethod
    def from_release(cls, release: TritonRelease, *, source: str = "") -> Backend:
        return cls(
            ngc=release.ngc,
            server=release.server,
            torch=stated(release.backend_torch),
            min_driver=stated(release.min_driver),
            cuda=stated(release.cuda),
            source=source or f"versions.toml release {release.ngc}",
            release=release,
        )


@dataclass(frozen=True, kw_only=True)
class HostDriver:
    """What ``nvidia-smi`` on this host says: one driver version per GPU, or why it could not say."""

    nvidia_smi: str | None
    versions: tuple[str, ...] = ()
    error: str = ""


@dataclass(frozen=True, kw_only=True)
class GlibcNeed:
    """The highest ``GLIBC_x.y`` one ELF file of the image asks for."""

    file: str
    version: Version

    @property
    def symbol(self) -> str:
        return "GLIBC_" + ".".join(map(str, self.version))


@dataclass(frozen=True, kw_only=True)
class ImageFiles:
    """What the image holds under /opt/tritonserver, as read from its file system."""

    needs: tuple[GlibcNeed, ...]
    """Every ELF file that names a GLIBC version, highest need first."""
    elf_files: int
    paths: frozenset[str]
    """Every regular file and symbolic link seen under :data:`SCANNED`."""
    missing: tuple[str, ...] = ()
    """Paths of :data:`SCANNED` the image does not have."""
    unreadable: tuple[str, ...] = ()
    """ELF files pyelftools could not read, with the reason."""


@dataclass(frozen=True, kw_only=True)
class Ran:
    """A command run inside an image: its exit code (-1 when it could not start or finish) and its output."""

    code: int
    output: str


# --- Small helpers ------------------------------------------------------------------------------------------


def parse_version(text: str) -> Version | None:
    """The leading dotted number of a version string: ``2.9.0a0+145a`` -> ``(2, 9, 0)``, ``glibc 2.36`` -> ``(2, 36)``."""
    match = _VERSION.search(text)
    return tuple(int(p) for p in match.group(1).split(".")) if match else None


def dotted(version: Version) -> str:
    return ".".join(map(str, version))


def plural(count: int, word: str) -> str:
    if count == 1:
        return f"{count} {word}"
    return f"{count} {word[:-1]}ies" if word.endswith("y") else f"{count} {word}s"


def first_sentence(text: str) -> str:
    head = text.strip().splitlines()[0] if text.strip() else ""
    match = re.match(r"(.+?\.)\s+[A-Z]", head)
    return match.group(1) if match else head


def last_lines(text: str, count: int = 3) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return " | ".join(lines[-count:]) or "(no output)"
