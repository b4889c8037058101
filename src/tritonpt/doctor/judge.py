"""Judging the host's and the image's facts: each ``check_*`` takes what was gathered and returns a Result, so it is
unit-tested with real files and real tool output without a GPU or a broken image at hand. The models' checks are
:mod:`tritonpt.doctor.models`'."""

from __future__ import annotations

from tritonpt.doctor.results import (
    DRIVER,
    DRIVER_LIBRARY,
    GLIBC,
    NOT_FOUND,
    PYTORCH_BACKEND,
    PYTORCH_BACKEND_CHECK,
    SERVER_BINARY,
    VERSION_NOT_FOUND,
    Backend,
    HostDriver,
    ImageFiles,
    Ran,
    Result,
    Status,
    Version,
    dotted,
    last_lines,
    parse_version,
    plural,
)
from tritonpt.versions import NOT_STATED, VERSIONS, stated

# --- Judging facts (pure) -----------------------------------------------------------------------------------


def check_driver(host: HostDriver, backend: Backend) -> Result:
    """The host driver against the lowest one the image's CUDA accepts."""
    name = DRIVER
    needed = parse_version(backend.min_driver) if backend.min_driver.lower() != "none" else None
    if backend.min_driver.lower() == "none":
        has = f"; this host has {', '.join(sorted(set(host.versions)))}" if host.versions else ""
        return Result.ok(
            name,
            f"the image needs no NVIDIA driver ({backend.source}: min-driver none, CUDA {backend.cuda}){has}",
        )
    if host.nvidia_smi is None:
        if backend.min_driver == NOT_STATED:
            need, fix = (
                f"the image's minimum driver for CUDA {backend.cuda} is not stated",
                f"the driver NVIDIA's CUDA Compatibility table names for CUDA {backend.cuda}.",
            )
        else:
            need, fix = (
                f"the image needs driver >= {backend.min_driver} for CUDA {backend.cuda}",
                f"NVIDIA driver {backend.min_driver} or newer.",
            )
        return Result.skip(
            name,
            f"no nvidia-smi on this host (no NVIDIA driver); {need} ({backend.source})",
            fix=f"Run `invoke doctor` on the GPU host that will serve the models; it needs {fix}",
        )
    if host.error or not host.versions:
        return Result.fail(
            name,
            f"{host.nvidia_smi} --query-gpu=driver_version failed: {host.error or 'it listed no GPU'}",
            "Install or reload the NVIDIA driver until `nvidia-smi` lists the GPUs (possible causes: no GPU, "
            "driver not installed, kernel module not loaded), then run the doctor again.",
        )
    lowest = min(host.versions, key=lambda v: parse_version(v) or (0,))
    if backend.min_driver == NOT_STATED:
        return Result.warn(
            name,
            f"host driver {lowest} on {plural(len(host.versions), 'GPU')}; the image's minimum driver is not "
            f"stated ({backend.source}: NVIDIA's release notes of Triton {backend.ngc or '?'} name none for "
            f"CUDA {backend.cuda})",
            f"Check the host driver against NVIDIA's CUDA Compatibility table for CUDA {backend.cuda} before "
            "serving from this image.",
        )
    if needed is None or (parse_version(lowest) or (0,)) >= needed:
        return Result.ok(
            name,
            f"host driver {lowest} on {plural(len(host.versions), 'GPU')} >= {backend.min_driver}, "
            f"which CUDA {backend.cuda} needs ({backend.source})",
        )
    return Result.fail(
        name,
        f"host driver {lowest} < {backend.min_driver}, which CUDA {backend.cuda} of the image needs "
        f"({backend.source})",
        f"Install NVIDIA driver {backend.min_driver} or newer on the host, or serve with a Triton release "
        "built for an older CUDA (data-center GPUs with an older LTS driver may run it through CUDA forward "
        "compatibility, which the NGC entrypoint sets up).",
    )


