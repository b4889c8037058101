"""Gathering facts (all the I/O): the host driver, commands run inside an image, files copied out of it, its labels."""

from __future__ import annotations

import contextlib
import io
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import PurePosixPath
from typing import IO, Any

from tritonpt import image as images
from tritonpt.doctor.elf import glibc_needed
from tritonpt.doctor.results import (
    COMMAND_TIMEOUT_S,
    CONTAINER_LABEL,
    LABEL_BACKEND_TORCH,
    LABEL_CUDA,
    LABEL_MIN_DRIVER,
    LABEL_NGC,
    LABEL_PT2_BACKEND,
    LABEL_SERVER,
    NVIDIA_SERVER_LABEL,
    PYTORCH_BACKEND,
    SCANNED,
    Backend,
    GlibcNeed,
    HostDriver,
    ImageFiles,
    Ran,
    Version,
    last_lines,
    parse_version,
)
from tritonpt.image import DockerClient
from tritonpt.versions import VERSIONS, TritonRelease, Versions, stated

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
        return HostDriver(nvidia_smi=smi, error=last_lines(done.stdout + done.stderr))
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
        reasons.append(f"{command[0]}: {last_lines(ran.output, 1)}")
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
        torch=labels.get(LABEL_BACKEND_TORCH) or stated(fallback.backend_torch),
        min_driver=labels.get(LABEL_MIN_DRIVER) or stated(fallback.min_driver),
        cuda=labels.get(LABEL_CUDA) or stated(fallback.cuda),
        source=source,
        release=release,
        pt2=labels.get(LABEL_PT2_BACKEND, ""),
        torchvision=labels.get(images.LABEL_RECIPE) != "pytorch",  # our recipe builds it OFF, as here
    )
    return backend, release is not None or LABEL_BACKEND_TORCH in labels
