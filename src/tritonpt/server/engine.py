"""The Docker engine around our containers: GPUs for them, their labels and cleanup, their logs.

gpu_requests        what ``--gpus all`` becomes for docker-py, when the engine can hand GPUs out
reaper_or_labels    testcontainers' Ryuk where its image is in the engine, else cleanup by our labels
session_labels      ``io.tritonpt.harness`` and a per-process ``io.tritonpt.session`` on every container
remove_leftovers    exited containers of earlier sessions (a killed run without Ryuk leaves them)
at exit             servers nobody stopped are stopped, whatever else carries our session is removed
remove_when_back    for a run that ends while the engine is away: remove its container once it answers
LogFollower         ``docker logs --follow`` copied into a file as it comes (readable when the engine is gone)
"""

from __future__ import annotations

import atexit
import contextlib
import os
import threading
import time
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from testcontainers.core.config import testcontainers_config
from testcontainers.core.labels import SESSION_ID

from tritonpt import image
from tritonpt.errors import HINT, ServerStartError, TritonPtError
from tritonpt.image import DockerClient, engine_errors
from tritonpt.options import Gpus
from tritonpt.server import reaper

HARNESS_LABEL = image.LABEL_HARNESS
HARNESS = "integration"
SESSION_LABEL = image.LABEL_SESSION
"""Per process: testcontainers' session id, so ``docker ps --filter label=...`` and Ryuk agree."""
LEFTOVER_STATUSES = ("exited", "dead")
"""Containers of other sessions removed at start: finished ones only (a running one may be another run's)."""
NVIDIA_DEVICE = Path("/dev/nvidiactl")
"""Present on a host whose NVIDIA driver is loaded."""
TOOLKIT_HINT = (
    "install the NVIDIA Container Toolkit and register it with Docker (`sudo nvidia-ctk runtime configure "
    "--runtime=docker && sudo systemctl restart docker`), then check the host with `invoke doctor --image {image}`"
    "; or run on the CPU with gpus 'none' (pytest: --gpus none)."
)
RYUK_DISABLED_ENV = "TESTCONTAINERS_RYUK_DISABLED"
REAP_WITHIN_S = 600.0
"""How long reap_later()'s process waits for an engine that went away to come back."""


class Stoppable(Protocol):
    """What the exit hook stops: a server this process started and has not stopped."""

    def stop(self) -> None: ...


# --- GPUs -----------------------------------------------------------------------------------------------------


def gpu_requests(client: DockerClient, gpus: Gpus, *, image_tag: str) -> list[Any]:
    """The ``device_requests`` for ``gpus``: every GPU (``docker run --gpus all``) or none.

    ``auto`` asks for them when the engine has the ``nvidia`` runtime registered, or is this machine's and the
    NVIDIA driver is loaded here; ``all`` fails, with the toolkit to install, when neither holds.
    """
    if gpus == "none":
        return []
    runtimes = sorted((client.info().get("Runtimes") or {}).keys())
    local_engine = image.docker_host().startswith("unix://")
    driver_here = local_engine and NVIDIA_DEVICE.exists()
    if "nvidia" not in runtimes and not driver_here:
        if gpus == "auto":
            return []
        msg = (
            f"Cannot give the container GPUs (gpus 'all'), as the Docker engine at {image.docker_host()} has no "
            f"`nvidia` runtime (runtimes: {', '.join(runtimes) or 'none'}) and "
            + (
                f"this host has no {NVIDIA_DEVICE} (no NVIDIA driver loaded)."
                if local_engine
                else "it is remote."
            )
            + f"\n{HINT} "
            + TOOLKIT_HINT.format(image=image_tag)
        )
        raise ServerStartError(msg)
    docker = image.docker_module()
    return [docker.types.DeviceRequest(count=-1, capabilities=[["gpu"]])]


# --- Ryuk and our own cleanup ---------------------------------------------------------------------------------


