"""Stage "doctor": will this host, this image and these models work together? Each check says why, and how to fix.

    host:   Docker engine -> NVIDIA runtime -> a GPU inside a ``--gpus all`` container -> driver vs the image's CUDA
    image:  what it is (labels) -> its glibc vs the GLIBC_x.y the server and backends need
            -> every library of the pytorch backend resolves inside it
    models: TorchScript file format and the exporting torch vs the backend's libtorch

Each check gathers facts (a command, a file read) and then judges them in a pure function (``check_*``), so the
judging is unit-tested with real files and real tool output, without a GPU or a broken image at hand. Without
``--image`` the host and model checks run, against the default release of versions.toml; the checks that need a
GPU are SKIP on hosts without ``nvidia-smi``.

    report = run(image="tritonpt:ngc-25.10", repository=Path("model_repository"))
    render(report)
    sys.exit(report.exit_code)

Files are copied out of the image (docker-py ``get_archive``) and their ELF version needs read with pyelftools,
never with ``objdump`` (images may lack binutils). Commands run inside the image with its entrypoint replaced,
its own environment (``LD_LIBRARY_PATH`` included) and no network, and their containers are always removed.
"""

from __future__ import annotations

import contextlib
import io
import re
import shutil
import subprocess
import tarfile
import tempfile
import zipfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path, PurePosixPath
from typing import IO, Any

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile
from elftools.elf.gnuversions import GNUVerNeedSection
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from tritonpt import image as images
from tritonpt import reference, repository
from tritonpt.errors import DockerUnavailable
from tritonpt.image import DockerClient
from tritonpt.options import Mount
from tritonpt.versions import VERSIONS, TritonRelease, Versions

Version = tuple[int, ...]

SERVER_BINARY = "/opt/tritonserver/bin/tritonserver"
SERVER_LIBRARIES = "/opt/tritonserver/lib"
BACKENDS = "/opt/tritonserver/backends"
PYTORCH_BACKEND = f"{BACKENDS}/pytorch/libtriton_pytorch.so"
SCANNED = (SERVER_BINARY, SERVER_LIBRARIES, BACKENDS)
"""What the glibc check reads: every ELF file in (or at) these paths of the image."""

LABEL_BACKEND_TORCH = f"{images.LABEL_PREFIX}backend-torch"
LABEL_MIN_DRIVER = f"{images.LABEL_PREFIX}min-driver"
LABEL_NGC = f"{images.LABEL_PREFIX}ngc"
LABEL_CUDA = f"{images.LABEL_PREFIX}cuda"
LABEL_SERVER = f"{images.LABEL_PREFIX}triton-server"
NVIDIA_SERVER_LABEL = "com.nvidia.tritonserver.version"
"""NGC images carry this label (server version, ``2.62.0``) and ``ENV NVIDIA_TRITON_SERVER_VERSION`` (``25.10``)."""

CONTAINER_LABEL = f"{images.LABEL_PREFIX}doctor"
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

_GLIBC = re.compile(r"^GLIBC_(\d+(?:\.\d+)+)$")
_VERSION = re.compile(r"(\d+(?:\.\d+)*)")
_NOT_FOUND = re.compile(r"^\s*(\S+) => not found\s*$")
_VERSION_NOT_FOUND = re.compile(r"version `([^']+)' not found \(required by ([^)]+)\)")
_DRIVER_LIBRARY = re.compile(r"^(libcuda\.so|libcudadebugger\.so|libnvidia-[\w.-]+\.so|libnvcuvid\.so)")
"""Libraries the NVIDIA driver provides at run time (the container toolkit mounts them); never in an image."""


class Status(StrEnum):
    OK = "ok"
    WARN = "warn"
    FAIL = "fail"
    SKIP = "skip"


