"""Offline stand-ins for the NGC Triton image, so CI builds and runs our real recipe without any registry.

    debootstrap Debian bookworm -> docker import          (the base:   tritonpt-standin:base-bookworm-<hash>)
      -> testing/standin.Dockerfile + the pytriton server  (the Triton: tritonpt-standin:triton-2.51.0-<hash>)
         + the official libtriton_pytorch.so that tritonpt.backend built for the host's torch
      -> docker/ngc.Dockerfile built FROM the stand-in     (what CI tests: tritonpt-standin:ngc-<hash>)
    base -> testing/standin-pytorch.Dockerfile + host torch  (tritonpt-standin:pytorch-devel-<torch>-<hash>, the
                                                          base on which CI builds docker/pytorch.Dockerfile's
                                                          backend stage)

Nothing is pulled: the base comes from the Debian mirror apt already uses (``/etc/apt/sources.list.d/``), the
server and its libraries from the installed ``nvidia-pytriton`` wheel (server 2.51.0), and the pytorch backend
from :func:`tritonpt.backend.ensure`, the same build `invoke build-backend` makes (no second recipe). Each image
is tagged with a hash of its inputs and is not rebuilt while that tag exists (``--force`` rebuilds).

torch is not in the images (the wheel and its CUDA libraries are gigabytes): run the container with the
host venv's site-packages mounted read-only at ``/opt/tritonpt/site-packages``, see
:func:`run_settings`; the image's ``LD_LIBRARY_PATH`` names its ``torch/lib``, where the backend finds libtorch.
The image's Python does not matter for that: only torch's shared libraries are used.

Needs root (debootstrap), ``debootstrap`` and ``tar`` on PATH, and a Docker engine (``.ci/docker-engine.sh``).
One module of about 630 lines on purpose: the four images share their inputs' hashing, tagging, reuse and
pruning, and a command line that builds them in order.
Usage: ``python -m tritonpt.testing.standin --help``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from tritonpt import backend, image
from tritonpt.backend import BuiltBackend
from tritonpt.client import GRPC_PORT, HTTP_PORT, METRICS_PORT
from tritonpt.errors import ImageError, TritonPtError
from tritonpt.image import MODELS_MOUNT, DockerClient
from tritonpt.options import Mount
from tritonpt.versions import VERSIONS

REPOSITORY = "tritonpt-standin"
"""Every stand-in image is a tag of this repository (``docker images tritonpt-standin`` lists them)."""

SUITE = "bookworm"
PACKAGES = ("python3", "ca-certificates")
"""python3 runs the recipes' health check (and the pytorch recipe's backend build)."""

HERE = Path(str(resources.files("tritonpt.testing")))
STANDIN_DOCKERFILE = HERE / "standin.Dockerfile"
STANDIN_ENTRYPOINT = HERE / "standin-entrypoint.sh"
PYTORCH_DEVEL_DOCKERFILE = HERE / "standin-pytorch.Dockerfile"
BACKEND_STAGE_TAG = f"{REPOSITORY}:pytorch-backend-stage"
"""docker/pytorch.Dockerfile's backend stage as CI builds it on the devel stand-in."""

CONTAINER_SITE_PACKAGES = "/opt/tritonpt/site-packages"
"""Where the host's site-packages goes; the stand-in's LD_LIBRARY_PATH names its torch/lib."""
CONTAINER_MODELS = MODELS_MOUNT
LABEL = image.LABEL_STANDIN
"""Label of the stand-in images (``base`` or ``triton``; images built FROM them inherit it).
``python -m tritonpt.testing.standin --prune`` removes the tags of older inputs."""

_SOURCES = (Path("/etc/apt/sources.list.d"), Path("/etc/apt/sources.list"))


@dataclass(frozen=True, kw_only=True)
class StandinImage:
    """One stand-in image as it is in the engine."""

    role: str
    """``base``, ``triton`` or ``ngc``."""
    tag: str
    id: str
    size: int
    cached: bool
    """True when the tag already existed and nothing was built."""
    seconds: float


