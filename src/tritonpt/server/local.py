"""A tritonserver process on this machine, started on free ports and always torn down.

    TritonInstall.locate()   which tritonserver: the argument, $TRITONSERVER, PATH, /opt/tritonserver, else
                             the one in the nvidia-pytriton wheel (server 2.51.0, CPU)
    TritonFlags              the tritonserver command line, one field per flag we render
    LocalServer              the process: its own process group, its log in a file, SIGTERM -> wait -> SIGKILL

Its backends are the server's own where they hold libtriton_pytorch.so, else :mod:`tritonpt.backend`'s builds.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import ClassVar, Literal

from tritonpt import backend, scratch, stopping
from tritonpt.backend import BuiltBackend, Sanitizer
from tritonpt.client import Endpoints
from tritonpt.errors import HINT, BackendError, ServerStartError
from tritonpt.options import Ports, Pt2Build
from tritonpt.repository import pt2_models, write_served_copy
from tritonpt.server import waiting
from tritonpt.server.base import Server, ServerKind, State
from tritonpt.server.ports import free_ports, require_free
from tritonpt.versions import VERSIONS

TRITONSERVER_ENV = "TRITONSERVER"
SYSTEM_TRITONSERVER = Path("/opt/tritonserver/bin/tritonserver")
SERVER_LIBRARY = "libtritonserver.so"
GROUP_EXIT_TIMEOUT_S = 10.0
GROUP_POLL_S = 0.05
"""How often a stop looks whether the server's process group is gone (orphans are reaped by init, not by us)."""


@dataclass(frozen=True, kw_only=True)
class TritonInstall:
    """A tritonserver binary and what lies beside it."""

    binary: Path
    version: str  # "2.51.0", or "unknown" when nothing beside the binary says
    backends: Path  # <root>/backends
    libraries: Path | None = None  # nvidia_pytriton.libs, for the wheel's server

    @property
    def official_pytorch(self) -> bool:
        """Whether the server's own backends hold the official LibTorch backend (an NGC install does)."""
        return (self.backends / "pytorch" / backend.LIBRARY).is_file()

    @classmethod
    def locate(cls, explicit: Path | str | None = None) -> TritonInstall:
        """The tritonserver to run: ``explicit`` > ``$TRITONSERVER`` > PATH > /opt/tritonserver > the wheel's."""
        embedded = _embedded_binary()
        candidates: list[tuple[str, Path | None]] = [
            ("the tritonserver argument", Path(explicit) if explicit else None),
            (
                f"${TRITONSERVER_ENV}",
                Path(os.environ[TRITONSERVER_ENV]) if os.environ.get(TRITONSERVER_ENV) else None,
            ),
        ]
        on_path = shutil.which("tritonserver")
        candidates += [
            ("PATH", Path(on_path) if on_path else None),
            ("/opt/tritonserver", SYSTEM_TRITONSERVER if SYSTEM_TRITONSERVER.is_file() else None),
            ("the nvidia-pytriton wheel", embedded),
        ]
        for origin, candidate in candidates:
            if candidate is None:
                continue
            if not candidate.is_file():
                msg = (
                    f"Cannot use the tritonserver named by {origin} ({candidate}), as no such file exists.\n"
                    f"{HINT} give the path of an existing tritonserver binary, or unset it to use the one inside "
                    f"the nvidia-pytriton wheel (pip install nvidia-pytriton=={VERSIONS.embedded.pytriton})."
                )
                raise ServerStartError(msg)
            return cls.at(candidate, embedded=embedded)
        msg = (
            "Cannot find a tritonserver: none given, $TRITONSERVER unset, none on PATH or in /opt/tritonserver, "
            "and the nvidia-pytriton wheel is not installed.\n"
            f"{HINT} pip install nvidia-pytriton=={VERSIONS.embedded.pytriton} (it carries a CPU tritonserver "
            f"{VERSIONS.embedded.server}), or pass the path of a tritonserver binary."
        )
        raise ServerStartError(msg)

    @classmethod
    def at(cls, binary: Path, *, embedded: Path | None = None) -> TritonInstall:
        """Describe the install around ``binary`` (``<root>/bin/tritonserver``)."""
        binary = binary.resolve()
        root = binary.parent.parent
        version_file = root / "TRITON_VERSION"
        is_wheel = embedded is not None and binary == embedded.resolve()
        if version_file.is_file():
            version = version_file.read_text(encoding="utf-8").strip()
        elif is_wheel:
            version = VERSIONS.embedded.server
        else:
            version = "unknown"
        libraries = root.parent.parent / "nvidia_pytriton.libs" if is_wheel else None  # site-packages/...
        return cls(
            binary=binary,
            version=version,
            backends=root / "backends",
            libraries=libraries if libraries is not None and libraries.is_dir() else None,
        )


