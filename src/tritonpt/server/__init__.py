"""A running Triton, one interface whatever runs it: a local process, a container or a URL.

    server = create("local", repository=Path("model_repository"), log_path=Path("reports/tritonserver.log"))
    with server:                                  # started on free ports, always torn down
        server.wait_models_ready(["resnet18"])    # Triton's own load error per model if one fails
        server.model_runtime("resnet18").library  # "libtriton_pytorch.so", the official backend

The checks only see :class:`~tritonpt.server.base.Server` and its :class:`~tritonpt.server.base.Endpoints`.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from pathlib import Path

from tritonpt.backend import BuiltBackend, Sanitizer
from tritonpt.errors import HINT, ServerError
from tritonpt.options import FREE_PORTS, GPUS, TARGETS, Gpus, Mount, Ports, Pt2Build, Target, resolve_target
from tritonpt.server import upload as upload_module
from tritonpt.server.base import Endpoints, ModelRuntime, ModelState, Server, ServerKind
from tritonpt.server.local import LocalServer, TritonFlags, TritonInstall
from tritonpt.server.url import UrlServer

__all__ = [
    "GPUS",
    "TARGETS",
    "Endpoints",
    "Gpus",
    "LocalServer",
    "ModelRuntime",
    "ModelState",
    "Server",
    "ServerKind",
    "Target",
    "TritonFlags",
    "TritonInstall",
    "UrlServer",
    "create",
]

CONTAINER_MODULE = "tritonpt.server.container"


def create(
    target: Target = "auto",
    *,
    repository: Path,
    url: str | None = None,
    grpc_url: str | None = None,
    metrics_url: str | None = None,
    image: str | None = None,
    tritonserver: Path | str | None = None,
    log_path: Path | None = None,
    gpus: Gpus = "auto",
    mounts: Sequence[Mount] = (),
    pytorch_backend: BuiltBackend | None = None,
    pt2_backend: BuiltBackend | None = None,
    memory: str | None = None,
    models: Sequence[str] = (),
    upload: bool = False,
    replace: bool = False,
    pt2_build: Pt2Build = "stock",
    sanitizer: Sanitizer | None = None,
    ports: Ports = FREE_PORTS,
) -> Server:
    """The server a target names, not started yet.

    ``auto`` picks ``url`` when a URL is given, ``container`` when an image is given, else ``local``.
    ``container`` needs ``tritonpt.server.container.ContainerServer(repository=, image=, log_path=, gpus=,
    mounts=, memory=)``; ``gpus`` (``auto``, ``all``, ``none``), ``mounts`` and ``memory`` (a limit such as ``"2g"``)
    are for that target only, ``pytorch_backend``
    (a built backend; default: the cached one for this torch) and ``pt2_build`` (which PT2 build serves
    torch_aoti models: the cache's stock one, or the patched one) and ``sanitizer`` (serve the cache's builds
    instrumented with it, its runtime preloaded) for ``local``. ``models``: the models a started
    server loads (a shard's; default every model of the repository); a server at a URL loads what it loads, or,
    with ``upload``, the repository's models (those of ``models``) sent through its load API and unloaded after
    (``replace``: also where it serves a model of the same name). ``ports``: the host ports a started server
    listens on (default: free ones picked at start).
    """
    load = tuple(models) or ("*",)
    target = resolve_target(target, url=url, image=image)
    if upload and target != "url":
        msg = f"Cannot upload models to a {target} server: --upload sends them to a server at a URL (give --url)."
        raise ServerError(msg)
    if target == "url":
        if not url:
            msg = "Cannot use target 'url' without a URL; give the server's HTTP URL, e.g. http://127.0.0.1:8000."
            raise ServerError(msg)
        uploads = upload_module.uploads(repository, models) if upload else ()
        return UrlServer(url, grpc=grpc_url, metrics_url=metrics_url, uploads=uploads, replace=replace)
    if target == "local":
        return LocalServer(
            TritonFlags(
                model_repository=repository,
                load_model=load,
                http_port=ports.http,
                grpc_port=ports.grpc,
                metrics_port=ports.metrics,
            ),
            tritonserver=tritonserver,
            log_path=log_path,
            pytorch_backend=pytorch_backend,
            pt2_backend=pt2_backend,
            pt2_build=pt2_build,
            sanitizer=sanitizer,
        )
    try:
        module = importlib.import_module(CONTAINER_MODULE)
    except ModuleNotFoundError as exc:
        if exc.name != CONTAINER_MODULE:
            raise
        msg = (
            f"Cannot run Triton in a container, as {CONTAINER_MODULE} is not part of this installation.\n"
            f"{HINT} use target 'local' (a tritonserver process) or 'url' (a server you started)."
        )
        raise ServerError(msg) from None
    server = module.ContainerServer(
        repository=repository,
        image=image,
        log_path=log_path,
        gpus=gpus,
        mounts=mounts,
        memory=memory,
        flags=TritonFlags(model_repository=repository, load_model=load),
        host_ports=ports,
    )
    if not isinstance(server, Server):
        msg = f"{CONTAINER_MODULE}.ContainerServer must build a tritonpt.server.base.Server, not {server!r}."
        raise TypeError(msg)
    return server
