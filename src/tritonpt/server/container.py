"""Triton in a container: an image run by Docker through testcontainers, its ports published on 127.0.0.1.

    ContainerServer(repository=, image=, gpus=)    a Server like the others; start() returns once it is ready:
      the image (from the engine, never pulled), /models mounted read-only, tritonserver on 0.0.0.0:8000-8002
      inside, published on random host ports (or those asked for), our labels, GPUs (auto | all | none)
    verdicts  docker inspect: exited with code N | killed by signal S | OOMKilled | removed | the engine gone
    stop()    SIGTERM, the whole container log to log_path, the container removed (reap_later() without an engine)
Every container carries our labels: what a killed process left is removed without Ryuk (tritonpt.server.reaper).
"""

from __future__ import annotations

import contextlib
import re
import signal
import stat
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import astuple, replace
from pathlib import Path
from typing import Any, ClassVar

from testcontainers.core.config import testcontainers_config
from testcontainers.core.container import DockerContainer
from testcontainers.core.exceptions import ContainerStartException
from testcontainers.core.labels import SESSION_ID
from testcontainers.core.wait_strategies import LogMessageWaitStrategy

from tritonpt import image, scratch, stopping
from tritonpt.backend import PT2_NAME, Origin
from tritonpt.client import GRPC_PORT, HTTP_PORT, METRICS_PORT, Endpoints
from tritonpt.errors import HINT, ServerError, ServerStartError
from tritonpt.image import DockerClient
from tritonpt.options import FREE_PORTS, GPUS, Gpus, Mount, Ports
from tritonpt.repository import pt2_models, write_served_copy
from tritonpt.server import engine, reaper
from tritonpt.server.base import Server, ServerKind, State
from tritonpt.server.local import TritonFlags
from tritonpt.server.logtext import STARTED_LINES, holding_all
from tritonpt.server.ports import require_free
from tritonpt.versions import VERSIONS

CONTAINER_MODELS = image.MODELS_MOUNT
"""Where the model repository is mounted (read-only), as the recipes expect."""
PT2_SOURCE_MOUNT = "/models-source"
"""Where the repository itself goes when /models holds the copy a pre-26.03 server serves torch_aoti models from."""

ROOT_USERS = frozenset({"", "0", "root"})
NGC_USER = (1000, 1000)
"""triton-server in NGC images and in docker/ngc.Dockerfile; assumed for a user given by name."""
SHOWN_PATHS = 5
SIGNAL_EXIT = 128
"""Docker's exit code for a process ended by signal N is 128 + N (137: SIGKILL, 143: SIGTERM)."""
ENGINE_GONE = "went away with its Docker engine, which no longer answers"
FOLLOWER_JOIN_S = 5.0


# --- What runs in the container -------------------------------------------------------------------------------


def container_flags(flags: TritonFlags) -> TritonFlags:
    """``flags`` for inside the container: /models, every address, Triton's usual ports, the image's backends.

    Everything else (explicit model control with ``--load-model=*``, strict readiness, exit-on-error, no
    auto-complete, ...) stays as given, so the container runs what LocalServer runs.
    """
    return replace(
        flags,
        model_repository=Path(CONTAINER_MODELS),
        backend_directory=None,  # the image's own /opt/tritonserver/backends
        address="0.0.0.0",  # noqa: S104 - inside the container; the host side is bound to 127.0.0.1
        http_port=HTTP_PORT,
        grpc_port=GRPC_PORT,
        metrics_port=METRICS_PORT,
    )


def started_pattern(flags: TritonFlags) -> re.Pattern[str]:
    """One regular expression that matches a log holding every "Started ..." line these flags lead to, in any
    order (:func:`tritonpt.server.logtext.holding_all`). An endpoint turned off with ``--allow-<name>=false``
    logs no line.
    """
    off = {key for key in STARTED_LINES if f"--allow-{key}=false" in flags.extra}
    return holding_all(line for key, line in STARTED_LINES.items() if key not in off)


def image_user(user: str) -> tuple[int, int] | None:
    """``(uid, gid)`` an image's ``Config.User`` runs as, or None for root (which reads everything)."""
    name, _, group = user.partition(":")
    if name in ROOT_USERS:
        return None
    if not name.isdigit():
        return NGC_USER  # a name we cannot resolve without running the image
    uid = int(name)
    return uid, int(group) if group.isdigit() else uid