def _embedded_binary() -> Path | None:
    """``<site-packages>/pytriton/tritonserver/bin/tritonserver``, found without importing pytriton."""
    package = backend.package_folder("pytriton")
    binary = package / "tritonserver" / "bin" / "tritonserver" if package else None
    return binary if binary is not None and binary.is_file() else None


def pytorch_backend_for(
    install: TritonInstall, built: BuiltBackend | None = None, *, sanitizer: Sanitizer | None = None
) -> BuiltBackend | None:
    """The built backend to serve with (the given one, else the cache's stock one, or the one instrumented with
    ``sanitizer``), or None when the server's own backends hold the official one.

    Raises ``ServerStartError`` when neither the server nor the cache has one: nothing else is served.
    """
    if install.official_pytorch and sanitizer is None:
        return None
    if built is not None:
        return built
    try:
        found = backend.find(flavor=backend.STOCK.with_sanitizer(sanitizer))
    except BackendError as exc:
        raise ServerStartError(str(exc)) from exc
    if found is None:
        torch = backend.Torch.locate()
        which = f"one instrumented with the {sanitizer} sanitizer" if sanitizer else "none"
        how = f"`invoke build-backend --sanitize {sanitizer}`" if sanitizer else "`invoke build-backend`"
        msg = (
            f"Cannot serve pytorch_libtorch models with {install.binary}, as its backends folder {install.backends} "
            f"has no pytorch/{backend.LIBRARY} and {which} is built for torch {torch.version} in "
            f"{backend.cache_root() / 'backends'}.\n"
            f"{HINT} build the official backend with {how} (add --sources DIR without GitHub; "
            f"`nox -s integration` does this itself)."
        )
        raise ServerStartError(msg)
    return found


def pt2_backend_for(
    install: TritonInstall,
    built: BuiltBackend | None = None,
    *,
    build: Pt2Build = "stock",
    sanitizer: Sanitizer | None = None,
) -> BuiltBackend:
    """The PT2 build to serve torch_aoti models with on a server older than Triton 26.03 (the given one, else
    the cache's of ``build``: stock, or ours with the patches; instrumented with ``sanitizer`` if one is named);
    ``ServerStartError`` saying how to get one."""
    if built is not None:
        return built
    pins = VERSIONS.pt2.build
    try:
        found = backend.find(pins=pins, flavor=backend.of_pt2_build(build, pins).with_sanitizer(sanitizer))
    except BackendError as exc:
        raise ServerStartError(str(exc)) from exc
    if found is None:
        source = pins.pytorch_backend
        name = f"{source.ref}+{pins.patch_set}" if build == "patched" else source.ref
        how = (
            "`invoke build-backend --pt2-build patched` builds it"
            if build == "patched"
            else "`invoke build-backend` builds it when the repository holds torch_aoti models (--pt2 builds it anyway)"
        )
        if sanitizer:
            how = f"{how} (add --sanitize {sanitizer} for the instrumented build)"
            build_name = f"{build} {sanitizer}-sanitized"
        else:
            build_name = build
        msg = (
            f"Cannot serve torch_aoti (PT2) models with {install.binary} (server {install.version}), as no {build_name} "
            f"PT2 build of the pytorch backend (pytorch_backend {name}) is in {backend.cache_root() / 'backends'}.\n"
            f"{HINT} {how}; `nox -s integration` does this itself."
        )
        raise ServerStartError(msg)
    return found