@dataclass(frozen=True, kw_only=True)
class RunSettings:
    """How a container from a stand-in (or from our recipe built on one) must be run."""

    mounts: tuple[Mount, ...]
    environment: Mapping[str, str] = field(default_factory=dict)
    ports: tuple[int, ...] = (HTTP_PORT, GRPC_PORT, METRICS_PORT)

    def docker_run(self, tag: str, command: Sequence[str] = ()) -> list[str]:
        """A ``docker run`` command line with random 127.0.0.1 host ports, for people and logs."""
        args = ["docker", "run", "--rm", "-d"]
        for port in self.ports:
            args += ["-p", f"127.0.0.1::{port}"]
        for mount in self.mounts:
            args += ["-v", mount.volume()]
        for key, value in self.environment.items():
            args += ["-e", f"{key}={value}"]
        return [*args, tag, *command]


# --- Inputs -------------------------------------------------------------------------------------------------


def debian_mirror(sources: Sequence[Path] = _SOURCES, suite: str = SUITE) -> str:
    """The first Debian mirror apt uses for ``suite`` (deb822 ``.sources`` or one-line ``.list`` files)."""
    files: list[Path] = []
    for source in sources:
        if source.is_dir():
            files += sorted(p for p in source.iterdir() if p.suffix in {".sources", ".list"})
        elif source.is_file():
            files.append(source)
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace")
        if path.suffix == ".sources":
            for stanza in text.split("\n\n"):
                fields = _deb822(stanza)
                if "deb" in fields.get("types", "").split() and suite in fields.get("suites", "").split():
                    uris = fields.get("uris", "").split()
                    if uris:
                        return uris[0]
        else:
            for line in text.splitlines():
                words = [w for w in line.split() if not w.startswith("[")]
                if len(words) >= 3 and words[0] == "deb" and words[2] == suite:
                    return words[1]
    where = ", ".join(str(s) for s in sources)
    msg = f"Cannot find a Debian mirror for {suite} in {where}: pass one with --mirror http://deb.debian.org/debian."
    raise ImageError(msg)


def _deb822(stanza: str) -> dict[str, str]:
    fields: dict[str, str] = {}
    for line in stanza.splitlines():
        if line.startswith("#") or ":" not in line or line[:1].isspace():
            continue
        key, _, value = line.partition(":")
        fields[key.strip().lower()] = value.strip()
    return fields


def pytriton_server() -> tuple[Path, Path]:
    """``(<site-packages>/pytriton/tritonserver, <site-packages>/nvidia_pytriton.libs)`` of the installed wheel."""
    package = backend.package_folder("pytriton")
    if package is None:
        msg = (
            f"Cannot find the nvidia-pytriton package in {sys.prefix}: install nvidia-pytriton=="
            f"{VERSIONS.embedded.pytriton} in this environment (it carries the tritonserver the stand-in uses)."
        )
        raise ImageError(msg)
    server, libs = package / "tritonserver", package.parent / "nvidia_pytriton.libs"
    for needed in (server / "bin" / "tritonserver", libs):
        if not needed.exists():
            msg = f"Cannot find {needed}: the nvidia-pytriton install in {package.parent} is incomplete; reinstall it."
            raise ImageError(msg)
    return server, libs


def torch_site_packages() -> Path:
    """The site-packages folder holding the torch this process would import (without importing it)."""
    torch = backend.package_folder("torch")
    if torch is None:
        msg = f"Cannot find torch in {sys.prefix}: the stand-in container needs the host's torch mounted."
        raise ImageError(msg)
    return torch.parent


def host_mounts(*, site_packages: Path | None = None) -> tuple[Mount, ...]:
    """What a container of a stand-in image needs besides the repository: the host's site-packages."""
    site = site_packages or torch_site_packages()
    return (Mount(source=site.resolve(), target=CONTAINER_SITE_PACKAGES),)


def run_settings(repository: Path, *, site_packages: Path | None = None) -> RunSettings:
    """Mounts and environment for running a stand-in based container on ``repository``.

    - the model repository, read-only, at ``/models`` (it must be readable by uid 1000, the image's user);
    - the host's site-packages, read-only, at ``/opt/tritonpt/site-packages``: the backend's libtorch is its
      ``torch/lib`` (on the image's ``LD_LIBRARY_PATH``), which finds its CUDA libraries beside it.
    """
    return RunSettings(
        mounts=(
            Mount(source=repository.resolve(), target=CONTAINER_MODELS),
            *host_mounts(site_packages=site_packages),
        ),
    )


