"""The stand-in of NGC's Triton image, and the project's docker/ngc.Dockerfile built on it.

    base -> standin.Dockerfile + the pytriton server   (the Triton: tritonpt-standin:triton-2.51.0-<hash>)
            + the official libtriton_pytorch.so that tritonpt.backend built for the host's torch
         -> docker/ngc.Dockerfile built FROM the stand-in  (what CI tests: tritonpt-standin:ngc-<hash>)

The server and its libraries come from the installed ``nvidia-pytriton`` wheel (server 2.51.0), the pytorch
backend from :func:`tritonpt.backend.ensure`, the same build `invoke build-backend` makes (no second recipe).
:func:`build_all` builds the base (:mod:`~tritonpt_ci.standin.debian`) and these two, in that order.
"""

from __future__ import annotations

import hashlib
import sys
import tempfile
import time
from pathlib import Path

from tritonpt import backend, image
from tritonpt.backend import BuiltBackend
from tritonpt.errors import ImageError
from tritonpt.image import DockerClient
from tritonpt.versions import VERSIONS
from tritonpt_ci.standin.debian import build_base
from tritonpt_ci.standin.images import HERE, REPOSITORY, StandinImage, digest, existing, image_of, place
from tritonpt_ci.standin.running import CONTAINER_SITE_PACKAGES

STANDIN_DOCKERFILE = HERE / "standin.Dockerfile"
STANDIN_ENTRYPOINT = HERE / "standin-entrypoint.sh"


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


def stage_triton_context(
    dest: Path, *, pytorch_backend: BuiltBackend, pt2_backend: BuiltBackend | None = None
) -> dict[str, str]:
    """Lay out the stand-in's build context in ``dest``; return ``{relative path: sha256}`` of every file.

    The context holds only what the image gets: the recipe, the entrypoint, ``tritonserver/`` (bin, lib,
    caches/local) and ``pytorch/`` (the built ``libtriton_pytorch.so`` and its ``build.json``). Never the
    repository.
    """
    server, libs = pytriton_server()
    place(STANDIN_DOCKERFILE, dest / "Dockerfile")
    place(STANDIN_ENTRYPOINT, dest / "standin-entrypoint.sh")
    for folder in ("bin", "caches/local"):
        for path in sorted((server / folder).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                place(path, dest / "tritonserver" / path.relative_to(server))
    for path in sorted(libs.iterdir()):
        if path.is_file():
            place(path, dest / "tritonserver" / "lib" / path.name)
    place(pytorch_backend.library, dest / "pytorch" / backend.LIBRARY)
    place(pytorch_backend.directory / backend.MANIFEST, dest / "pytorch" / backend.MANIFEST)
    (dest / backend.PT2_NAME).mkdir()  # the PT2 build under the second name, as the embedded server gets it
    if pt2_backend is not None:
        place(pt2_backend.library, dest / backend.PT2_NAME / backend.PT2_LIBRARY)
        place(pt2_backend.directory / backend.MANIFEST, dest / backend.PT2_NAME / backend.MANIFEST)
    digests: dict[str, str] = {}
    for path in sorted(dest.rglob("*")):
        if path.is_file():
            with path.open("rb") as handle:
                digests[str(path.relative_to(dest))] = hashlib.file_digest(handle, "sha256").hexdigest()
    return digests


def triton_build_args(base: str, built: BuiltBackend, pt2: BuiltBackend | None = None) -> dict[str, str]:
    """The values of tritonpt_ci/standin.Dockerfile's ARGs (versions.toml ``[embedded]`` and the built backends)."""
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
        tag = f"{REPOSITORY}:triton-{VERSIONS.embedded.server}-{digest({'files': digests, 'args': args})}"
        if not force and existing(client, tag) is not None:
            return image_of(client, "triton", tag, cached=True, seconds=0.0)
        image.run_build(client, tag=tag, build_args=args, context=context, no_cache=no_cache, on_line=on_line)
    return image_of(client, "triton", tag, cached=False, seconds=time.perf_counter() - started)


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
    tag = f"{REPOSITORY}:ngc-{digest({'recipe': recipe, 'args': args})}"
    if not force and not no_cache and existing(client, tag) is not None:
        return image_of(client, "ngc", tag, cached=True, seconds=0.0)
    started = time.perf_counter()
    built = image.build_image(
        recipe="ngc",
        tag=tag,
        build_args=overrides,
        no_cache=no_cache,
        on_line=on_line,
        client=client,
    )
    return image_of(client, "ngc", built.tag, cached=False, seconds=time.perf_counter() - started)


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