def server_library_folder(install: TritonInstall) -> Path | None:
    """A folder holding ``libtritonserver.so`` -> the wheel's ``libtritonserver-<hash>.so`` (None if not needed).

    One folder per install (its libraries' path in the name): the cache is shared by every venv of the user, and
    a link that one venv re-pointed at its own copy would dangle for the others once that venv is removed (seen
    under act, whose jobs each have a venv of their own: "unable to load shared library: libtritonserver.so")."""
    if install.libraries is None or (install.libraries / SERVER_LIBRARY).exists():
        return None
    hashed = sorted(install.libraries.glob("libtritonserver-*.so"))
    if not hashed:
        msg = f"Cannot find libtritonserver-*.so in {install.libraries}; reinstall nvidia-pytriton."
        raise ServerStartError(msg)
    where = hashlib.sha256(str(install.libraries.resolve()).encode()).hexdigest()[:12]
    folder = backend.cache_root() / "server-libs" / f"{hashed[0].stem}-{where}"
    link = folder / SERVER_LIBRARY
    if link.resolve() == hashed[0].resolve():
        return folder
    if not folder.is_dir():  # made whole beside it, then renamed in: never a folder without its link
        folder.parent.mkdir(parents=True, exist_ok=True)
        with scratch.folder(f".{folder.name}-", inside=folder.parent) as staging:
            made = staging / "made"
            made.mkdir()
            (made / SERVER_LIBRARY).symlink_to(hashed[0])
            with contextlib.suppress(OSError):  # another start made it meanwhile: fine
                made.rename(folder)
    if (
        link.resolve() != hashed[0].resolve()
    ):  # an older link (the wheel was reinstalled): replaced in one rename
        staged = folder / f".{SERVER_LIBRARY}.{os.getpid()}"
        staged.unlink(missing_ok=True)
        staged.symlink_to(hashed[0])
        staged.replace(link)
    return folder


PORT_TRIES = 3
"""Starts of a local server whose picked port was taken before it bound it (LocalServer.start)."""


@dataclass(frozen=True, kw_only=True)
class TritonFlags:
    """tritonserver's command line, one field per flag we render (pytriton's TritonServerConfig, typed).

    Defaults suit verification: explicit model control with every model loaded at startup (so the repository
    API works and each model's load error can be read), and ``exit_on_error=False`` so that one model that
    fails to load does not hide the others. Auto-complete is off: the pytorch backend cannot auto-complete
    (the pytorch_backend README: no auto-complete).

    On SIGTERM Triton 2.51 first waits for open HTTP connections (a client that keeps its keep-alive
    connection open holds the stop), then unloads the models, all within ``exit_timeout_secs``: 10 s here, not
    Triton's 30, because a run interrupted mid-request leaves such a connection (seen: a SIGTERM of the matrix
    took 34 s to end), and nothing this harness serves takes seconds to unload.
    """

    model_repository: Path
    backend_directory: Path | None = None  # None: LocalServer picks one (see pytorch_backend_for())
    address: str = "127.0.0.1"  # --http-address, --grpc-address, --metrics-address
    http_port: int = 0  # 0: a free port picked at start
    grpc_port: int = 0
    metrics_port: int = 0
    model_control_mode: Literal["none", "poll", "explicit"] = "explicit"
    load_model: tuple[str, ...] = ("*",)  # --load-model, with model_control_mode "explicit"
    strict_readiness: bool = True
    exit_on_error: bool = False
    disable_auto_complete_config: bool = True
    log_verbose: int = 0
    exit_timeout_secs: int = 10  # on SIGTERM: first for open HTTP connections, then for model unloads
    model_load_thread_count: int = (
        0  # 0: Triton's own (4); LocalServer sets 1 for two or more torch_aoti models
    )
    extra: tuple[str, ...] = field(default=())  # more flags, rendered as given

    def render(self) -> list[str]:
        """The arguments after the binary's path."""

        def flag(on: bool) -> str:
            return "true" if on else "false"

        args = [f"--model-repository={self.model_repository}"]
        if self.backend_directory is not None:
            args.append(f"--backend-directory={self.backend_directory}")
        args += [
            f"--http-address={self.address}",
            f"--http-port={self.http_port}",
            f"--grpc-address={self.address}",
            f"--grpc-port={self.grpc_port}",
            f"--metrics-address={self.address}",
            f"--metrics-port={self.metrics_port}",
            f"--model-control-mode={self.model_control_mode}",
        ]
        if self.model_control_mode == "explicit":
            args += [f"--load-model={name}" for name in self.load_model]
        args += [
            f"--strict-readiness={flag(self.strict_readiness)}",
            f"--exit-on-error={flag(self.exit_on_error)}",
            f"--log-verbose={self.log_verbose}",
            f"--exit-timeout-secs={self.exit_timeout_secs}",
        ]
        if self.disable_auto_complete_config:
            args.append("--disable-auto-complete-config")
        if self.model_load_thread_count:
            args.append(f"--model-load-thread-count={self.model_load_thread_count}")
        args += list(self.extra)
        return args