def ngc_build_args(triton_tag: str, built: BuiltBackend) -> dict[str, str]:
    """Overrides for building docker/ngc.Dockerfile on the stand-in, with labels that tell the truth about it."""
    return {
        "TRITON_IMAGE": triton_tag,
        "TRITON_NGC": VERSIONS.embedded.ngc,
        "TRITON_SERVER_VERSION": VERSIONS.embedded.server,
        # The stand-in's pytorch backend was built against the host's torch, mounted at run time; no CUDA.
        "TRITON_BACKEND_TORCH": built.torch_version,
        "TRITON_BACKEND_REF": built.ref,
        "TRITON_BACKEND_COMMIT": built.commit,
        "TRITON_BACKEND_VARIANT": built.variant,
        "TRITON_CUDA": "none",
        "TRITON_MIN_DRIVER": "none",
    }


# --- Building -----------------------------------------------------------------------------------------------


def _digest(payload: object) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:12]


def _existing(client: DockerClient, tag: str) -> dict[str, object] | None:
    try:
        return dict(client.api.inspect_image(tag))
    except image.docker_module().errors.ImageNotFound:
        return None


def _result(client: DockerClient, role: str, tag: str, *, cached: bool, seconds: float) -> StandinImage:
    info = client.api.inspect_image(tag)
    return StandinImage(
        role=role, tag=tag, id=str(info["Id"]), size=int(info["Size"]), cached=cached, seconds=seconds
    )


WHY_NOT = "cannot build the stand-ins: "
"""How ``--why-not`` starts its line, where other output (a library's warning) may surround it."""


def _cannot_debootstrap() -> str:
    """Why this process cannot build the base (a tool missing, not root), with the command that fixes it; ""."""
    missing = [tool for tool in ("debootstrap", "tar") if shutil.which(tool) is None]
    if missing:
        return (
            f"Cannot build the stand-in base without {' and '.join(missing)}: install it "
            f"(sudo apt-get install -y {' '.join(missing)}), then run this again."
        )
    if os.geteuid() != 0:
        return (
            "Cannot run debootstrap as a normal user: build the stand-in base once as root "
            "(sudo python -m tritonpt.testing.standin), then run this again."
        )
    return ""


def why_not_base(client: DockerClient, mirror: str | None = None) -> str:
    """Why the stand-in base is neither built nor buildable here, with the command that fixes it; "" when it is
    built, or this process can build it."""
    try:
        tag = base_tag(mirror or debian_mirror())
    except ImageError as exc:
        return f"No Debian mirror to build the stand-in base from: {exc}"
    if _existing(client, tag) is not None:
        return ""
    reason = _cannot_debootstrap()
    return f"{tag} is not built. {reason}" if reason else ""


def base_tag(mirror: str) -> str:
    """``tritonpt-standin:base-bookworm-<hash of suite, variant, packages, mirror>``."""
    inputs = {"suite": SUITE, "variant": "minbase", "packages": sorted(PACKAGES), "mirror": mirror}
    return f"{REPOSITORY}:base-{SUITE}-{_digest(inputs)}"


def build_base(
    client: DockerClient,
    *,
    mirror: str | None = None,
    workdir: Path | None = None,
    force: bool = False,
    on_line: image.OnLine | None = None,
) -> StandinImage:
    """Debian bookworm (minbase + PACKAGES) from debootstrap, imported as an image; skipped if already there."""
    mirror = mirror or debian_mirror()
    tag = base_tag(mirror)
    if not force and _existing(client, tag) is not None:
        return _result(client, "base", tag, cached=True, seconds=0.0)
    reason = _cannot_debootstrap()
    if reason:
        raise ImageError(reason)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="tritonpt-standin-", dir=workdir) as tmp:
        root = Path(tmp) / "rootfs"
        command = [
            "debootstrap",
            "--variant=minbase",
            f"--include={','.join(PACKAGES)}",
            SUITE,
            str(root),
            mirror,
        ]
        _stream_process(command, on_line=on_line, what=f"debootstrap {SUITE} from {mirror}")
        # Downloaded .deb files and package lists are half the size and no use in the image.
        for leftover in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for path in (root / leftover).glob("*"):
                if path.is_file():
                    path.unlink()
        _import_rootfs(client, root, tag, mirror=mirror)
    return _result(client, "base", tag, cached=False, seconds=time.perf_counter() - started)


