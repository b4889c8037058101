"""Stage "image": build a Triton + PyTorch 2.9 image from a recipe in ``docker/`` (``ngc`` or ``pytorch``).

    check Docker answers -> build args (versions.toml, then --build-arg overrides)
      -> docker build through docker-py (output streamed line by line) -> the image read back (id, size, labels)

Every ``ARG`` of a recipe comes from :data:`tritonpt.versions.VERSIONS` (:func:`recipe_build_args`). The recipes
are ``docker/`` in a checkout and ``tritonpt/recipes/`` in the wheel (:func:`recipes_folder`); the build context is
the recipe alone, or the pytorch recipe's backend sources (:func:`stage_context`), never the repository. What the
recipes are, credentials and secrets: docs/guide/ci-and-gpu.md.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import re
import shutil
import socket
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib import metadata, resources
from pathlib import Path
from types import ModuleType
from typing import Any, TypeAlias, cast

from tritonpt.errors import DockerUnavailable, ImageError
from tritonpt.options import RECIPES
from tritonpt.versions import VERSIONS, TritonRelease, Versions

DockerClient: TypeAlias = Any
"""A ``DockerClient``. docker-py ships no type information, and from the repository root mypy would
resolve ``docker`` to a folder of that name, so it is typed as Any here."""

PACKAGED_RECIPES = "recipes"
"""Where the wheel carries docker/ inside the package (pyproject.toml, ``force-include``)."""
CHECKOUT_RECIPES = Path(__file__).resolve().parents[2] / "docker"
"""docker/ at the top of a checkout (src/tritonpt/image.py -> the repository root)."""


def recipes_folder() -> Path:
    """The recipes: the installed package's ``tritonpt/recipes/`` (a wheel), else the checkout's ``docker/``
    (an editable install or ``src`` on the path)."""
    packaged = Path(str(resources.files("tritonpt").joinpath(PACKAGED_RECIPES)))
    return packaged if packaged.is_dir() else CHECKOUT_RECIPES


RECIPES_DIR = recipes_folder()
"""The recipes of this installation (see :func:`recipes_folder`)."""
MODELS_MOUNT = "/models"
"""Where the recipes expect the model repository, mounted read-only; it must be readable by uid 1000."""


LABEL_PREFIX = "io.tritonpt."
"""Our own image and container labels; the OCI ones (``org.opencontainers.image.*``) are set beside them."""
# What the recipes label their images with (read back by the doctor and the container runner).
LABEL_RECIPE = f"{LABEL_PREFIX}recipe"
LABEL_NGC = f"{LABEL_PREFIX}ngc"
LABEL_SERVER = f"{LABEL_PREFIX}triton-server"
LABEL_CUDA = f"{LABEL_PREFIX}cuda"
LABEL_MIN_DRIVER = f"{LABEL_PREFIX}min-driver"
LABEL_BACKEND_TORCH = f"{LABEL_PREFIX}backend-torch"
LABEL_BACKEND_REF = f"{LABEL_PREFIX}backend-ref"
LABEL_BACKEND_COMMIT = f"{LABEL_PREFIX}backend-commit"
LABEL_BACKEND_VARIANT = f"{LABEL_PREFIX}backend-variant"
LABEL_PT2_BACKEND = f"{LABEL_PREFIX}pt2-backend"
"""The PT2 build installed under the second backend name (backends/pt2/), as ``<ref> <commit>``: images whose
server predates Triton 26.03 serve torch_aoti models through it (CI's stand-in carries it)."""
# What our own containers carry, so that they can be found and removed.
LABEL_HARNESS = f"{LABEL_PREFIX}harness"
LABEL_SESSION = f"{LABEL_PREFIX}session"
LABEL_DOCTOR = f"{LABEL_PREFIX}doctor"
LABEL_STANDIN = f"{LABEL_PREFIX}standin"

DEFAULT_DOCKER_HOST = "unix:///var/run/docker.sock"
MIN_API_VERSION = "1.41"
"""Docker Engine API of Docker 20.10 (Debian 12's docker.io), the oldest engine this is used with."""

_ARG_RE = re.compile(r"^\s*ARG\s+([A-Za-z_][A-Za-z0-9_]*)", re.MULTILINE)
_TAG_RE = re.compile(r"^[a-z0-9]+(?:[._/-][a-z0-9]+)*(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?$")

OnLine = Callable[[str], None]


@dataclass(frozen=True, kw_only=True)
class BuiltImage:
    """An image as the engine reports it after a build (or for any tag, see :func:`describe`)."""

    tag: str
    id: str
    size: int
    """Bytes, as ``docker image inspect`` reports ``Size``."""
    labels: Mapping[str, str] = field(default_factory=dict)
    """The ``io.tritonpt.*`` labels read back from the image."""
    recipe: str = ""
    build_args: Mapping[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    """Wall time of the build; 0 for an image that was only described."""

    @property
    def size_mb(self) -> float:
        return self.size / 1e6


# --- Docker -------------------------------------------------------------------------------------------------


def docker_host() -> str:
    """The engine address docker-py will use (``DOCKER_HOST`` or the local socket)."""
    return os.environ.get("DOCKER_HOST", DEFAULT_DOCKER_HOST)


def docker_module() -> ModuleType:
    """docker-py, imported when a stage needs it (``import tritonpt.image`` stays cheap)."""
    return importlib.import_module("docker")


def engine_errors() -> tuple[type[BaseException], ...]:
    """What docker-py raises when the engine refuses, fails or is gone (requests' errors are not DockerException)."""
    import requests  # noqa: PLC0415 - docker-py's transport

    return (docker_module().errors.DockerException, requests.exceptions.RequestException)


def docker_client(*, timeout: int = 60) -> DockerClient:
    """A client for a Docker engine that answers, or :class:`DockerUnavailable` saying what to do."""
    import requests  # noqa: PLC0415 - only needed here

    docker = docker_module()

    host = docker_host()
    # A local socket is probed with our own connection: docker-py leaves its socket open when connect()
    # fails (a ResourceWarning, an error under pytest's filterwarnings), and its automatic API-version
    # detection connects inside the constructor.
    reason = _unix_socket_problem(host, timeout=min(timeout, 5)) if host.startswith("unix://") else None
    if reason is None:
        probe = docker.from_env(version=MIN_API_VERSION, timeout=timeout)
        try:
            probe.ping()
        except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
            reason = str(exc).strip() or type(exc).__name__
        finally:
            probe.close()
    if reason is not None:
        msg = (
            f"Cannot reach a Docker engine at {host}, as {reason}. Start Docker (on a Debian/Ubuntu CI "
            f"machine, as root: .ci/docker-engine.sh) or set DOCKER_HOST to an engine that runs."
        )
        raise DockerUnavailable(msg)
    return docker.from_env(timeout=timeout)


def _unix_socket_problem(host: str, *, timeout: float) -> str | None:
    """Why nothing listens on a ``unix://`` address, or None when something accepts connections."""
    path = host.removeprefix("unix://")
    if not Path(path).exists():
        return f"{path} does not exist (no engine started)"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        try:
            sock.connect(path)
        except OSError as exc:
            return f"connecting to {path} failed ({exc.strerror or exc})"
    return None


# --- Recipes and build arguments ----------------------------------------------------------------------------


def recipe_path(recipe: str, recipes_dir: Path = RECIPES_DIR) -> Path:
    """``docker/<recipe>.Dockerfile`` (``tritonpt/recipes/`` in a wheel), checked to exist."""
    path = recipes_dir / f"{recipe}.Dockerfile"
    if not path.is_file():
        known = ", ".join(
            sorted(p.name.removesuffix(".Dockerfile") for p in recipes_dir.glob("*.Dockerfile"))
        )
        msg = f"Cannot find the recipe {path}: the recipes in {recipes_dir} are {known}."
        raise ImageError(msg)
    return path


def declared_args(dockerfile: str) -> list[str]:
    """The names of every ``ARG`` in a Dockerfile's text, in order, without repeats."""
    return list(dict.fromkeys(_ARG_RE.findall(dockerfile)))


def derived_build_args(versions: Versions = VERSIONS) -> dict[str, str]:
    """Build arguments computed from versions.toml that ``Versions.build_args()`` does not carry.

    - ``PYTORCH_DEVEL_IMAGE``: the ``-devel`` twin of the ``pytorch/pytorch`` runtime image (same torch, same
      /opt/conda, plus the CUDA toolkit and compilers), used to compile the pytorch backend.
    - ``EMBEDDED_SERVER_VERSION`` / ``EMBEDDED_NGC``: the Triton server the nvidia-pytriton wheel carries and the
      NGC release it was taken from (versions.toml ``[embedded]``).
    - ``PYTORCH_BACKEND_REF`` / ``PYTORCH_BACKEND_COMMIT``: the pinned pytorch_backend source (versions.toml
      ``[backend]``) the recipe builds with :mod:`tritonpt.backend`; ``BACKEND_VARIANT``: ``gpu``.
    - ``PT2_BACKEND_REF`` / ``PT2_BACKEND_COMMIT``: the PT2 build's pytorch_backend (versions.toml ``[pt2]``), built
      beside it as backends/pt2/; ``PT2_FLAVOR``: "" (stock) or ``+<patch_set>`` (ours, :func:`pt2_flavor_arg`).
    - ``TRITONPT_VERSION``: this package's version, for the ``org.opencontainers.image.version`` label.
    """
    try:
        own_version = metadata.version("tritonpt")
    except metadata.PackageNotFoundError:
        own_version = "0+unknown"
    return {
        "PYTORCH_DEVEL_IMAGE": versions.pytorch.image.replace("-runtime", "-devel"),
        "EMBEDDED_SERVER_VERSION": versions.embedded.server,
        "EMBEDDED_NGC": versions.embedded.ngc,
        "PYTORCH_BACKEND_REF": versions.backend.pytorch_backend.ref,
        "PYTORCH_BACKEND_COMMIT": versions.backend.pytorch_backend.commit,
        "PT2_BACKEND_REF": versions.pt2.build.pytorch_backend.ref,
        "PT2_BACKEND_COMMIT": versions.pt2.build.pytorch_backend.commit,
        "PT2_FLAVOR": "",  # stock; "+<patch_set>" builds ours (pt2_flavor_arg)
        "BACKEND_VARIANT": "gpu",
        "TRITONPT_VERSION": own_version,
    }


def pt2_flavor_arg(pt2_build: str, versions: Versions = VERSIONS) -> dict[str, str]:
    """The ``PT2_FLAVOR`` build argument for a PT2 build (``--pt2-build``): "" stock, ``+tritonpt.1`` patched."""
    return {"PT2_FLAVOR": f"+{versions.pt2.build.patch_set}" if pt2_build == "patched" else ""}


def ngc_release(
    ngc: str | None = None, versions: Versions = VERSIONS, *, purpose: str = "build the ngc recipe"
) -> TritonRelease:
    """The release of versions.toml's table that ``--ngc`` names (an NGC tag or a server version), the default
    when None; an unknown one is refused with what is accepted and what to do (``purpose``: what it was for)."""
    if not ngc:
        return versions.triton
    try:
        return versions.release(ngc)
    except ValueError:
        known = ", ".join(
            f"{r.ngc} (server {r.server}{', torch_aoti' if r.serves_torch_aoti else ''})"
            for r in versions.triton_releases
        )
        msg = (
            f"Cannot {purpose} for --ngc {ngc}: versions.toml's Triton release table has no such "
            f"release. --ngc takes an NGC release (or its server version) of that table: {known}. Pass one of "
            "those, or add the release's row to src/tritonpt/versions.toml ([[triton.releases]], with the facts "
            "of NVIDIA's release notes for it) first."
        )
        raise ImageError(msg) from None


def recipe_build_args(ngc: str | None = None, versions: Versions = VERSIONS) -> dict[str, str]:
    """Every value a recipe may ask for: ``Versions.build_args()`` plus :func:`derived_build_args`."""
    return {**versions.build_args(ngc_release(ngc, versions).ngc), **derived_build_args(versions)}


def build_args_for(
    dockerfile: str,
    *,
    overrides: Mapping[str, str] | None = None,
    available: Mapping[str, str] | None = None,
    source: str = "the recipe",
) -> dict[str, str]:
    """The build arguments to send for one recipe: only those it declares, the user's overrides winning.

    An override the recipe does not declare is an error (it would be silently ignored by the engine).
    """
    declared = declared_args(dockerfile)
    overrides = dict(overrides or {})
    unknown = sorted(set(overrides) - set(declared))
    if unknown:
        msg = (
            f"Cannot pass {', '.join(unknown)} to {source}: it declares only "
            f"{', '.join(declared) or 'no build arguments'}."
        )
        raise ImageError(msg)
    values = {**(available if available is not None else recipe_build_args()), **overrides}
    return {name: values[name] for name in declared if name in values}


def default_tag(recipe: str, versions: Versions = VERSIONS, *, ngc: str | None = None) -> str:
    """``tritonpt:ngc-25.10`` (``tritonpt:ngc-26.05`` for ``--ngc 26.05``) or ``tritonpt:pytorch-2.9.1``."""
    key = ngc_release(ngc, versions).ngc if recipe == "ngc" else versions.pytorch.torch
    return f"{versions.image_repository}:{recipe}-{key}"


# --- Building -----------------------------------------------------------------------------------------------


# What docker/pytorch.Dockerfile's backend stage runs: tritonpt.backend and what it imports, nothing else.
BACKEND_MODULES = (
    "__init__.py",
    "caches.py",
    "errors.py",
    "fetch.py",
    "options.py",
    "scratch.py",
    "stopping.py",
    "versions.py",
    "versions.toml",
)
BACKEND_PACKAGE = "backend"
CONTEXT_RECIPES = frozenset({"pytorch"})
"""Recipes that build from a context (:func:`stage_context`); the others are sent as the Dockerfile alone."""


def stage_context(
    dest: Path, *, recipe_text: str, sources: Path | None = None, on_line: OnLine | None = None
) -> None:
    """The pytorch recipe's build context in ``dest``: ``Dockerfile``, ``python/tritonpt/`` (the backend build),
    ``python/cmake/`` (this environment's CMake wheel, as PyPI ships it) and ``third_party/`` (the pinned
    sources from ``sources`` / $TRITONPT_SOURCES, else downloaded; every sha256 checked)."""

    from tritonpt import backend  # noqa: PLC0415

    (dest / "Dockerfile").write_text(recipe_text, encoding="utf-8")
    package = Path(__file__).resolve().parent
    (dest / "python" / "tritonpt").mkdir(parents=True)
    for name in BACKEND_MODULES:
        shutil.copy2(package / name, dest / "python" / "tritonpt" / name)
    shutil.copytree(
        package / BACKEND_PACKAGE,
        dest / "python" / "tritonpt" / BACKEND_PACKAGE,
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    cmake = backend.package_folder("cmake")
    if cmake is None:
        msg = f'Cannot build the pytorch recipe without CMake in this environment: pip install "cmake=={VERSIONS.backend.cmake}".'
        raise ImageError(msg)
    shutil.copytree(
        cmake,
        dest / "python" / "cmake",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    (dest / "third_party").mkdir()
    for pins in (VERSIONS.backend, VERSIONS.pt2.build):  # the TorchScript build and the PT2 one beside it
        for path in backend.fetch_sources(
            backend.sources_folder(sources), step=on_line or (lambda _: None), backend=pins
        ).values():
            shutil.copy2(path, dest / "third_party" / path.name)


def run_build(
    client: DockerClient,
    *,
    tag: str,
    build_args: Mapping[str, str],
    dockerfile: str | None = None,
    context: Path | None = None,
    dockerfile_name: str = "Dockerfile",
    target: str | None = None,
    no_cache: bool = False,
    on_line: OnLine | None = None,
) -> str:
    """Run one ``docker build`` through the Engine API, streaming its output; return the image id.

    Give either ``dockerfile`` (its text is the whole build context) or ``context`` (a folder; the Dockerfile
    is ``context/dockerfile_name``). Raises :class:`ImageError` with the last output lines on failure.
    """
    docker = docker_module()
    if not _TAG_RE.fullmatch(tag):
        msg = f"Cannot use {tag!r} as an image tag: write it as name[:tag] in lower case, e.g. tritonpt:ngc-25.10."
        raise ImageError(msg)
    kwargs: dict[str, Any] = {
        "tag": tag,
        "buildargs": dict(build_args),
        "nocache": no_cache,
        "rm": True,
        "forcerm": True,
        "decode": True,
        "timeout": None,
    }
    if target:
        kwargs["target"] = target
    if dockerfile is not None:
        kwargs["fileobj"] = io.BytesIO(dockerfile.encode("utf-8"))
    elif context is not None:
        kwargs["path"] = str(context)
        kwargs["dockerfile"] = dockerfile_name
    else:  # pragma: no cover - a programming error
        msg = "run_build needs a dockerfile or a context"
        raise TypeError(msg)

    recent: list[str] = []
    image_id = ""
    try:
        for chunk in client.api.build(**kwargs):
            for line in _chunk_lines(chunk):
                recent = [*recent[-29:], line]
                if on_line is not None:
                    on_line(line)
            if "error" in chunk:
                detail = str(chunk.get("error", "")).strip()
                tail = "\n".join(recent[-15:])
                msg = f"Cannot build {tag}: {detail}\nLast build output:\n{tail}"
                raise ImageError(msg)
            aux = chunk.get("aux")
            if isinstance(aux, dict) and "ID" in aux:
                image_id = str(aux["ID"])
    except docker.errors.APIError as exc:
        tail = "\n".join(recent[-15:])
        msg = (
            f"Cannot build {tag}, as the engine refused: {exc.explanation or exc}\nLast build output:\n{tail}"
        )
        raise ImageError(msg) from exc
    if not image_id:
        image_id = str(client.api.inspect_image(tag)["Id"])
    return image_id


def _chunk_lines(chunk: Mapping[str, Any]) -> list[str]:
    """The human-readable lines of one JSON message of the build stream."""
    text = chunk.get("stream")
    if text is None and "status" in chunk:  # pulling a base image
        text = " ".join(str(chunk[k]) for k in ("id", "status", "progress") if chunk.get(k))
    if not text:
        return []
    return [line.rstrip() for line in str(text).splitlines() if line.strip()]


def describe(
    client: DockerClient,
    tag: str,
    *,
    recipe: str = "",
    build_args: Mapping[str, str] | None = None,
    seconds: float = 0.0,
) -> BuiltImage:
    """Read an image back from the engine: id, size and its ``io.tritonpt.*`` labels."""
    docker = docker_module()
    try:
        info = client.api.inspect_image(tag)
    except docker.errors.ImageNotFound as exc:
        msg = f"Cannot find the image {tag} in the engine at {docker_host()}: build it first (invoke build-image)."
        raise ImageError(msg) from exc
    labels = cast("dict[str, str] | None", (info.get("Config") or {}).get("Labels")) or {}
    return BuiltImage(
        tag=tag,
        id=str(info["Id"]),
        size=int(info.get("Size") or 0),
        labels={k: v for k, v in sorted(labels.items()) if k.startswith(LABEL_PREFIX)},
        recipe=recipe or labels.get(LABEL_RECIPE, ""),
        build_args=dict(build_args or {}),
        seconds=seconds,
    )


def build_image(
    *,
    recipe: str = "ngc",
    tag: str | None = None,
    no_cache: bool = False,
    build_args: Mapping[str, str] | None = None,
    ngc: str | None = None,
    on_line: OnLine | None = None,
    client: DockerClient | None = None,
    recipes_dir: Path = RECIPES_DIR,
    target: str | None = None,
    sources: Path | None = None,
) -> BuiltImage:
    """Build ``docker/<recipe>.Dockerfile`` and return what the engine reports about the result.

    ``build_args`` override the values from
    versions.toml for this build; ``ngc`` picks another supported Triton release (``25.09``). ``target`` builds
    one stage only (the pytorch recipe's ``backend``); ``sources`` is the pytorch backend's tarball folder.
    """
    if recipe not in RECIPES:
        msg = f"Cannot build the recipe {recipe!r}: choose one of {', '.join(RECIPES)}."
        raise ImageError(msg)
    path = recipe_path(recipe, recipes_dir)
    overrides = dict(build_args or {})
    text = path.read_text(encoding="utf-8")
    args = build_args_for(text, overrides=overrides, available=recipe_build_args(ngc), source=str(path))
    tag = tag or default_tag(recipe, ngc=ngc)
    own = client is None
    client = client or docker_client()
    try:
        started = time.perf_counter()
        with contextlib.ExitStack() as stack:
            context: Path | None = None
            if recipe in CONTEXT_RECIPES:
                context = Path(
                    stack.enter_context(tempfile.TemporaryDirectory(prefix=f"tritonpt-{recipe}-context-"))
                )
                stage_context(context, recipe_text=text, sources=sources, on_line=on_line)
            run_build(
                client,
                tag=tag,
                build_args=args,
                dockerfile=None if context else text,
                context=context,
                target=target,
                no_cache=no_cache,
                on_line=on_line,
            )
        return describe(client, tag, recipe=recipe, build_args=args, seconds=time.perf_counter() - started)
    finally:
        if own:
            client.close()