def check_glibc(
    *, tag: str, glibc: Version | None, files: ImageFiles, glibc_error: str, backend: Backend
) -> Result:
    """The image's C library against the highest GLIBC_x.y any server or backend file asks for."""
    name = GLIBC
    if SERVER_BINARY in files.missing:
        return Result.fail(
            name,
            f"{tag} has no {SERVER_BINARY}: not a Triton server image",
            "Pass a Triton server image: one built with `invoke build-image`, or "
            f"{(backend.release or VERSIONS.triton).image}.",
        )
    if glibc is None:
        return Result.fail(
            name,
            f"cannot tell the glibc version of {tag}: `getconf GNU_LIBC_VERSION` and `ldd --version` "
            f"failed ({glibc_error})",
            "Use a glibc-based image (Ubuntu or Debian): Triton and libtorch are built against glibc.",
        )
    unreadable = f"; unreadable: {', '.join(files.unreadable)}" if files.unreadable else ""
    too_new = [need for need in files.needs if need.version > glibc]
    if not too_new:
        worst = files.needs[0] if files.needs else None
        at_most = f"need at most {worst.symbol} ({worst.file})" if worst else "name no GLIBC version"
        return Result(
            name=name,
            status=Status.WARN if files.unreadable else Status.OK,
            finding=f"glibc {dotted(glibc)} in {tag}; the {plural(files.elf_files, 'ELF file')} under "
            f"/opt/tritonserver {at_most}{unreadable}",
            fix="Check the unreadable files by hand: `objdump -T FILE | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1`."
            if files.unreadable
            else "",
        )
    worst = too_new[0]
    others = [n.file for n in too_new[1:]]
    more = f"; {plural(len(others), 'more file')} too: {', '.join(others[:3])}{', ...' if len(others) > 3 else ''}"
    release = backend.release
    built_on = (
        f" (Triton {release.ngc} is built on Ubuntu {stated(release.ubuntu)}, glibc {stated(release.glibc)})"
        if release
        else ""
    )
    return Result.fail(
        name,
        f"{worst.file} needs {worst.symbol}, but {tag} has glibc {dotted(glibc)}"
        f"{more if others else ''}; the loader stops with: version `{worst.symbol}' not found",
        f"Build on a base with glibc >= {dotted(worst.version)}{built_on}, or take tritonserver and its "
        "backends from a release built for this image's glibc; never copy /opt/tritonserver onto an older base.",
    )


def check_pytorch_backend(*, tag: str, files: ImageFiles, ldd: Ran | None) -> Result:
    """Every library ``libtriton_pytorch.so`` needs resolves inside the image (from ``ldd`` output)."""
    name = PYTORCH_BACKEND_CHECK
    if PYTORCH_BACKEND not in files.paths:
        return Result.fail(
            name,
            f"{tag} has no pytorch backend ({PYTORCH_BACKEND} is missing): Triton answers `unable to find "
            "backend library for backend 'pytorch'`",
            "Use a Triton image with the pytorch backend: the -pyt-python-py3 or -py3 image of the release "
            "(-py3-min has no backends).",
        )
    if ldd is None or ldd.code == -1:
        return Result.fail(
            name,
            f"cannot list the libraries of {PYTORCH_BACKEND} in {tag}: "
            f"{last_lines(ldd.output) if ldd else 'ldd did not run'}",
            "Make sure the image has a dynamic loader and `ldd` (Debian/Ubuntu package libc-bin), then run "
            "the doctor again.",
        )
    missing: list[str] = []
    from_driver: list[str] = []
    versions: list[str] = []
    resolved = 0
    for line in ldd.output.splitlines():
        if match := NOT_FOUND.match(line):
            (from_driver if DRIVER_LIBRARY.match(match.group(1)) else missing).append(match.group(1))
        elif match := VERSION_NOT_FOUND.search(line):
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
            parts.append(f"{plural(len(missing), 'library')} not found: {', '.join(missing)}")
        if versions:
            parts.append(f"version(s) not found: {', '.join(versions)}")
        first = missing[0] if missing else versions[0].split()[0]
        return Result.fail(
            name,
            f"{PYTORCH_BACKEND} in {tag}: {'; '.join(parts)}{driver_note}",
            f"Triton would fail with `unable to load shared library: ...: {first}: cannot open shared object "
            "file`: copy the missing libraries into /opt/tritonserver/backends/pytorch (the backend's RPATH is "
            "$ORIGIN) or into a folder on the image's LD_LIBRARY_PATH, or use the release's own image, whose "
            "backend folder is complete.",
        )
    if ldd.code != 0 or resolved == 0:
        return Result.fail(
            name,
            f"ldd {PYTORCH_BACKEND} in {tag} exited with {ldd.code}: {last_lines(ldd.output)}",
            "Check that the file is a shared library for this image's architecture (`file` on it) and not a "
            "truncated copy.",
        )
    return Result.ok(
        name, f"all {plural(resolved, 'library')} of {PYTORCH_BACKEND} resolve in {tag}{driver_note}"
    )