def _stream_process(command: Sequence[str], *, on_line: image.OnLine | None, what: str) -> None:
    recent: list[str] = []
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace"
    ) as proc:
        assert proc.stdout is not None  # noqa: S101 - stdout=PIPE above
        for raw in proc.stdout:
            line = raw.rstrip()
            recent = [*recent[-19:], line]
            if on_line is not None and line:
                on_line(line)
        code = proc.wait()
    if code != 0:
        tail = "\n".join(recent[-12:])
        msg = f"Cannot {what}: `{' '.join(command)}` exited with {code}.\nLast output:\n{tail}"
        raise ImageError(msg)


def _import_rootfs(client: DockerClient, root: Path, tag: str, *, mirror: str) -> None:
    repository, _, version = tag.partition(":")
    changes = [
        f"LABEL {LABEL}=base",
        f"LABEL {LABEL}.mirror={mirror}",
        "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8",
        'CMD ["/bin/bash"]',
    ]
    with subprocess.Popen(
        ["tar", "--numeric-owner", "-C", str(root), "-c", "."], stdout=subprocess.PIPE
    ) as tar:
        assert tar.stdout is not None  # noqa: S101 - stdout=PIPE above
        stream = tar.stdout

        def chunks() -> Iterator[bytes]:
            while block := stream.read(1 << 20):
                yield block

        client.api.import_image(
            src=chunks(), stream_src=True, repository=repository, tag=version, changes=changes
        )
        code = tar.wait()
    if code != 0:
        msg = f"Cannot import {root} as {tag}: tar exited with {code}."
        raise ImageError(msg)


def _place(source: Path, target: Path) -> None:
    """Hard-link ``source`` to ``target`` (same file system), else copy it."""
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def stage_triton_context(
    dest: Path, *, pytorch_backend: BuiltBackend, pt2_backend: BuiltBackend | None = None
) -> dict[str, str]:
    """Lay out the stand-in's build context in ``dest``; return ``{relative path: sha256}`` of every file.

    The context holds only what the image gets: the recipe, the entrypoint, ``tritonserver/`` (bin, lib,
    caches/local) and ``pytorch/`` (the built ``libtriton_pytorch.so`` and its ``build.json``). Never the
    repository.
    """
    server, libs = pytriton_server()
    _place(STANDIN_DOCKERFILE, dest / "Dockerfile")
    _place(STANDIN_ENTRYPOINT, dest / "standin-entrypoint.sh")
    for folder in ("bin", "caches/local"):
        for path in sorted((server / folder).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                _place(path, dest / "tritonserver" / path.relative_to(server))
    for path in sorted(libs.iterdir()):
        if path.is_file():
            _place(path, dest / "tritonserver" / "lib" / path.name)
    _place(pytorch_backend.library, dest / "pytorch" / backend.LIBRARY)
    _place(pytorch_backend.directory / backend.MANIFEST, dest / "pytorch" / backend.MANIFEST)
    (dest / backend.PT2_NAME).mkdir()  # the PT2 build under the second name, as the embedded server gets it
    if pt2_backend is not None:
        _place(pt2_backend.library, dest / backend.PT2_NAME / backend.PT2_LIBRARY)
        _place(pt2_backend.directory / backend.MANIFEST, dest / backend.PT2_NAME / backend.MANIFEST)
    digests: dict[str, str] = {}
    for path in sorted(dest.rglob("*")):
        if path.is_file():
            with path.open("rb") as handle:
                digests[str(path.relative_to(dest))] = hashlib.file_digest(handle, "sha256").hexdigest()
    return digests


def triton_build_args(base: str, built: BuiltBackend, pt2: BuiltBackend | None = None) -> dict[str, str]:
    """The values of testing/standin.Dockerfile's ARGs (versions.toml ``[embedded]`` and the built backends)."""
    return {
        "PT2_BACKEND": f"{pt2.origin.build} {pt2.commit}" if pt2 is not None else "",  # r26.05[+tritonpt.1]
        "STANDIN_BASE": base,
        "PYTRITON_VERSION": VERSIONS.embedded.pytriton,
        "EMBEDDED_SERVER_VERSION": VERSIONS.embedded.server,
        "EMBEDDED_NGC": VERSIONS.embedded.ngc,
        "SITE_PACKAGES": CONTAINER_SITE_PACKAGES,
        "BACKEND_REF": built.ref,
        "BACKEND_COMMIT": built.commit,
        "BACKEND_TORCH": built.torch_version,
    }


def build_triton(
    client: DockerClient,
    *,
    base: str,
    pytorch_backend: BuiltBackend,
    pt2_backend: BuiltBackend | None = None,
    workdir: Path | None = None,
    force: bool = False,
    no_cache: bool = False,
    on_line: image.OnLine | None = None,
) -> StandinImage:
    """The Triton stand-in, FROM ``base``, holding ``pytorch_backend`` (and ``pt2_backend`` as backends/pt2/);
    skipped when the same inputs exist."""
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="tritonpt-standin-ctx-", dir=workdir) as tmp:
        context = Path(tmp)
        digests = stage_triton_context(context, pytorch_backend=pytorch_backend, pt2_backend=pt2_backend)
        args = triton_build_args(base, pytorch_backend, pt2_backend)
        tag = f"{REPOSITORY}:triton-{VERSIONS.embedded.server}-{_digest({'files': digests, 'args': args})}"
        if not force and _existing(client, tag) is not None:
            return _result(client, "triton", tag, cached=True, seconds=0.0)
        image.run_build(client, tag=tag, build_args=args, context=context, no_cache=no_cache, on_line=on_line)
    return _result(client, "triton", tag, cached=False, seconds=time.perf_counter() - started)