@contextlib.contextmanager
def reaper_or_labels(client: DockerClient) -> Iterator[bool]:
    """Around a container start: Ryuk as configured, or off when its image is missing and nobody chose.

    Yields whether Ryuk is in use. testcontainers' setting is process-wide, so it is restored afterwards:
    other testcontainers users in this process keep their own behaviour.
    """
    config = testcontainers_config
    if config.ryuk_disabled:
        yield False
        return
    if RYUK_DISABLED_ENV in os.environ or _has_image(client, config.ryuk_image):
        yield True
        return
    config.ryuk_disabled = True
    try:
        yield False
    finally:
        config.ryuk_disabled = False


def _has_image(client: DockerClient, tag: str) -> bool:
    try:
        client.images.get(tag)
    except image.docker_module().errors.ImageNotFound:
        return False
    return True


def first_words(exc: BaseException) -> str:
    """The innermost operating-system reason behind a connection error ("No such file or directory")."""
    pending: list[object] = [exc]
    while pending:
        item = pending.pop(0)
        if isinstance(item, OSError) and item.strerror:
            return str(item.strerror)
        if isinstance(item, BaseException):
            pending += [*item.args, item.__cause__, item.__context__]
    return type(exc).__name__


def session_labels() -> dict[str, str]:
    """The labels every container of this process carries."""
    return {HARNESS_LABEL: HARNESS, SESSION_LABEL: SESSION_ID}


def remove_leftovers(client: DockerClient) -> list[str]:
    """Remove exited containers of earlier sessions (a killed run without Ryuk leaves them); return their ids."""
    docker = image.docker_module()
    filters = {"label": [f"{HARNESS_LABEL}={HARNESS}"], "status": list(LEFTOVER_STATUSES)}
    removed = []
    # another session may remove one between the listing and its inspection: skip it, it is gone
    for found in client.containers.list(all=True, filters=filters, ignore_removed=True):
        if found.labels.get(SESSION_LABEL) == SESSION_ID:
            continue
        with contextlib.suppress(docker.errors.NotFound):
            found.remove(force=True)
            removed.append(str(found.id))
    return removed


LIVE: weakref.WeakSet[Stoppable] = weakref.WeakSet()
"""Servers of this process that have not been stopped (the exit hook stops them)."""
_HOOKED = False


def hook_exit() -> None:
    global _HOOKED  # noqa: PLW0603 - one atexit hook per process
    if not _HOOKED:
        atexit.register(_at_exit)
        _HOOKED = True


def _at_exit() -> None:
    """Stop servers nobody stopped (their logs are written), then remove whatever else carries our session."""
    failures: tuple[type[BaseException], ...] = (TritonPtError, OSError, *engine_errors())
    for server in list(LIVE):
        with contextlib.suppress(*failures):
            server.stop()
    reaper.remove_session(SESSION_ID)
    reaper.release()  # this process cleaned up itself: its tether (if it has one) ends without acting


def remove_when_back(container_id: str, *, within: float = REAP_WITHIN_S) -> None:
    """Remove a container as soon as the engine answers, trying every second for ``within`` seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            client = image.docker_client(timeout=10)
        except TritonPtError:
            time.sleep(1.0)
            continue
        try:
            with contextlib.suppress(image.docker_module().errors.NotFound):
                client.api.remove_container(container_id, force=True)
        except engine_errors():
            time.sleep(1.0)
        else:
            return
        finally:
            client.close()


class LogFollower(threading.Thread):
    """``docker logs --follow`` into a file until the container stops (or the engine goes away)."""

    def __init__(self, client: DockerClient, container_id: str, path: Path) -> None:
        super().__init__(name="tritonpt-container-log", daemon=True)
        self._client, self._id, self._path = client, container_id, path
        self.whole = False
        """The stream ended with the container, so the file holds its whole log (no need to ask for it again)."""

    def run(self) -> None:
        with contextlib.suppress(*engine_errors(), OSError), self._path.open("ab") as out:
            for chunk in self._client.api.logs(self._id, stdout=True, stderr=True, stream=True, follow=True):
                out.write(chunk)
                out.flush()
            self.whole = True