def unreadable_paths(root: Path, uid: int, gid: int) -> list[Path]:
    """Paths under ``root`` (itself included) that ``uid``/``gid`` cannot read: folders need r and x, files r.

    Judged from the mode bits as the kernel would for a user without supplementary groups; below a folder
    it cannot enter, nothing more is listed.
    """
    found: list[Path] = []
    blocked: list[Path] = []
    for path in [root, *sorted(root.rglob("*"))]:
        if any(path.is_relative_to(folder) for folder in blocked):
            continue
        try:
            info = path.stat()
        except OSError:  # a dangling link: Triton reports it if it matters
            continue
        if info.st_uid == uid:
            read, enter = stat.S_IRUSR, stat.S_IXUSR
        elif info.st_gid == gid:
            read, enter = stat.S_IRGRP, stat.S_IXGRP
        else:
            read, enter = stat.S_IROTH, stat.S_IXOTH
        needed = read | enter if stat.S_ISDIR(info.st_mode) else read
        if info.st_mode & needed != needed:
            found.append(path)
            if stat.S_ISDIR(info.st_mode):
                blocked.append(path)
    return found


def check_readable(repository: Path, user: str) -> None:
    """Raise ``ServerStartError`` when the image's user cannot read the whole repository.

    Permissions are the user's to change: we neither chmod their files nor copy the repository (a copy
    costs the size of every model at each start and would hide that ``docker run -v`` fails the same way).
    """
    who = image_user(user)
    if who is None:
        return
    uid, gid = who
    bad = unreadable_paths(repository, uid, gid)
    if not bad:
        return
    shown = []
    for path in bad[:SHOWN_PATHS]:
        info = path.stat()
        shown.append(f"    {path} (mode {stat.S_IMODE(info.st_mode):04o}, owner {info.st_uid}:{info.st_gid})")
    more = [f"    ... and {len(bad) - SHOWN_PATHS} more"] if len(bad) > SHOWN_PATHS else []
    msg = "\n".join(
        [
            f"Cannot serve {repository} from the container, as its user (uid {uid}, gid {gid}) cannot read "
            f"{len(bad)} path(s) in it:",
            *shown,
            *more,
            f"{HINT} make the repository readable for everyone (`chmod -R a+rX {repository}`; pytest's tmp_path "
            f"folders are 0700) or give it to uid {uid}; tritonpt does not change the permissions of your files.",
        ]
    )
    raise ServerStartError(msg)


# --- The container ----------------------------------------------------------------------------------------------


class BoundContainer(DockerContainer):
    """A ``DockerContainer`` whose published ports listen on one host address only.

    ``with_exposed_ports`` publishes on every interface (0.0.0.0); docker-py takes ``(host_ip, host_port)``
    for a binding, and ``(host_ip, None)`` picks a random port on that address.
    """

    def __init__(self, image_tag: str, *, bind_address: str) -> None:
        super().__init__(image_tag)
        self.bind_address = bind_address

    def _configure(self) -> None:
        """testcontainers' hook, run in ``start()`` right before the container is created."""
        # testcontainers types the values as `int | None`; docker-py accepts the (address, port) tuple too.
        bindings: dict[str, Any] = self.ports
        for port, host_port in list(bindings.items()):
            if not isinstance(host_port, tuple):
                bindings[port] = (self.bind_address, host_port)