def build_ngc_on(
    client: DockerClient,
    *,
    triton: str,
    pytorch_backend: BuiltBackend,
    force: bool = False,
    no_cache: bool = False,
    on_line: image.OnLine | None = None,
) -> StandinImage:
    """The project's docker/ngc.Dockerfile built FROM the Triton stand-in (what CI runs and tests)."""
    recipe = image.recipe_path("ngc").read_text(encoding="utf-8")
    overrides = ngc_build_args(triton, pytorch_backend)
    args = image.build_args_for(recipe, overrides=overrides, source="docker/ngc.Dockerfile")
    tag = f"{REPOSITORY}:ngc-{_digest({'recipe': recipe, 'args': args})}"
    if not force and not no_cache and _existing(client, tag) is not None:
        return _result(client, "ngc", tag, cached=True, seconds=0.0)
    started = time.perf_counter()
    built = image.build_image(
        recipe="ngc",
        tag=tag,
        build_args=overrides,
        no_cache=no_cache,
        on_line=on_line,
        client=client,
    )
    return _result(client, "ngc", built.tag, cached=False, seconds=time.perf_counter() - started)


def build_all(
    client: DockerClient | None = None,
    *,
    mirror: str | None = None,
    sources: Path | None = None,
    recipe: bool = True,
    force: bool = False,
    workdir: Path | None = None,
    on_line: image.OnLine | None = None,
) -> list[StandinImage]:
    """Base, Triton stand-in and (with ``recipe``) docker/ngc.Dockerfile on top, each skipped when cached.

    The pytorch backend is :func:`tritonpt.backend.ensure`'s CPU build for this torch (built if not cached), and
    so is the PT2 build it carries as backends/pt2/ (for torch_aoti models, as the embedded server serves them).
    """
    client = client or image.docker_client()
    step = on_line or (lambda _: None)
    pytorch_backend = backend.ensure(sources=sources, step=step)
    pt2_backend = backend.ensure(sources=sources, step=step, pins=VERSIONS.pt2.build)
    base = build_base(client, mirror=mirror, workdir=workdir, force=force, on_line=on_line)
    triton = build_triton(
        client,
        base=base.tag,
        pytorch_backend=pytorch_backend,
        pt2_backend=pt2_backend,
        workdir=workdir,
        force=force,
        on_line=on_line,
    )
    built = [base, triton]
    if recipe:
        built.append(
            build_ngc_on(
                client, triton=triton.tag, pytorch_backend=pytorch_backend, force=force, on_line=on_line
            )
        )
    return built