class LocalServer(Server):
    """A tritonserver child process in its own process group, with its log in a file."""

    kind: ClassVar[ServerKind] = "local"

    def __init__(
        self,
        flags: TritonFlags,
        *,
        tritonserver: Path | str | None = None,
        log_path: Path | None = None,
        pytorch_backend: BuiltBackend | None = None,
        pt2_backend: BuiltBackend | None = None,
        pt2_build: Pt2Build = "stock",
        sanitizer: Sanitizer | None = None,
        start_timeout: float = 240.0,
        stop_timeout: float = 45.0,
        cpus: Sequence[int] = (),
    ) -> None:
        super().__init__(start_timeout=start_timeout)
        self.sanitizer = sanitizer  # serve the cache's builds instrumented with it (its runtime preloaded)
        self.pt2_backend = pt2_backend  # the PT2 build, when the repository holds torch_aoti models
        self.pt2_build = pt2_build  # which one the cache gives when none is passed: stock or patched
        self.served_copy: Path | None = None  # the repository as a pre-26.03 server is given it (torch_aoti)
        self.requested = flags
        self.cpus = tuple(cpus)  # pin the server to these cores (taskset); () = wherever the kernel puts it
        self.flags = flags  # the effective flags (ports, backend directory) once started
        self.tritonserver = tritonserver
        self.pytorch_backend = pytorch_backend  # the built one it serves with; None for the server's own
        self.stop_timeout = stop_timeout
        self.install: TritonInstall | None = None
        self._log_path = log_path.absolute() if log_path is not None else None
        self._temporary_log = log_path is None  # a file of our own choosing, in the temporary folder
        self._process: subprocess.Popen[bytes] | None = None
        self._finalizer: weakref.finalize[[int], LocalServer] | None = None

    @property
    def log_path(self) -> Path | None:
        return self._log_path

    def start(self) -> None:
        """Start as every runner does; a port picked free that another process bound before the server did (the
        log says "already in use": two servers or clients starting at once on a busy machine) is picked anew, up
        to :data:`PORT_TRIES` starts."""
        for tried in range(1, PORT_TRIES + 1):
            try:
                super().start()
            except ServerStartError:
                picked = 0 in (
                    self.requested.http_port,
                    self.requested.grpc_port,
                    self.requested.metrics_port,
                )
                if tried == PORT_TRIES or not picked or "already in use" not in self.log_tail(lines=200):
                    raise
            else:
                return

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def command(self) -> list[str]:
        """The command line as run (or as it would run); ``taskset`` execs the server on the chosen cores."""
        binary = self.install.binary if self.install else Path(self.tritonserver or "tritonserver")
        pinned = ["taskset", "--cpu-list", ",".join(map(str, self.cpus))] if self.cpus else []
        return [*pinned, str(binary), *self.flags.render()]

    def server_pid(self) -> int | None:
        return self.pid

    def backend_origin(self) -> backend.Origin | None:
        """The built backend's origin; None for a server whose own backends hold it (an NGC install)."""
        return self.pytorch_backend.origin if self.pytorch_backend is not None else None

    def describe(self) -> str:
        where = f", HTTP {self._endpoints.http}" if self._endpoints else ""
        pid = f"pid {self.pid}" if self.pid else "not started"
        return f"the local tritonserver ({pid}{where})"

    def _exit_state(self) -> str | None:
        if self._process is None:
            return "was never started"
        code = self._process.poll()
        if code is None:
            return None
        if code < 0:
            return f"was killed by signal {signal.Signals(-code).name}"
        return f"exited with code {code}"

    def _default_hint(self) -> str:
        if self._process is not None and self._process.poll() == -signal.SIGKILL:
            return (
                "SIGKILL comes from outside the server: a person, a supervisor, or the kernel's OOM killer "
                f"(`dmesg | grep -i -e oom -e killed`); the whole log is in {self._log_path}."
            )
        return (
            f"the whole log is in {self._log_path}; rerun with TritonFlags(log_verbose=1) for more detail."
            if self._log_path
            else "rerun with TritonFlags(log_verbose=1) for more detail."
        )

    def _launch(self) -> None:
        """Find tritonserver and its pytorch backend, pick free ports, start the process in its own group."""
        self._process = None
        repository = self._repository_folder(self.requested.model_repository, "as a local process")
        self.install = TritonInstall.locate(self.tritonserver)
        flags = replace(self.requested, model_repository=repository)
        if flags.backend_directory is None:
            self.pytorch_backend = pytorch_backend_for(
                self.install, self.pytorch_backend, sanitizer=self.sanitizer
            )
            if self.pytorch_backend is not None:
                flags = replace(flags, backend_directory=self.pytorch_backend.directory)
        if pt2_models(repository) and not VERSIONS.pt2.native(self.install.version):
            flags = self._serve_pt2_through_a_second_name(flags)
        if len(pt2_models(repository)) > 1 and not flags.model_load_thread_count:
            # torch's package loader races when two are built at once (docs/upstream/torch-aoti-load-race.md)
            flags = replace(flags, model_load_thread_count=1)
        wanted = (flags.http_port, flags.grpc_port, flags.metrics_port)
        require_free(Ports(*wanted), flags.address)
        picked = iter(free_ports(wanted.count(0), flags.address))
        http, grpc, metrics = (port or next(picked) for port in wanted)
        self.flags = replace(flags, http_port=http, grpc_port=grpc, metrics_port=metrics)
        self._endpoints = Endpoints.on_host(
            self.flags.address, http_port=http, grpc_port=grpc, metrics_port=metrics
        )
        self._log_path = self._log_file(self._log_path, "tritonserver-")
        with self._log_path.open("wb") as log:
            self._process = subprocess.Popen(
                self.command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self._environment(),
                start_new_session=True,  # its own process group: Ctrl-C goes to us, and we end the group
                preexec_fn=_dies_with(os.getpid()) if _main_thread() else None,  # noqa: PLW1509 - prctl only
            )
        self._finalizer = weakref.finalize(self, _kill_group, self._process.pid)

    def _serve_pt2_through_a_second_name(self, flags: TritonFlags) -> TritonFlags:
        """torch_aoti models on a server before Triton 26.03: the PT2 build beside the TorchScript one in the
        backend directory (as ``pt2``), and a copy of the repository whose torch_aoti configs name that backend."""
        assert self.install is not None  # noqa: S101 - set by _launch before this
        if self.pytorch_backend is None:  # an install whose own backends serve TorchScript (NGC) but not PT2
            msg = (
                f"Cannot serve torch_aoti (PT2) models with {self.install.binary} (server {self.install.version}): "
                f"its own pytorch backend predates the PT2 path, which Triton {VERSIONS.pt2.native_ngc} (server "
                f"{VERSIONS.pt2.native_server}) brought.\n{HINT} serve them with a server from Triton "
                f"{VERSIONS.pt2.native_ngc} on, or with the embedded server (leave --tritonserver out)."
            )
            raise ServerStartError(msg)
        self.pt2_backend = pt2_backend_for(
            self.install, self.pt2_backend, build=self.pt2_build, sanitizer=self.sanitizer
        )
        directory = backend.backend_directory(self.pytorch_backend, self.pt2_backend)
        with stopping.ctrl_c_held():
            self.served_copy = Path(tempfile.mkdtemp(prefix="tritonpt-served-"))
        write_served_copy(flags.model_repository, self.served_copy, pt2_backend=backend.PT2_NAME)
        return replace(flags, backend_directory=directory, model_repository=self.served_copy)

    def pt2_origin(self) -> backend.Origin | None:
        return self.pt2_backend.origin if self.pt2_backend is not None and self.served_copy else None

    def _terminate(self) -> None:
        """SIGTERM the server, wait ``stop_timeout`` seconds, then SIGKILL its whole process group."""
        process = self._process
        if process is None:
            return
        ours = process.poll() is None and self.state is State.READY  # we end a server that ran as it should
        try:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(self.stop_timeout)
                except subprocess.TimeoutExpired:
                    _kill_group(process.pid)
        finally:
            _kill_group(process.pid)  # anything the server started shares the group
            self._reap(process)
            if ours and self._temporary_log and self._log_path is not None:
                # Nobody asked for this log and it tells of no failure: it is not left in the temporary folder.
                # A server that failed to start or ended on its own keeps it: its messages name the file.
                self._log_path.unlink(missing_ok=True)

    def _kill(self) -> None:
        """SIGKILL the whole process group now (a stopped or deadlocked server ignores SIGTERM)."""
        process = self._process
        if process is None:
            return
        _kill_group(process.pid)
        self._reap(process)

    def _reap(self, process: subprocess.Popen[bytes]) -> None:
        """After its group was killed: the process waited for, the group gone, what it served from let go."""
        process.wait()
        waiting.within(waiting.GroupGone(process.pid), GROUP_EXIT_TIMEOUT_S, interval=GROUP_POLL_S)
        if self._finalizer is not None:
            self._finalizer.detach()
        if self.served_copy is not None:
            scratch.remove(self.served_copy)
            self.served_copy = None

    def _environment(self) -> dict[str, str]:
        """The child's environment: the wheel's libraries and, for a built backend, this torch's libraries; for
        a build instrumented with a sanitizer, its runtime preloaded and its settings (backend.toolchain)."""
        env = dict(os.environ)
        folders = library_folders(self.install, self.pytorch_backend, self.pt2_backend)
        if folders:
            env["LD_LIBRARY_PATH"] = os.pathsep.join([*folders, *filter(None, [env.get("LD_LIBRARY_PATH")])])
        served = (self.pytorch_backend, self.pt2_backend)
        sanitizers = sorted({b.sanitizer for b in served if b is not None and b.sanitizer})
        if sanitizers:
            try:
                env.update(backend.sanitizer_environment(sanitizers, env))
            except BackendError as exc:
                raise ServerStartError(str(exc)) from exc
        return env


