"""The run: gather, judge and collect every check in the order they are shown."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tritonpt import image as images
from tritonpt.doctor.facts import (
    backend_of,
    host_driver,
    image_files,
    image_glibc,
    ldd_in_image,
    run_in_image,
)
from tritonpt.doctor.judge import check_driver, check_glibc, check_pytorch_backend
from tritonpt.doctor.models import check_models
from tritonpt.doctor.results import (
    DOCKER,
    DOCKER_FIX,
    GPU_IN_CONTAINER,
    IMAGE,
    IMAGE_CHECKS,
    LABEL_BACKEND_TORCH,
    NVIDIA_RUNTIME,
    PYTORCH_BACKEND,
    TOOLKIT_FIX,
    Backend,
    HostDriver,
    Report,
    Result,
    Status,
    first_sentence,
    last_lines,
    parse_version,
    plural,
)
from tritonpt.errors import DockerUnavailable
from tritonpt.image import DockerClient
from tritonpt.options import Mount
from tritonpt.versions import VERSIONS, Versions

# --- The run ------------------------------------------------------------------------------------------------


@dataclass
class _Facts:
    client: DockerClient | None = None
    info: Mapping[str, Any] = field(default_factory=dict)
    results: list[Result] = field(default_factory=list)


def _check_docker(facts: _Facts, client: DockerClient | None) -> None:
    name = DOCKER
    try:
        facts.client = client or images.docker_client(timeout=60)
        version = facts.client.version()
        facts.info = facts.client.info()
    except DockerUnavailable as exc:
        facts.results.append(Result.fail(name, first_sentence(str(exc)), DOCKER_FIX))
        facts.client = None
        return
    except Exception as exc:  # docker-py and requests raise many types; all mean "no engine"
        facts.results.append(Result.fail(name, f"the Docker engine did not answer: {exc}", DOCKER_FIX))
        facts.client = None
        return
    engine, api = str(version.get("Version", "?")), str(version.get("ApiVersion", "?"))
    finding = f"Docker Engine {engine}, API {api}, at {images.docker_host()}"
    if (parse_version(api) or (0,)) < (parse_version(images.MIN_API_VERSION) or (0,)):
        facts.results.append(
            Result.warn(
                name,
                f"{finding}: older than API {images.MIN_API_VERSION} (Docker 20.10), the oldest this is tested with",
                "Upgrade Docker Engine to 20.10 or newer.",
            )
        )
        return
    facts.results.append(Result.ok(name, finding))


def _check_gpu(facts: _Facts, tag: str | None, host: HostDriver) -> list[Result]:
    """The NVIDIA runtime row and the ``--gpus all`` container row."""
    runtimes = sorted((facts.info.get("Runtimes") or {}).keys())
    if facts.client is None:
        reason = "Docker is unreachable (see the docker row)"
        return [
            Result.skip(NVIDIA_RUNTIME, reason, fix=DOCKER_FIX),
            Result.skip(GPU_IN_CONTAINER, reason, fix=DOCKER_FIX),
        ]
    if host.nvidia_smi is None:
        state = "registered" if "nvidia" in runtimes else "not registered"
        return [
            Result.skip(
                NVIDIA_RUNTIME,
                f"no GPU checks on a host without nvidia-smi (the nvidia runtime is {state}; runtimes: "
                f"{', '.join(runtimes) or 'none'})",
                fix="Run `invoke doctor --image TAG` on the GPU host that will serve the models.",
            ),
            Result.skip(
                GPU_IN_CONTAINER,
                "no nvidia-smi on this host, so no GPU to hand to a container",
                fix="Run `invoke doctor --image TAG` on the GPU host that will serve the models.",
            ),
        ]
    if tag is None:
        gpu = Result.skip(
            GPU_IN_CONTAINER,
            "no --image given: nothing to run `nvidia-smi -L` in with --gpus all",
            fix="Pass --image TAG to check that a container of that image sees the GPUs.",
        )
    else:
        ran = run_in_image(facts.client, tag, ["nvidia-smi", "-L"], gpus=True)
        listed = [line.strip() for line in ran.output.splitlines() if line.strip().startswith("GPU ")]
        if ran.code == 0 and listed:
            gpu = Result.ok(
                GPU_IN_CONTAINER,
                f"{plural(len(listed), 'GPU')} visible in {tag} with --gpus all: {listed[0]}"
                + (", ..." if len(listed) > 1 else ""),
            )
        else:
            gpu = Result.fail(
                GPU_IN_CONTAINER,
                f"`nvidia-smi -L` in {tag} with --gpus all failed (exit {ran.code}): {last_lines(ran.output)}",
                TOOLKIT_FIX.format(image=tag),
            )
    if "nvidia" in runtimes:
        runtime = Result.ok(NVIDIA_RUNTIME, f"Docker runtimes: {', '.join(runtimes)}")
    elif gpu.status is Status.OK:
        runtime = Result.warn(
            NVIDIA_RUNTIME,
            f"no `nvidia` runtime registered (runtimes: {', '.join(runtimes)}), but --gpus all works "
            "through Docker's own GPU support",
            "Nothing is needed for --gpus; register the runtime (`sudo nvidia-ctk runtime configure "
            "--runtime=docker && sudo systemctl restart docker`) if you also run with --runtime=nvidia.",
        )
    else:
        runtime = Result.fail(
            NVIDIA_RUNTIME,
            f"no `nvidia` runtime registered with Docker (runtimes: {', '.join(runtimes) or 'none'})",
            TOOLKIT_FIX.format(image=tag or "IMAGE"),
        )
    return [runtime, gpu]


def _check_image(facts: _Facts, tag: str, versions: Versions) -> tuple[Result, Backend | None]:
    docker = images.docker_module()
    assert facts.client is not None  # noqa: S101 - the caller checks
    try:
        info = facts.client.api.inspect_image(tag)
    except docker.errors.ImageNotFound:
        return (
            Result.fail(
                IMAGE,
                f"no image {tag} in the engine at {images.docker_host()}",
                f"Build it (`invoke build-image --tag {tag}`) or pull it (`docker pull {tag}`), then run the "
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
        return Result.ok(IMAGE, what), backend
    return (
        Result.warn(
            IMAGE,
            f"{tag} ({size:.0f} MB) declares no Triton release or {LABEL_BACKEND_TORCH} label: comparing "
            f"against {backend.source}",
            "Build the image with `invoke build-image`, whose recipes label the versions they hold.",
        ),
        backend,
    )


def run(
    *,
    image: str | None,
    repository: Path,
    mounts: Sequence[Mount] = (),
    ngc: str | None = None,
    versions: Versions = VERSIONS,
    client: DockerClient | None = None,
) -> Report:
    """Run every check (see the module docstring); never raises for what it finds, it reports it.

    ``mounts`` are what a container of the image needs at run time (CI's stand-ins: the host's site-packages).
    ``ngc``: without an image, the repository's models judged against that release of versions.toml as an image of
    it serves them (its libtorch, its PT2 path), from what its sources state and `nox -s compat` measured.
    """
    facts = _Facts()
    _check_docker(facts, client)
    host = host_driver()
    results = list(facts.results)
    results += _check_gpu(facts, image, host)

    if ngc is not None:
        release = versions.release(ngc)
        backend = Backend.from_release(release, source=f"versions.toml release {release.ngc}, named by --ngc")
    else:
        backend = replace(
            Backend.from_release(versions.triton), named=image is not None, torchvision=image is not None
        )
    image_rows: list[Result] = []
    if image is None:
        skip = "no --image given"
        image_rows = [Result.skip(n, skip, fix="Pass --image TAG to check an image.") for n in IMAGE_CHECKS]
    elif facts.client is None:
        image_rows = [
            Result.skip(n, "Docker is unreachable (see the docker row)", fix=DOCKER_FIX) for n in IMAGE_CHECKS
        ]
    else:
        described, found = _check_image(facts, image, versions)
        image_rows.append(described)
        if found is None:
            image_rows += [Result.skip(n, f"no image {image}", fix=described.fix) for n in IMAGE_CHECKS[1:]]
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