def build_pytorch_devel(
    client: DockerClient,
    *,
    base: str,
    workdir: Path | None = None,
    force: bool = False,
    on_line: image.OnLine | None = None,
) -> StandinImage:
    """The stand-in of the pytorch recipe's devel base: ``base`` + g++ + Python headers + the host's torch.

    Tagged by the torch build (version and git commit) and the recipe text, not by hashing gigabytes of files.
    """
    torch = backend.Torch.locate()
    recipe = PYTORCH_DEVEL_DOCKERFILE.read_text(encoding="utf-8")
    inputs = {"base": base, "torch": [torch.version, torch.git_version], "recipe": recipe}
    tag = f"{REPOSITORY}:pytorch-devel-{torch.version.replace('+', '-')}-{_digest(inputs)}"
    if not force and _existing(client, tag) is not None:
        return _result(client, "pytorch-devel", tag, cached=True, seconds=0.0)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="tritonpt-standin-devel-", dir=workdir) as tmp:
        context = Path(tmp)
        _place(PYTORCH_DEVEL_DOCKERFILE, context / "Dockerfile")
        for path in sorted(torch.root.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                _place(path, context / "torch" / path.relative_to(torch.root))
        args = {"STANDIN_BASE": base, "TORCH_VERSION": torch.version}
        image.run_build(client, tag=tag, build_args=args, context=context, on_line=on_line)
    return _result(client, "pytorch-devel", tag, cached=False, seconds=time.perf_counter() - started)


def build_pytorch_backend_stage(
    client: DockerClient,
    *,
    devel: str,
    sources: Path | None = None,
    on_line: image.OnLine | None = None,
) -> image.BuiltImage:
    """docker/pytorch.Dockerfile's ``backend`` stage (CPU variant) built FROM the devel stand-in, as CI runs it."""
    return image.build_image(
        recipe="pytorch",
        tag=BACKEND_STAGE_TAG,
        target="backend",
        build_args={"PYTORCH_DEVEL_IMAGE": devel, "BACKEND_VARIANT": "cpu"},
        sources=sources,
        on_line=on_line,
        client=client,
    )


def prune(client: DockerClient, *, keep: Sequence[str]) -> list[str]:
    """Remove every ``tritonpt-standin`` tag except ``keep`` (older inputs pile up otherwise), and untagged
    images carrying the stand-in label; return what was removed."""
    removed: list[str] = []
    keep = [*keep, BACKEND_STAGE_TAG]  # one fixed tag, overwritten by each build: it cannot pile up
    for found in client.images.list(name=REPOSITORY):
        for tag in found.tags:
            if tag.startswith(f"{REPOSITORY}:") and tag not in keep:
                client.images.remove(tag, noprune=False)
                removed.append(tag)
    # Untagged leftovers of failed builds on a stand-in inherit its label; nothing else of the host's is touched.
    pruned = client.images.prune(filters={"dangling": True, "label": LABEL})
    removed += [entry["Deleted"] for entry in pruned.get("ImagesDeleted") or [] if "Deleted" in entry]
    return removed


# --- Command line -------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m tritonpt.testing.standin``: build the stand-ins and print their tags."""
    parser = argparse.ArgumentParser(
        prog="python -m tritonpt.testing.standin",
        description=(
            "Build, without any registry, a Debian bookworm base (debootstrap + docker import), a Triton "
            f"stand-in on it (server {VERSIONS.embedded.server} from nvidia-pytriton {VERSIONS.embedded.pytriton} "
            "and the official libtriton_pytorch.so built for this torch) and docker/ngc.Dockerfile built on that. "
            "Images already built from the same inputs are reused. Needs root and a Docker engine."
        ),
        epilog=(
            "Run a container from the last tag with the host's torch mounted:\n  "
            + " ".join(run_settings_example())
            + "\nThen: curl -f http://127.0.0.1:<port of 8000>/v2/health/ready"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--mirror", help="Debian mirror for debootstrap (default: the one apt uses)")
    parser.add_argument(
        "--sources",
        type=Path,
        help=f"folder of the pytorch backend's source tarballs (default ${backend.SOURCES_ENV}, else GitHub)",
    )
    parser.add_argument(
        "--no-recipe", action="store_true", help="do not build docker/ngc.Dockerfile on the stand-in"
    )
    parser.add_argument(
        "--pytorch-devel",
        action="store_true",
        help="also build the stand-in of the pytorch recipe's devel base (Debian + g++ + this torch)",
    )
    parser.add_argument(
        "--force", action="store_true", help="rebuild even when images with the same inputs exist"
    )
    parser.add_argument(
        "--workdir", type=Path, help="where the rootfs and build contexts go (default: $TMPDIR)"
    )
    parser.add_argument("--prune", action="store_true", help="then remove stand-in images of older inputs")
    parser.add_argument("--quiet", action="store_true", help="do not print build output")
    parser.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    parser.add_argument(
        "--print-mount",
        action="store_true",
        help="print only the --mount a container of a stand-in needs (the host's site-packages), and build nothing",
    )
    parser.add_argument(
        "--print-tag",
        choices=("base", "triton", "ngc", "pytorch-devel"),
        help="print only this image's tag on stdout (for scripts: the ngc one is what the container lane runs)",
    )
    parser.add_argument(
        "--why-not",
        action="store_true",
        help=f"print why the stand-ins cannot be built here (no engine, no debootstrap, not root) with the fix, "
        f"on a line that starts '{WHY_NOT}', or nothing when they can, and build nothing",
    )
    options = parser.parse_args(argv)
    if options.print_mount:
        print(" ".join(m.volume() for m in host_mounts()))
        return 0
    if options.why_not:
        try:
            reason = why_not_base(image.docker_client(), options.mirror)
        except TritonPtError as exc:
            reason = str(exc)
        print(f"{WHY_NOT}{reason}" if reason else "")
        return 0

    def echo(line: str) -> None:
        print(f"  {line}", file=sys.stderr)

    try:
        client = image.docker_client()
        built = build_all(
            client,
            mirror=options.mirror,
            sources=options.sources,
            recipe=not options.no_recipe,
            force=options.force,
            workdir=options.workdir,
            on_line=None if options.quiet else echo,
        )
        if options.pytorch_devel:
            built.append(
                build_pytorch_devel(
                    client,
                    base=built[0].tag,
                    workdir=options.workdir,
                    force=options.force,
                    on_line=None if options.quiet else echo,
                )
            )
        removed = prune(client, keep=[b.tag for b in built]) if options.prune else []
    except TritonPtError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if options.print_tag:
        tag = next((b.tag for b in built if b.role == options.print_tag), None)
        if tag is None:
            print(
                f"error: --print-tag {options.print_tag} needs --pytorch-devel, which builds it.",
                file=sys.stderr,
            )
            return 2
        print(tag)
    elif options.json:
        print(json.dumps({"images": [vars(b) for b in built], "removed": removed}, indent=2))
    else:
        for b in built:
            state = "cached" if b.cached else f"built in {b.seconds:.1f}s"
            print(f"{b.role:7} {b.tag}  {b.size / 1e6:.0f} MB  {state}")
        for tag in (r for r in removed if not r.startswith("sha256:")):
            print(f"removed {tag}")
        if untagged := sum(r.startswith("sha256:") for r in removed):
            print(f"removed {untagged} untagged stand-in layers")
    return 0


def run_settings_example() -> list[str]:
    """The documented ``docker run`` line, with placeholders."""
    settings = RunSettings(
        mounts=(
            Mount(source=Path("<model repository>"), target=CONTAINER_MODELS),
            Mount(source=Path("<venv>/lib/python3.X/site-packages"), target=CONTAINER_SITE_PACKAGES),
        ),
    )
    return settings.docker_run("<tag>")


if __name__ == "__main__":
    sys.exit(main())