def library_folders(
    install: TritonInstall | None, pytorch: BuiltBackend | None, pt2: BuiltBackend | None = None
) -> list[str]:
    """What a server needs first on ``LD_LIBRARY_PATH``: the wheel's libraries (``libtritonserver.so`` under its
    plain name) and, for a built backend, this environment's ``torch/lib`` and what the build needs."""
    folders: list[str] = []
    if install is not None:
        shim = server_library_folder(install)
        folders += [str(p) for p in (shim, install.libraries) if p is not None]
    if pytorch is not None:
        folders += [str(backend.Torch.locate().lib_dir), *pytorch.library_dirs]
    if pt2 is not None:
        folders += [d for d in pt2.library_dirs if d not in folders]
    return folders


PR_SET_PDEATHSIG = 1
"""prctl(2): the signal a process gets when its parent ends."""


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _dies_with(parent: int) -> Callable[[], None]:
    """For the forked child, before it execs tritonserver: SIGKILL when ``parent`` ends, however it ends
    (SIGKILLed, or crashed), so that no server outlives what started it. PyTriton does the same.

    Linux ties the signal to the *thread* that forked, so it is set only for a server started from the main
    thread (which lives as long as the process); one started from another thread is stopped by its owner and by
    the finalizer. A parent that ended before the signal was set is noticed by ``getppid``.
    """

    def arm() -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)

    return arm


def _kill_group(pgid: int) -> None:
    """SIGKILL every process left in the group (the server and whatever it started)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