class ContainerServer(Server):
    """Triton run from an image, with the model repository mounted read-only at /models.

    - ``gpus``: ``auto`` hands every GPU to the container when the engine can (nvidia runtime, or the NVIDIA
      driver on this host), ``all`` demands them, ``none`` never asks.
    - ``flags``: tritonserver flags (default :class:`TritonFlags`); repository, addresses, ports and backend
      directory are replaced by the container's (see :func:`container_flags`), ``repository`` is what is mounted.
    - ``log_path``: where the container's log is copied as it runs, and written whole by ``stop()`` (default: a
      temporary file chosen at start); :meth:`log_tail` reads ``docker logs`` while the engine answers.
    - ``bind_address``: the host address the ports are published on; ``0.0.0.0`` for an engine on another
      machine (the endpoints then use the engine's host).
    - ``mounts``: more bind mounts (read-only unless said otherwise), for images that need host files at run
      time; CI's offline stand-ins need the host's site-packages (``python -m tritonpt_ci.standin
      --print-mount``).
    - ``memory``: a memory limit (``docker run --memory``, e.g. ``"2g"``), swap included; None: the host's.
      A server that outgrows it is killed by the kernel, and the verdict says OOM.
    - ``host_ports``: the host ports 8000, 8001 and 8002 are published on (0: a random one, the default).
    - ``program``: ``tritonserver``, or the images' ``tritonpt-serve`` (admin APIs behind ``$TRITONPT_ADMIN_KEY``,
      which ``environment`` sets in the container, visible to ``docker inspect``).
    """

    kind: ClassVar[ServerKind] = "container"

    def __init__(
        self,
        *,
        repository: Path,
        image: str | None,
        log_path: Path | None = None,
        gpus: Gpus = "auto",
        flags: TritonFlags | None = None,
        mounts: Sequence[Mount] = (),
        bind_address: str = "127.0.0.1",
        shm_size: str = "1g",
        memory: str | None = None,
        start_timeout: float = 240.0,
        stop_timeout: int = 45,
        program: str = "tritonserver",
        environment: Mapping[str, str] | None = None,
        host_ports: Ports = FREE_PORTS,
    ) -> None:
        super().__init__(start_timeout=start_timeout)
        self.host_ports = host_ports
        self.program, self.environment = program, dict(environment or {})
        if not image:
            msg = (
                "Cannot run Triton in a container without an image: pass its tag (pytest --image TAG). Build one "
                "with `invoke build-image --recipe ngc`, or offline `python -m tritonpt_ci.standin`."
            )
            raise ServerError(msg)
        if gpus not in GPUS:
            msg = f"Cannot use gpus {gpus!r}: choose one of {', '.join(GPUS)}."
            raise ServerError(msg)
        self.repository = repository
        self.image = image
        self.gpus: Gpus = gpus
        self.flags = container_flags(flags or TritonFlags(model_repository=repository))
        self.mounts = (Mount(source=repository.absolute(), target=CONTAINER_MODELS), *mounts)
        self.bind_address = bind_address
        self.shm_size = shm_size
        self.memory = memory
        self.stop_timeout = stop_timeout
        self.gpus_requested = False  # what gpus resolved to at start
        self.reaper = False  # whether testcontainers' Ryuk watches the container (known at start)
        self._log_path = log_path.absolute() if log_path is not None else None
        self._client: DockerClient | None = None
        self._container: BoundContainer | None = None
        self._id: str | None = None
        self._labels: dict[str, str] = {}  # the image's, read at start
        self._ended: str | None = None  # the last verdict of _exit_state, for the hint
        self._follower: engine.LogFollower | None = (
            None  # copies the container's log into log_path as it comes
        )
        self._reaping = False  # reap_later() left a process to remove the container
        self.served_copy: Path | None = None  # the repository as a pre-26.03 server is given it (torch_aoti)
        self._effective_mounts: tuple[Mount, ...] = self.mounts  # what this start mounts

    # --- Server ---------------------------------------------------------------------------------------------------

    @property
    def command(self) -> list[str]:
        """The container's command (the image's entrypoint runs it)."""
        return [self.program, *self.flags.render()]

    @property
    def container_id(self) -> str | None:
        return self._id

    @property
    def log_path(self) -> Path | None:
        """The file the container's log is copied to as it runs (None before ``start()`` without one given)."""
        return self._log_path

    def log_tail(self, lines: int = 40) -> str:
        """``docker logs --tail`` while the container exists; the file ``stop()`` wrote afterwards."""
        if self._client is not None and self._id is not None and self.state is not State.STOPPED:
            with contextlib.suppress(
                *image.engine_errors()
            ):  # without an engine, the copy in log_path has it
                raw: bytes = self._client.api.logs(self._id, stdout=True, stderr=True, tail=lines)
                return raw.decode("utf-8", errors="replace").rstrip("\n")
        return super().log_tail(lines)

    def backend_origin(self) -> Origin | None:
        """From the image's ``io.tritonpt.backend-*`` labels (our recipes set them); None without them."""
        labels = self._labels
        ref = labels.get(image.LABEL_BACKEND_REF)
        if not ref:
            return None
        return Origin(
            ref=ref,
            commit=labels.get(image.LABEL_BACKEND_COMMIT, ""),
            torch=labels.get(image.LABEL_BACKEND_TORCH, ""),
            variant=labels.get(image.LABEL_BACKEND_VARIANT, ""),
        )

    def describe(self) -> str:
        if self._id is None:
            return f"the Triton container of {self.image} (not started)"
        where = f", HTTP {self._endpoints.http}" if self._endpoints else ""
        return f"the Triton container {self._id[:12]} ({self.image}{where})"

    def _exit_state(self) -> str | None:
        self._ended = self._verdict()
        return self._ended

    def _verdict(self) -> str | None:
        """What ``docker inspect`` says of the container; an engine that refuses connections is a verdict too."""
        if self._client is None or self._id is None:
            return "was never started"
        import requests  # noqa: PLC0415 - docker-py's transport

        docker = image.docker_module()
        try:
            state = self._client.api.inspect_container(self._id)["State"]
        except docker.errors.NotFound:
            return "was removed"
        except requests.exceptions.ConnectionError as exc:  # the socket is gone or refuses: no engine runs
            return f"{ENGINE_GONE} ({image.docker_host()}: {engine.first_words(exc)})"
        except (docker.errors.DockerException, requests.exceptions.RequestException):
            return None  # the engine did not answer this once (a timeout): no verdict
        if state.get("Status") in ("created", "running", "paused", "restarting"):
            return None
        code = int(state.get("ExitCode") or 0)
        if state.get("OOMKilled"):
            return f"was killed for lack of memory (OOMKilled, exit code {code})"
        if code > SIGNAL_EXIT:  # Docker reports a process ended by signal N as 128 + N
            with contextlib.suppress(ValueError):
                return f"was killed by signal {signal.Signals(code - SIGNAL_EXIT).name} (exit code {code})"
        return f"exited with code {code}"

    def _verdict_hint(self) -> str | None:
        """The engine that went away and the OOM kill say more than the log's last lines (a SIGTERM notice)."""
        ended = self._ended or ""
        if ended.startswith(ENGINE_GONE):
            return (
                "the Docker engine stopped (its service was stopped or restarted, or dockerd was killed) and took "
                "the container with it; start the engine again (as root: .ci/docker-engine.sh, or `systemctl start "
                f"docker`). The log up to then is in {self._log_path}; the stopped container is removed once the engine "
                "answers again (by a process this run leaves for it, or by the next start)."
            )
        if "OOMKilled" in ended:
            limit = (
                f"its limit is {self.memory}"
                if self.memory
                else "it had no limit of its own, so the host's ran out"
            )
            return (
                f"the kernel killed Triton for memory ({limit}); give the container more (ContainerServer(memory=...), "
                "pytest --memory) or send smaller requests. `docker inspect` shows OOMKilled=true."
            )
        return None

    def _default_hint(self) -> str:
        short = (self._id or "<id>")[:12]
        if "signal SIGKILL" in (self._ended or ""):
            return (
                f"SIGKILL comes from outside the server: `docker kill {short}`, `docker rm -f`, a supervisor, or the "
                f"host's OOM killer (`dmesg | grep -i -e oom -e killed`); the log up to then is in {self._log_path}."
            )
        where = f" to {self._log_path}" if self._log_path else ""
        return (
            f"the container's whole log is written{where} as it runs (`docker logs {short}` too); rerun with "
            "TritonFlags(log_verbose=1) for more detail."
        )

    # --- start and stop -------------------------------------------------------------------------------------------

    def _launch(self) -> None:
        """Run the container; it is up once Triton logged its three start lines (readiness is the template's)."""
        self._id = self._container = None
        self._client = client = image.docker_client()
        docker = image.docker_module()
        repository = self._repository_folder(self.repository, "in a container")
        try:
            info = client.api.inspect_image(self.image)
        except docker.errors.ImageNotFound:
            msg = (
                f"Cannot start Triton in a container, as the image {self.image} is not in the Docker engine at "
                f"{image.docker_host()} (images are never pulled for this).\n"
                f"{HINT} build it with `invoke build-image --recipe ngc` (or offline, from the stand-ins, "
                "`python -m tritonpt_ci.standin`) and pass the tag it prints."
            )
            raise ServerStartError(msg) from None
        config = info.get("Config") or {}
        self._labels = dict(config.get("Labels") or {})
        check_readable(repository, str(config.get("User") or ""))
        self._effective_mounts = self.mounts
        self._mounts_for_pt2(repository)
        devices = engine.gpu_requests(client, self.gpus, image_tag=self.image)
        self.gpus_requested = bool(devices)

        self._log_path = self._log_file(self._log_path, "tritonserver-container-")
        self._log_path.write_bytes(b"")  # no stale log from an earlier run; fails early if not writable

        engine.remove_leftovers(client)
        container = BoundContainer(self.image, bind_address=self.bind_address)
        require_free(self.host_ports, self.bind_address)
        container.with_exposed_ports(HTTP_PORT, GRPC_PORT, METRICS_PORT).with_command(self.command)
        for inside, outside in zip(
            (HTTP_PORT, GRPC_PORT, METRICS_PORT), astuple(self.host_ports), strict=True
        ):
            if outside:
                container.with_bind_ports(inside, outside)
        for mount in self._effective_mounts:
            container.with_volume_mapping(mount.source, mount.target, "ro" if mount.read_only else "rw")
        container.with_envs(**self.environment)
        options: dict[str, Any] = {"labels": engine.session_labels(), "shm_size": self.shm_size}
        if self.memory:
            options |= {"mem_limit": self.memory, "memswap_limit": self.memory}  # no swap beyond the limit
        if devices:
            options["device_requests"] = devices
        container.with_kwargs(**options).waiting_for(
            LogMessageWaitStrategy(started_pattern(self.flags))
            .with_startup_timeout(int(self.start_timeout))
            .with_poll_interval(0.2)
        )
        self._container = container
        engine.LIVE.add(self)
        engine.hook_exit()
        with engine.reaper_or_labels(client) as self.reaper:
            if not self.reaper:
                reaper.tether(SESSION_ID)  # what removes the container should this process be killed
            try:
                container.start()
            except (RuntimeError, TimeoutError):
                self._id = self._created_id()
                raise ServerStartError(self.failure(self._not_started_headline())) from None
            except docker.errors.DockerException as exc:
                self._id = self._created_id()
                raise ServerStartError(self._refused(exc)) from exc
        self._id = container.get_container_id()
        self._endpoints = self._published_endpoints()
        self._follower = engine.LogFollower(client, self._id, self._log_path)
        self._follower.start()

    def _mounts_for_pt2(self, repository: Path) -> None:
        """torch_aoti models in an image whose server predates Triton 26.03: as the embedded server gets them
        (LocalServer), through the PT2 build the image carries as backends/pt2/ and a copy of the repository whose
        torch_aoti configs name that backend; the copy (at /models) links into the repository (at
        /models-source), so nothing is copied."""
        server = self._labels.get(image.LABEL_SERVER, "")
        if not pt2_models(repository) or (server and VERSIONS.pt2.native(server)):
            return
        if not self._labels.get(image.LABEL_PT2_BACKEND):
            msg = (
                f"Cannot serve the torch_aoti (PT2) models of {repository} with {self.image}, as its server "
                f"{server or '(version not labelled)'} predates Triton {VERSIONS.pt2.native_ngc} and it carries no "
                f"PT2 build (no {image.LABEL_PT2_BACKEND} label).\n{HINT} serve them from an image of Triton "
                f"{VERSIONS.pt2.native_ngc} or later, or on the embedded server (target local)."
            )
            raise ServerStartError(msg)
        with stopping.ctrl_c_held():
            self.served_copy = Path(tempfile.mkdtemp(prefix="tritonpt-served-"))
        write_served_copy(
            repository, self.served_copy, pt2_backend=PT2_NAME, link_base=Path(PT2_SOURCE_MOUNT)
        )
        for path in [self.served_copy, *self.served_copy.rglob("*")]:
            if not path.is_symlink():
                path.chmod(0o755 if path.is_dir() else 0o644)  # the image's user (uid 1000) reads it
        self._effective_mounts = (
            Mount(source=self.served_copy, target=CONTAINER_MODELS),
            Mount(source=repository.absolute(), target=PT2_SOURCE_MOUNT),
            *self.mounts[1:],
        )

    def server_pid(self) -> int | None:
        """The container's main process (the image execs tritonserver) as this host sees it, when the engine runs
        on this host (a unix socket); None for a remote engine, whose pids are not ours to read."""
        if self._client is None or self._id is None or not image.docker_host().startswith("unix://"):
            return None
        try:
            pid = int(self._client.api.inspect_container(self._id)["State"].get("Pid") or 0)
        except Exception:
            return None
        return pid if pid > 0 and Path(f"/proc/{pid}").is_dir() else None

    def pt2_origin(self) -> Origin | None:
        """The PT2 build the image carries under the second name, when this container serves through it."""
        label = self._labels.get(image.LABEL_PT2_BACKEND, "")
        if self.served_copy is None or not label:
            return None
        build, _, commit = label.partition(" ")
        ref, plus, flavor = build.partition("+")  # "r26.05+tritonpt.1": ours, patched
        return Origin(
            ref=ref,
            commit=commit,
            torch=self._labels.get(image.LABEL_BACKEND_TORCH, ""),
            variant="cpu",
            flavor=f"{plus}{flavor}",
        )

    def reap_later(self) -> None:
        """Leave a small process that removes this container once the engine answers again.

        For a run that ends while the engine does not answer (it stopped, or is stopping its containers): the
        engine keeps the stopped container, and nobody would remove it. The process tries every second for at
        most :data:`REAP_WITHIN_S` seconds, then gives up (the next ``start()`` removes exited leftovers too).
        """
        if self._id is None or self._reaping:
            return
        self._reaping = True
        code = (
            "import sys; from tritonpt.server.engine import remove_when_back; remove_when_back(sys.argv[1])"
        )
        subprocess.Popen(
            [sys.executable, "-c", code, self._id],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # outlives this process and its Ctrl-C
        )

    def _created_id(self) -> str | None:
        try:  # created, maybe not started: testcontainers' public handle on docker-py's container
            wrapped = self._container.get_wrapped_container() if self._container is not None else None
        except ContainerStartException:  # not created yet
            wrapped = None
        return str(wrapped.id) if wrapped is not None and wrapped.id else None

    def _not_started_headline(self) -> str:
        exited = self._exit_state() if self._id else None
        lines = ", ".join(f"'{line}'" for line in STARTED_LINES.values())
        if exited is not None and exited != "was never started":
            return f"{self.describe()} {exited} before Triton logged {lines}"
        return f"{self.describe()} did not log {lines} within {self.start_timeout:.0f} s"

    def _refused(self, exc: BaseException) -> str:
        detail = str(getattr(exc, "explanation", None) or exc).strip()
        msg = f"Cannot start {self.describe()}, as the Docker engine refused: {detail}."
        if self.gpus_requested and re.search(r"device driver|gpu|nvidia", detail, re.IGNORECASE):
            return f"{msg}\n{HINT} {engine.TOOLKIT_HINT.format(image=self.image)}"
        if "ryuk" in detail.lower():
            return (
                f"{msg}\n{HINT} testcontainers' reaper could not start; set {engine.RYUK_DISABLED_ENV}=true (tritonpt "
                f"removes its containers by label) or make {testcontainers_config.ryuk_image} available."
            )
        return msg

    def _published_endpoints(self) -> Endpoints:
        container = self._container
        assert container is not None  # noqa: S101 - set by _start
        wildcard = self.bind_address in ("", "0.0.0.0", "::")  # noqa: S104 - compared, not bound
        host = container.get_container_host_ip() if wildcard else self.bind_address
        return Endpoints.on_host(
            host,
            http_port=container.get_exposed_port(HTTP_PORT),
            grpc_port=container.get_exposed_port(GRPC_PORT),
            metrics_port=container.get_exposed_port(METRICS_PORT),
        )

    def _kill(self) -> None:
        """``docker kill`` (SIGKILL; a paused container is unpaused first, as the engine asks), then what
        ``_terminate`` does: the whole log to ``log_path`` and the container removed."""
        if self._client is not None and self._id is not None:
            docker = image.docker_module()
            with contextlib.suppress(*image.engine_errors()):
                if self._client.api.inspect_container(self._id)["State"].get("Paused"):
                    self._client.api.unpause(self._id)
                with contextlib.suppress(docker.errors.APIError):  # it ended meanwhile
                    self._client.api.kill(self._id)
        self._terminate()

    def _terminate(self) -> None:
        """SIGTERM Triton (``stop_timeout`` s, then SIGKILL), write the whole log to ``log_path``, remove it."""
        if self._client is None:
            return
        engine.LIVE.discard(self)
        client, container = self._client, self._container
        errors = image.engine_errors()
        try:
            if self._id is not None:
                try:
                    client.api.stop(self._id, timeout=self.stop_timeout)
                    follower = self._follower
                    if follower is not None:
                        follower.join(timeout=FOLLOWER_JOIN_S)  # its stream ends with the container
                    if self._log_path is not None and (follower is None or not follower.whole):
                        # the copy was cut off: ask for the whole log (on a busy engine this takes seconds)
                        self._log_path.write_bytes(client.api.logs(self._id, stdout=True, stderr=True))
                except image.docker_module().errors.NotFound:
                    pass  # already gone
                except errors:
                    self.reap_later()  # no engine to remove it now: once one answers again
        finally:
            try:
                if container is not None:
                    with contextlib.suppress(*errors):
                        container.stop(force=True, delete_volume=True)  # removes it, closes its client
            finally:
                client.close()
                if self.served_copy is not None:
                    scratch.remove(self.served_copy)
                    self.served_copy = None