@dataclass(frozen=True, kw_only=True)
class Result:
    """The outcome of one check: a one-line finding, and for anything but OK the fix as a full sentence."""

    name: str
    status: Status
    finding: str
    fix: str = ""


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
    """Lowest host driver for the image's CUDA, or ``none`` (an image without CUDA, like the stand-in)."""
    cuda: str
    source: str
    """Where the values came from, for the findings: ``labels of TAG`` or ``versions.toml release 25.10``."""
    release: TritonRelease | None
    """The versions.toml entry of this release, when it is one we know."""

    @classmethod
    def from_release(cls, release: TritonRelease, *, source: str = "") -> Backend:
        return cls(
            ngc=release.ngc,
            server=release.server,
            torch=release.backend_torch,
            min_driver=release.min_driver,
            cuda=release.cuda,
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


def _dotted(version: Version) -> str:
    return ".".join(map(str, version))


def _plural(count: int, word: str) -> str:
    if count == 1:
        return f"{count} {word}"
    return f"{count} {word[:-1]}ies" if word.endswith("y") else f"{count} {word}s"


def _first_sentence(text: str) -> str:
    head = text.strip().splitlines()[0] if text.strip() else ""
    match = re.match(r"(.+?\.)\s+[A-Z]", head)
    return match.group(1) if match else head


def _last_lines(text: str, count: int = 3) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return " | ".join(lines[-count:]) or "(no output)"


# --- ELF version needs --------------------------------------------------------------------------------------


def glibc_needed(stream: IO[bytes]) -> Version | None:
    """The highest ``GLIBC_x.y`` an ELF file's version needs (``.gnu.version_r``) name; None when it names none.

    That is what the dynamic loader compares with the C library it finds: a need the library lacks ends the
    program with ``version `GLIBC_2.39' not found``. ``GLIBC_PRIVATE`` and other libraries' versions
    (``GLIBCXX_*``, ``CXXABI_*``) are not glibc releases and are ignored. Raises ``ValueError`` for a file that
    is not ELF.
    """
    try:
        elf = ELFFile(stream)
        highest: Version | None = None
        for section in elf.iter_sections():
            if not isinstance(section, GNUVerNeedSection):
                continue
            for _needed, auxiliaries in section.iter_versions():
                for aux in auxiliaries:
                    match = _GLIBC.match(aux.name)
                    if match:
                        version = tuple(int(p) for p in match.group(1).split("."))
                        highest = version if highest is None else max(highest, version)
    except ELFError as exc:
        msg = f"not a readable ELF file ({exc})"
        raise ValueError(msg) from exc
    return highest


def glibc_needed_by(path: Path) -> Version | None:
    """:func:`glibc_needed` of a file on this machine."""
    with path.open("rb") as handle:
        try:
            return glibc_needed(handle)
        except ValueError as exc:
            msg = f"{path}: {exc}"
            raise ValueError(msg) from exc


# --- Judging facts (pure) -----------------------------------------------------------------------------------


def check_driver(host: HostDriver, backend: Backend) -> Result:
    """The host driver against the lowest one the image's CUDA accepts."""
    name = "driver"
    needed = parse_version(backend.min_driver) if backend.min_driver.lower() != "none" else None
    if backend.min_driver.lower() == "none":
        has = f"; this host has {', '.join(sorted(set(host.versions)))}" if host.versions else ""
        return Result(
            name=name,
            status=Status.OK,
            finding=f"the image needs no NVIDIA driver ({backend.source}: min-driver none, CUDA {backend.cuda}){has}",
        )
    if host.nvidia_smi is None:
        return Result(
            name=name,
            status=Status.SKIP,
            finding=f"no nvidia-smi on this host (no NVIDIA driver); the image needs driver >= {backend.min_driver} "
            f"for CUDA {backend.cuda} ({backend.source})",
            fix=f"Run `invoke doctor` on the GPU host that will serve the models; it needs NVIDIA driver "
            f"{backend.min_driver} or newer.",
        )
    if host.error or not host.versions:
        return Result(
            name=name,
            status=Status.FAIL,
            finding=f"{host.nvidia_smi} --query-gpu=driver_version failed: {host.error or 'it listed no GPU'}",
            fix="Install or reload the NVIDIA driver until `nvidia-smi` lists the GPUs (possible causes: no GPU, "
            "driver not installed, kernel module not loaded), then run the doctor again.",
        )
    lowest = min(host.versions, key=lambda v: parse_version(v) or (0,))
    if needed is None or (parse_version(lowest) or (0,)) >= needed:
        return Result(
            name=name,
            status=Status.OK,
            finding=f"host driver {lowest} on {_plural(len(host.versions), 'GPU')} >= {backend.min_driver}, "
            f"which CUDA {backend.cuda} needs ({backend.source})",
        )
    return Result(
        name=name,
        status=Status.FAIL,
        finding=f"host driver {lowest} < {backend.min_driver}, which CUDA {backend.cuda} of the image needs "
        f"({backend.source})",
        fix=f"Install NVIDIA driver {backend.min_driver} or newer on the host, or serve with a Triton release "
        "built for an older CUDA (data-center GPUs with an older LTS driver may run it through CUDA forward "
        "compatibility, which the NGC entrypoint sets up).",
    )


def check_glibc(
    *, tag: str, glibc: Version | None, files: ImageFiles, glibc_error: str, backend: Backend
) -> Result:
    """The image's C library against the highest GLIBC_x.y any server or backend file asks for."""
    name = "glibc"
    if SERVER_BINARY in files.missing:
        return Result(
            name=name,
            status=Status.FAIL,
            finding=f"{tag} has no {SERVER_BINARY}: not a Triton server image",
            fix="Pass a Triton server image: one built with `invoke build-image`, or "
            f"{(backend.release or VERSIONS.triton).image}.",
        )
    if glibc is None:
        return Result(
            name=name,
            status=Status.FAIL,
            finding=f"cannot tell the glibc version of {tag}: `getconf GNU_LIBC_VERSION` and `ldd --version` "
            f"failed ({glibc_error})",
            fix="Use a glibc-based image (Ubuntu or Debian): Triton and libtorch are built against glibc.",
        )
    unreadable = f"; unreadable: {', '.join(files.unreadable)}" if files.unreadable else ""
    too_new = [need for need in files.needs if need.version > glibc]
    if not too_new:
        worst = files.needs[0] if files.needs else None
        at_most = f"need at most {worst.symbol} ({worst.file})" if worst else "name no GLIBC version"
        return Result(
            name=name,
            status=Status.WARN if files.unreadable else Status.OK,
            finding=f"glibc {_dotted(glibc)} in {tag}; the {_plural(files.elf_files, 'ELF file')} under "
            f"/opt/tritonserver {at_most}{unreadable}",
            fix="Check the unreadable files by hand: `objdump -T FILE | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1`."
            if files.unreadable
            else "",
        )
    worst = too_new[0]
    others = [n.file for n in too_new[1:]]
    more = f"; {_plural(len(others), 'more file')} too: {', '.join(others[:3])}{', ...' if len(others) > 3 else ''}"
    release = backend.release
    built_on = (
        f" (Triton {release.ngc} is built on Ubuntu {release.ubuntu}, glibc {release.glibc})"
        if release
        else ""
    )
    return Result(
        name=name,
        status=Status.FAIL,
        finding=f"{worst.file} needs {worst.symbol}, but {tag} has glibc {_dotted(glibc)}"
        f"{more if others else ''}; the loader stops with: version `{worst.symbol}' not found",
        fix=f"Build on a base with glibc >= {_dotted(worst.version)}{built_on}, or take tritonserver and its "
        "backends from a release built for this image's glibc; never copy /opt/tritonserver onto an older base.",
    )


def check_pytorch_backend(*, tag: str, files: ImageFiles, ldd: Ran | None) -> Result:
    """Every library ``libtriton_pytorch.so`` needs resolves inside the image (from ``ldd`` output)."""
    name = "pytorch backend"
    if PYTORCH_BACKEND not in files.paths:
        return Result(
            name=name,
            status=Status.FAIL,
            finding=f"{tag} has no pytorch backend ({PYTORCH_BACKEND} is missing): Triton answers `unable to find "
            "backend library for backend 'pytorch'`",
            fix="Use a Triton image with the pytorch backend: the -pyt-python-py3 or -py3 image of the release "
            "(-py3-min has no backends).",
        )
    if ldd is None or ldd.code == -1:
        return Result(
            name=name,
            status=Status.FAIL,
            finding=f"cannot list the libraries of {PYTORCH_BACKEND} in {tag}: "
            f"{_last_lines(ldd.output) if ldd else 'ldd did not run'}",
            fix="Make sure the image has a dynamic loader and `ldd` (Debian/Ubuntu package libc-bin), then run "
            "the doctor again.",
        )
    missing: list[str] = []
    from_driver: list[str] = []
    versions: list[str] = []
    resolved = 0
    for line in ldd.output.splitlines():
        if match := _NOT_FOUND.match(line):
            (from_driver if _DRIVER_LIBRARY.match(match.group(1)) else missing).append(match.group(1))
        elif match := _VERSION_NOT_FOUND.search(line):
            versions.append(f"{match.group(1)} (required by {match.group(2)})")
        elif "=>" in line or line.strip().startswith("/"):
            resolved += 1
    missing = list(dict.fromkeys(missing))
    versions = list(dict.fromkeys(versions))
    driver_note = (
        f"; {', '.join(dict.fromkeys(from_driver))} come(s) from the NVIDIA driver at run time"
        if from_driver
        else ""
    )
    if missing or versions:
        parts = []
        if missing:
            parts.append(f"{_plural(len(missing), 'library')} not found: {', '.join(missing)}")
        if versions:
            parts.append(f"version(s) not found: {', '.join(versions)}")
        first = missing[0] if missing else versions[0].split()[0]
        return Result(
            name=name,
            status=Status.FAIL,
            finding=f"{PYTORCH_BACKEND} in {tag}: {'; '.join(parts)}{driver_note}",
            fix=f"Triton would fail with `unable to load shared library: ...: {first}: cannot open shared object "
            "file`: copy the missing libraries into /opt/tritonserver/backends/pytorch (the backend's RPATH is "
            "$ORIGIN) or into a folder on the image's LD_LIBRARY_PATH, or use the release's own image, whose "
            "backend folder is complete.",
        )
    if ldd.code != 0 or resolved == 0:
        return Result(
            name=name,
            status=Status.FAIL,
            finding=f"ldd {PYTORCH_BACKEND} in {tag} exited with {ldd.code}: {_last_lines(ldd.output)}",
            fix="Check that the file is a shared library for this image's architecture (`file` on it) and not a "
            "truncated copy.",
        )
    return Result(
        name=name,
        status=Status.OK,
        finding=f"all {_plural(resolved, 'library')} of {PYTORCH_BACKEND} resolve in {tag}{driver_note}",
    )


def _backend_of_model(config_path: Path) -> str | None:
    """``pytorch`` for a pytorch_libtorch model, another backend's name, or None when unreadable."""
    try:
        config = repository.read_config(config_path)
    except Exception:  # any parse problem: `invoke validate` reports it, the doctor assumes pytorch
        return None
    if config.backend:
        return str(config.backend)
    if config.platform in (repository.PLATFORM, "libtorch", ""):
        return "pytorch"
    return str(config.platform)


def check_models(root: Path, backend: Backend, versions: Versions = VERSIONS) -> list[Result]:
    """For each model: the TorchScript file format and the exporting torch, against the backend's libtorch."""
    if not root.is_dir():
        return [
            Result(
                name="models",
                status=Status.SKIP,
                finding=f"no model repository at {root}",
                fix=f"Export models first (`invoke export --repository {root}`) or pass --repository.",
            )
        ]
    found = repository.models(root)
    if not found:
        return [
            Result(
                name="models",
                status=Status.SKIP,
                finding=f"no model folder (a folder with config.pbtxt) in {root}",
                fix=f"Export models first: `invoke export --repository {root}`.",
            )
        ]
    results: list[Result] = []
    for model in found:
        kind = _backend_of_model(model.config)
        if kind is not None and kind != "pytorch":
            results.append(
                Result(
                    name=f"model {model.name}",
                    status=Status.SKIP,
                    finding=f"{model.config}: backend {kind!r}, not a pytorch_libtorch model",
                )
            )
            continue
        results.append(_check_model_format(model, backend, versions))
        results.append(_check_model_torch(model, backend, versions))
    return results


def _check_model_format(model: repository.ModelDir, backend: Backend, versions: Versions) -> Result:
    from tritonpt.export import torchscript_format  # noqa: PLC0415 - imports torch; only the model checks need it

    name = f"model {model.name} format"
    readable = versions.pytorch.torchscript_max_format
    version_dirs = model.versions()
    if not version_dirs:
        return Result(
            name=name,
            status=Status.FAIL,
            finding=f"{model.root} has no version folder (1/model.pt)",
            fix=f"Re-export the model (`invoke export`) so that {model.model_file()} exists.",
        )
    formats: list[str] = []
    for version in version_dirs:
        path = model.model_file(version)
        if not path.is_file():
            return Result(
                name=name,
                status=Status.FAIL,
                finding=f"{path} is missing: Triton answers `unable to find '{path.name}' for model instance`",
                fix="Re-export the model (`invoke export`), or remove the empty version folder.",
            )
        try:
            found = torchscript_format(path)
        except (ValueError, OSError, KeyError, zipfile.BadZipFile) as exc:
            return Result(
                name=name,
                status=Status.FAIL,
                finding=f"{path} is not a TorchScript archive ({exc})",
                fix="Save the model with torch.jit.save (or `invoke export`); Triton's pytorch backend loads "
                "TorchScript archives only.",
            )
        if found > readable:
            return Result(
                name=name,
                status=Status.FAIL,
                finding=f"{path} has TorchScript file format {found}; libtorch {versions.pytorch.torch.rsplit('.', 1)[0]} "
                f"reads up to {readable} (versions.toml torchscript_max_format)",
                fix=f"Re-export the model with torch {versions.pytorch.torch} (`invoke export`), or serve it with a "
                "Triton release whose libtorch reads this format.",
            )
        formats.append(f"{found} ({version}/model.pt)")
    return Result(
        name=name,
        status=Status.OK,
        finding=f"TorchScript file format {', '.join(formats)}; the backend's libtorch {backend.torch} reads up to "
        f"{readable} (versions.toml torchscript_max_format)",
    )


def _check_model_torch(model: repository.ModelDir, backend: Backend, versions: Versions) -> Result:
    name = f"model {model.name} torch"
    if not model.reference_json.is_file():
        return Result(
            name=name,
            status=Status.WARN,
            finding=f"no {model.reference_json}: the torch version that exported model.pt is unknown (a "
            "TorchScript file does not record it)",
            fix=f"Re-export with `invoke export` to record it, or make sure the exporting torch is not newer than "
            f"{backend.torch} (the backend's libtorch).",
        )
    try:
        exported = reference.load(model).provenance.torch_version
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return Result(
            name=name,
            status=Status.FAIL,
            finding=f"{model.reference_json}: cannot read provenance.torch_version ({type(exc).__name__}: {exc})",
            fix="Re-export the model with `invoke export` to rewrite its reference data.",
        )
    have, serve = parse_version(exported), parse_version(backend.torch)
    if have is None or serve is None:
        return Result(
            name=name,
            status=Status.WARN,
            finding=f"cannot compare torch {exported!r} (provenance.torch_version in {model.reference_json}) "
            f"with the backend's {backend.torch!r}",
            fix="Write versions as MAJOR.MINOR.PATCH (e.g. 2.9.1) in reference.json and in the image's "
            f"{LABEL_BACKEND_TORCH} label.",
        )
    if have[:2] > serve[:2]:
        return Result(
            name=name,
            status=Status.FAIL,
            finding=f"exported with torch {exported} (newer minor than the backend's libtorch {backend.torch}, "
            f"{backend.source}): loading fails with errors like `Unknown type name 'NoneType'` or "
            "`Unknown builtin op`",
            fix=f"Re-export with torch {_dotted(serve[:2])}.x (this repository pins torch {versions.pytorch.torch}: "
            f"`invoke export`), or serve with a Triton release whose pytorch backend bundles torch "
            f">= {_dotted(have[:2])}.",
        )
    relation = "same minor" if have[:2] == serve[:2] else "an older minor, which newer libtorch reads"
    return Result(
        name=name,
        status=Status.OK,
        finding=f"exported with torch {exported}; the backend's libtorch is {backend.torch} ({relation}; "
        f"{backend.source})",
    )


# --- Gathering facts ----------------------------------------------------------------------------------------


def host_driver(timeout: float = 30.0) -> HostDriver:
    """Ask this host's ``nvidia-smi`` for the driver version of each GPU."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return HostDriver(nvidia_smi=None)
    try:
        done = subprocess.run(
            [smi, "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return HostDriver(nvidia_smi=smi, error=str(exc))
    if done.returncode != 0:
        return HostDriver(nvidia_smi=smi, error=_last_lines(done.stdout + done.stderr))
    return HostDriver(
        nvidia_smi=smi, versions=tuple(v.strip() for v in done.stdout.splitlines() if v.strip())
    )


def run_in_image(
    client: DockerClient,
    tag: str,
    command: Sequence[str],
    *,
    gpus: bool = False,
    volumes: Sequence[str] = (),
    timeout: int = COMMAND_TIMEOUT_S,
) -> Ran:
    """Run ``command`` in a container of ``tag`` (entrypoint replaced, the image's environment, no network).

    ``volumes`` are ``SOURCE:TARGET:ro`` bind mounts, for images that need host files at run time.

    The container is removed whatever happens. ``code`` is -1 when the command could not start (no such
    executable, no GPU runtime) or did not finish within ``timeout`` seconds; ``output`` then says why.
    """
    import requests  # noqa: PLC0415 - docker-py's transport; only needed here

    docker = images.docker_module()
    options: dict[str, Any] = {
        "entrypoint": [command[0]],
        "command": list(command[1:]),
        "labels": {CONTAINER_LABEL: "1"},
        "network_disabled": True,
    }
    if volumes:
        options["volumes"] = list(volumes)
    if gpus:
        options["device_requests"] = [docker.types.DeviceRequest(count=-1, capabilities=[["gpu"]])]
    try:
        container = client.containers.create(tag, **options)
    except docker.errors.DockerException as exc:
        return Ran(code=-1, output=str(getattr(exc, "explanation", None) or exc))
    try:
        container.start()
        status = container.wait(timeout=timeout)
        output = container.logs(stdout=True, stderr=True).decode("utf-8", errors="replace")
        return Ran(code=int(status.get("StatusCode", -1)), output=output)
    except docker.errors.DockerException as exc:
        return Ran(code=-1, output=str(getattr(exc, "explanation", None) or exc))
    except requests.exceptions.RequestException:
        return Ran(code=-1, output=f"`{' '.join(command)}` did not finish within {timeout} s")
    finally:
        with contextlib.suppress(docker.errors.DockerException):
            container.remove(force=True)


def image_glibc(client: DockerClient, tag: str) -> tuple[Version | None, str]:
    """The image's glibc version (``getconf GNU_LIBC_VERSION``, else ``ldd --version``) and, if unknown, why."""
    reasons = []
    for command in (["getconf", "GNU_LIBC_VERSION"], ["ldd", "--version"]):
        ran = run_in_image(client, tag, command)
        first = ran.output.strip().splitlines()[0] if ran.output.strip() else ""
        if ran.code == 0 and ("glibc" in first.lower() or "GLIBC" in first):
            version = parse_version(first.split()[-1]) if command[0] == "ldd" else parse_version(first)
            if version is not None:
                return version, ""
        reasons.append(f"{command[0]}: {_last_lines(ran.output, 1)}")
    return None, "; ".join(reasons)


class _Chunks(io.RawIOBase):
    """A readable stream over the byte chunks docker-py's ``get_archive`` yields (no copy of a chunk's rest)."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self._chunks = iter(chunks)
        self._pending = memoryview(b"")
        self._offset = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:  # noqa: ANN401 - io.RawIOBase's signature (a writable buffer)
        while self._offset >= len(self._pending):
            try:
                self._pending, self._offset = memoryview(next(self._chunks)), 0
            except StopIteration:
                return 0
        size = min(len(buffer), len(self._pending) - self._offset)
        buffer[:size] = self._pending[self._offset : self._offset + size]
        self._offset += size
        return size


def _scan_archive(
    stream: IO[bytes], parent: PurePosixPath, paths: set[str], needs: list[GlibcNeed], unreadable: list[str]
) -> tuple[int, str | None]:
    """Read one ``get_archive`` tar stream: note every path, read the GLIBC need of every ELF file in it.

    Returns the number of ELF files and, when the path asked for is itself a symbolic link, its target.
    """
    elf_files = 0
    link: str | None = None
    with tarfile.open(fileobj=stream, mode="r|") as archive:
        for index, member in enumerate(archive):
            path = str(parent / member.name)
            if member.issym():
                paths.add(path)
                link = member.linkname if index == 0 else link
                continue
            if not member.isfile():
                continue
            paths.add(path)
            handle = archive.extractfile(member)
            if handle is None or handle.read(4) != b"\x7fELF":
                continue
            elf_files += 1
            # pyelftools seeks: keep the file (libtorch_cuda.so is over a gigabyte) on disk, not in memory.
            with tempfile.SpooledTemporaryFile(max_size=64 << 20) as spool:
                spool.write(b"\x7fELF")
                shutil.copyfileobj(handle, spool, 1 << 20)
                spool.seek(0)
                try:
                    version = glibc_needed(spool)
                except ValueError as exc:
                    unreadable.append(f"{path} ({exc})")
                    continue
            if version is not None:
                needs.append(GlibcNeed(file=path, version=version))
    return elf_files, link


def image_files(client: DockerClient, tag: str, scanned: Sequence[str] = SCANNED) -> ImageFiles:
    """Copy :data:`SCANNED` out of the image (never starting it) and read the GLIBC need of each ELF file."""
    docker = images.docker_module()
    paths: set[str] = set()
    needs: list[GlibcNeed] = []
    unreadable: list[str] = []
    missing: list[str] = []
    elf_files = 0
    container = client.containers.create(tag, entrypoint=["/bin/true"], labels={CONTAINER_LABEL: "1"})
    try:
        for wanted in scanned:
            path = PurePosixPath(wanted)
            for _hop in range(8):  # follow a symbolic link at the path itself (bin/tritonserver -> ...)
                try:
                    chunks, _stat = container.get_archive(str(path), chunk_size=1 << 20)
                except docker.errors.NotFound:
                    missing.append(wanted)
                    break
                count, link = _scan_archive(
                    io.BufferedReader(_Chunks(chunks), buffer_size=1 << 20),
                    path.parent,
                    paths,
                    needs,
                    unreadable,
                )
                elf_files += count
                if link is None or count:
                    break
                path = PurePosixPath(link) if link.startswith("/") else path.parent / link
    finally:
        with contextlib.suppress(docker.errors.DockerException):
            container.remove(force=True)
    needs.sort(key=lambda n: (n.version, n.file), reverse=True)
    return ImageFiles(
        needs=tuple(needs),
        elf_files=elf_files,
        paths=frozenset(paths),
        missing=tuple(missing),
        unreadable=tuple(unreadable),
    )


def ldd_in_image(
    client: DockerClient, tag: str, path: str = PYTORCH_BACKEND, *, volumes: Sequence[str] = ()
) -> Ran:
    """``ldd PATH`` inside the image (its LD_LIBRARY_PATH applies), else the dynamic loader's ``--list``."""
    ran = run_in_image(client, tag, ["ldd", path], volumes=volumes)
    if ran.code == -1:
        ran = run_in_image(client, tag, ["/lib64/ld-linux-x86-64.so.2", "--list", path], volumes=volumes)
    return ran


def backend_of(tag: str, info: Mapping[str, Any], versions: Versions = VERSIONS) -> tuple[Backend, bool]:
    """What an image declares about its server and backend, and whether it declared anything at all.

    Each value comes from our labels (``io.tritonpt.ngc``, ``io.tritonpt.triton-server``,
    ``io.tritonpt.backend-torch``, ``io.tritonpt.min-driver``, ``io.tritonpt.cuda``), else from NVIDIA's
    ``ENV NVIDIA_TRITON_SERVER_VERSION`` / ``TRITON_SERVER_VERSION``, else from versions.toml: the release those
    name when it is one we know, else the default release.
    """
    config = info.get("Config") or {}
    labels: Mapping[str, str] = config.get("Labels") or {}
    env = dict(item.partition("=")[::2] for item in config.get("Env") or [])
    ngc = labels.get(LABEL_NGC) or env.get("NVIDIA_TRITON_SERVER_VERSION")
    server = labels.get(LABEL_SERVER) or labels.get(NVIDIA_SERVER_LABEL) or env.get("TRITON_SERVER_VERSION")
    release: TritonRelease | None = None
    for candidate in (ngc, server):
        if candidate and release is None:
            with contextlib.suppress(ValueError):
                release = versions.release(candidate)
    fallback = release or versions.triton
    if LABEL_BACKEND_TORCH in labels:
        source = f"labels of {tag}"
    elif release is not None:
        source = f"versions.toml release {release.ngc}, which {tag} is"
    else:
        source = f"versions.toml default release {fallback.ngc}"
    backend = Backend(
        ngc=ngc or "",
        server=server or "",
        torch=labels.get(LABEL_BACKEND_TORCH) or fallback.backend_torch,
        min_driver=labels.get(LABEL_MIN_DRIVER) or fallback.min_driver,
        cuda=labels.get(LABEL_CUDA) or fallback.cuda,
        source=source,
        release=release,
    )
    return backend, release is not None or LABEL_BACKEND_TORCH in labels


# --- The run ------------------------------------------------------------------------------------------------


@dataclass
class _Facts:
    client: DockerClient | None = None
    info: Mapping[str, Any] = field(default_factory=dict)
    results: list[Result] = field(default_factory=list)


def _check_docker(facts: _Facts, client: DockerClient | None) -> None:
    name = "docker"
    try:
        facts.client = client or images.docker_client(timeout=60)
        version = facts.client.version()
        facts.info = facts.client.info()
    except DockerUnavailable as exc:
        facts.results.append(
            Result(name=name, status=Status.FAIL, finding=_first_sentence(str(exc)), fix=DOCKER_FIX)
        )
        facts.client = None
        return
    except Exception as exc:  # docker-py and requests raise many types; all mean "no engine"
        facts.results.append(
            Result(
                name=name,
                status=Status.FAIL,
                finding=f"the Docker engine did not answer: {exc}",
                fix=DOCKER_FIX,
            )
        )
        facts.client = None
        return
    engine, api = str(version.get("Version", "?")), str(version.get("ApiVersion", "?"))
    finding = f"Docker Engine {engine}, API {api}, at {images.docker_host()}"
    if (parse_version(api) or (0,)) < (parse_version(images.MIN_API_VERSION) or (0,)):
        facts.results.append(
            Result(
                name=name,
                status=Status.WARN,
                finding=f"{finding}: older than API {images.MIN_API_VERSION} (Docker 20.10), the oldest this is tested with",
                fix="Upgrade Docker Engine to 20.10 or newer.",
            )
        )
        return
    facts.results.append(Result(name=name, status=Status.OK, finding=finding))


def _check_gpu(facts: _Facts, tag: str | None, host: HostDriver) -> list[Result]:
    """The NVIDIA runtime row and the ``--gpus all`` container row."""
    runtimes = sorted((facts.info.get("Runtimes") or {}).keys())
    if facts.client is None:
        reason = "Docker is unreachable (see the docker row)"
        return [
            Result(name="nvidia runtime", status=Status.SKIP, finding=reason, fix=DOCKER_FIX),
            Result(name="gpu in container", status=Status.SKIP, finding=reason, fix=DOCKER_FIX),
        ]
    if host.nvidia_smi is None:
        state = "registered" if "nvidia" in runtimes else "not registered"
        return [
            Result(
                name="nvidia runtime",
                status=Status.SKIP,
                finding=f"no GPU checks on a host without nvidia-smi (the nvidia runtime is {state}; runtimes: "
                f"{', '.join(runtimes) or 'none'})",
                fix="Run `invoke doctor --image TAG` on the GPU host that will serve the models.",
            ),
            Result(
                name="gpu in container",
                status=Status.SKIP,
                finding="no nvidia-smi on this host, so no GPU to hand to a container",
                fix="Run `invoke doctor --image TAG` on the GPU host that will serve the models.",
            ),
        ]
    if tag is None:
        gpu = Result(
            name="gpu in container",
            status=Status.SKIP,
            finding="no --image given: nothing to run `nvidia-smi -L` in with --gpus all",
            fix="Pass --image TAG to check that a container of that image sees the GPUs.",
        )
    else:
        ran = run_in_image(facts.client, tag, ["nvidia-smi", "-L"], gpus=True)
        listed = [line.strip() for line in ran.output.splitlines() if line.strip().startswith("GPU ")]
        if ran.code == 0 and listed:
            gpu = Result(
                name="gpu in container",
                status=Status.OK,
                finding=f"{_plural(len(listed), 'GPU')} visible in {tag} with --gpus all: {listed[0]}"
                + (", ..." if len(listed) > 1 else ""),
            )
        else:
            gpu = Result(
                name="gpu in container",
                status=Status.FAIL,
                finding=f"`nvidia-smi -L` in {tag} with --gpus all failed (exit {ran.code}): {_last_lines(ran.output)}",
                fix=TOOLKIT_FIX.format(image=tag),
            )
    if "nvidia" in runtimes:
        runtime = Result(
            name="nvidia runtime", status=Status.OK, finding=f"Docker runtimes: {', '.join(runtimes)}"
        )
    elif gpu.status is Status.OK:
        runtime = Result(
            name="nvidia runtime",
            status=Status.WARN,
            finding=f"no `nvidia` runtime registered (runtimes: {', '.join(runtimes)}), but --gpus all works "
            "through Docker's own GPU support",
            fix="Nothing is needed for --gpus; register the runtime (`sudo nvidia-ctk runtime configure "
            "--runtime=docker && sudo systemctl restart docker`) if you also run with --runtime=nvidia.",
        )
    else:
        runtime = Result(
            name="nvidia runtime",
            status=Status.FAIL,
            finding=f"no `nvidia` runtime registered with Docker (runtimes: {', '.join(runtimes) or 'none'})",
            fix=TOOLKIT_FIX.format(image=tag or "IMAGE"),
        )
    return [runtime, gpu]


def _check_image(facts: _Facts, tag: str, versions: Versions) -> tuple[Result, Backend | None]:
    docker = images.docker_module()
    assert facts.client is not None  # noqa: S101 - the caller checks
    try:
        info = facts.client.api.inspect_image(tag)
    except docker.errors.ImageNotFound:
        return (
            Result(
                name="image",
                status=Status.FAIL,
                finding=f"no image {tag} in the engine at {images.docker_host()}",
                fix=f"Build it (`invoke build-image --tag {tag}`) or pull it (`docker pull {tag}`), then run the "
                "doctor again.",
            ),
            None,
        )
    backend, declared = backend_of(tag, info, versions)
    size = int(info.get("Size") or 0) / 1e6
    what = (
        f"{tag} ({str(info.get('Id', ''))[:19]}, {size:.0f} MB): Triton {backend.ngc or '(release not labelled)'} "
        f"(server {backend.server or 'not labelled'}), pytorch backend libtorch {backend.torch}, CUDA {backend.cuda} "
        f"({backend.source})"
    )
    if declared:
        return Result(name="image", status=Status.OK, finding=what), backend
    return (
        Result(
            name="image",
            status=Status.WARN,
            finding=f"{tag} ({size:.0f} MB) declares no Triton release or {LABEL_BACKEND_TORCH} label: comparing "
            f"against {backend.source}",
            fix="Build the image with `invoke build-image`, whose recipes label the versions they hold.",
        ),
        backend,
    )


def run(
    *,
    image: str | None,
    repository: Path,
    mounts: Sequence[Mount] = (),
    versions: Versions = VERSIONS,
    client: DockerClient | None = None,
) -> Report:
    """Run every check (see the module docstring); never raises for what it finds, it reports it.

    ``mounts`` are what a container of the image needs at run time (CI's stand-ins: the host's site-packages).
    """
    facts = _Facts()
    _check_docker(facts, client)
    host = host_driver()
    results = list(facts.results)
    results += _check_gpu(facts, image, host)

    backend = Backend.from_release(versions.triton)
    image_rows: list[Result] = []
    if image is None:
        skip = "no --image given"
        image_rows = [
            Result(name=n, status=Status.SKIP, finding=skip, fix="Pass --image TAG to check an image.")
            for n in ("image", "glibc", "pytorch backend")
        ]
    elif facts.client is None:
        image_rows = [
            Result(
                name=n,
                status=Status.SKIP,
                finding="Docker is unreachable (see the docker row)",
                fix=DOCKER_FIX,
            )
            for n in ("image", "glibc", "pytorch backend")
        ]
    else:
        described, found = _check_image(facts, image, versions)
        image_rows.append(described)
        if found is None:
            image_rows += [
                Result(name=n, status=Status.SKIP, finding=f"no image {image}", fix=described.fix)
                for n in ("glibc", "pytorch backend")
            ]
        else:
            backend = found
            files = image_files(facts.client, image)
            glibc, why = image_glibc(facts.client, image)
            image_rows.append(
                check_glibc(tag=image, glibc=glibc, files=files, glibc_error=why, backend=backend)
            )
            ldd = (
                ldd_in_image(facts.client, image, volumes=[m.volume() for m in mounts])
                if PYTORCH_BACKEND in files.paths
                else None
            )
            image_rows.append(check_pytorch_backend(tag=image, files=files, ldd=ldd))

    results.append(check_driver(host, backend))
    results += image_rows
    results += check_models(repository, backend, versions)
    if client is None and facts.client is not None:
        facts.client.close()
    return Report(image=image, repository=repository, results=tuple(results))


# --- Showing it ---------------------------------------------------------------------------------------------

_STYLE = {Status.OK: "green", Status.WARN: "yellow", Status.FAIL: "bold red", Status.SKIP: "dim"}


def render(report: Report, console: Console | None = None) -> None:
    """The report as a table (check, status, finding, fix) and a one-line summary."""
    console = console or Console(highlight=False, soft_wrap=False)
    table = Table(
        title=f"tritonpt doctor: image {report.image or '(none)'}, repository {report.repository}",
        show_lines=True,
        expand=False,
    )
    table.add_column("check", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("finding", overflow="fold")
    table.add_column("fix", overflow="fold")
    for result in report:
        style = _STYLE[result.status]
        table.add_row(
            escape(result.name),
            f"[{style}]{result.status.value.upper()}[/{style}]",
            escape(result.finding),
            escape(result.fix) if result.status is not Status.OK else "",
        )
    console.print(table)
    counts = ", ".join(f"{report.count(s)} {s.value}" for s in Status)
    verdict = "[bold red]problems found[/bold red]" if report.exit_code else "[green]no failures[/green]"
    console.print(f"{counts}: {verdict}")
