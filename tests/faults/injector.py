"""Start a front door, inject a fault, time the exit, count what it left behind.

Every process a fault starts carries ``TRITONPT_FAULT=<id>`` in its environment (tritonserver, cmake, make and
the compiler inherit it), and its own temporary folder (``TMPDIR``); containers are told apart by the fault's
repository, which they mount. So other work on the machine (other test runs, other servers) is never counted.

What is looked at once the front door exited (:data:`~tritonpt_ci.contracts.LEFTOVER_KINDS`): those
processes and containers; ``tritonpt-*`` / ``tritonserver-*`` in the fault's temporary folder; ``.staging-*``
folders in its repository; ``*.partial`` files in the repository and its model folders (a stamp, a split file);
partial entries in every folder of the cache the front door wrote to (its private ``TRITONPT_CACHE``, else the
user's cache, where only entries that were not there when the fault began count, since other work may share it);
and the models it uploaded to a live server that are still ready there.

    run = FaultRun(fault="SIGKILL of tritonserver", stage="matrix", bound_s=10, folder=tmp_path, ...)
    run.hold("[resnet18] tracing")   # the front door pauses at that step (tritonpt.stopping.hold_at)
    run.start(command)               # its own process group, as a terminal starts a foreground job
    run.wait_held(60)                # it is there, and waits for the fault (or wait_output / wait_file)
    run.inject(lambda: ...)          # the fault; time to exit counts from here
    outcome = run.finish()           # exit, leftovers, tracebacks; a row of the fault table

A fault's moment is a step the front door holds at, not a time after some line: on a busy machine a step of 10 ms
(an export's last validation) was over before a stop sent "as it began" arrived.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tritonpt import client, stopping
from tritonpt.backend.layout import CACHE_ENV, LIBRARY, MANIFEST
from tritonpt.backend.serving import PT2_LIBRARY, PT2_NAME
from tritonpt.client import Endpoints
from tritonpt.image import LABEL_HARNESS
from tritonpt.reporting.reliability import count_tracebacks
from tritonpt_ci import procs
from tritonpt_ci.contracts import LEFTOVER_KINDS
from tritonpt_ci.qa.generate import RECORD

from ..helpers import ROOT, ready_models


@dataclass(frozen=True)
class Uploads:
    """Models a front door uploads to a live server: those still ready there after it exited are left behind."""

    server: Callable[[], Endpoints]  # where the server answers now (a restarted one too)
    names: Sequence[str]
    headers: Mapping[str, str]  # what its restricted model-repository API asks for

    def ready(self) -> list[str]:
        return ready_models(self.server(), self.names)

    def unload(self) -> None:
        with client.http(self.server()) as http:
            for name in self.ready():
                http.unload_model(name, headers=dict(self.headers))


MARKER = "TRITONPT_FAULT"
GRACE_S = 60.0
"""How long past its bound a front door may take before it is killed (and the fault fails)."""
SETTLE_S = 30.0
"""How long processes of the fault may take to end after the front door exited before they count as left: the wait
ends as soon as none is left, so this is only a limit (a tether removing a killed run's container took over 3 s on
a busy machine, and was counted as left behind while it did its job)."""
MATRIX_MOMENTS = {"at start": "check ", "mid-matrix": "test_parity.py::"}
"""Where in the matrix a fault lands, as the check it holds at (``$TRITONPT_HOLD_AT``): its first check (the
server up and watched), and its first parity check (after the backend, bad-request and health checks)."""
TEMP_PREFIXES = ("tritonpt-", "tritonserver-")
"""What this package creates in the temporary folder (build contexts, bench folders, server logs)."""


@dataclass(kw_only=True)
class Outcome:
    """One row of the fault table."""

    fault: str
    stage: str
    bound_s: float
    exit_s: float
    returncode: int | None  # None: it did not exit, and was killed
    output: str
    leftovers: dict[str, int]
    left: list[str] = field(default_factory=list)  # what the leftovers are, for the failure message
    expected_exit: tuple[int, ...] = (1, 2, 130)  # pytest 2 on Ctrl-C, ours 1 or 130; 0 would hide the fault
    extra_ok: bool = True  # the test's own checks (the paragraph said what died)

    @property
    def exit(self) -> str:
        if self.returncode is None:
            return "did not exit (killed)"
        if self.returncode < 0:
            return f"signal {signal.Signals(-self.returncode).name}"
        return f"code {self.returncode}"

    @property
    def tracebacks(self) -> int:
        return count_tracebacks([self.output])

    @property
    def passed(self) -> bool:
        return (
            self.returncode in self.expected_exit
            and self.exit_s <= self.bound_s
            and not any(self.leftovers.values())
            and self.tracebacks == 0
            and self.extra_ok
        )

    def row(self) -> dict[str, Any]:
        return {
            "fault": self.fault,
            "stage": self.stage,
            "bound_s": self.bound_s,
            "exit_s": round(self.exit_s, 2),
            "exit": self.exit,
            "leftovers": dict(self.leftovers),
            "tracebacks": self.tracebacks,
            "passed": self.passed,
        }

    def explain(self) -> str:
        tail = "\n".join(self.output.splitlines()[-40:])
        return (
            f"{self.fault} ({self.stage}): exit {self.exit} after {self.exit_s:.2f} s (bound {self.bound_s} s), "
            f"leftovers {self.leftovers} {self.left}, tracebacks {self.tracebacks}\n--- output (last lines) ---\n{tail}"
        )


class FaultRun:
    """A front door in its own process group, with a marker and a temporary folder of its own."""

    def __init__(
        self,
        *,
        fault: str,
        stage: str,
        bound_s: float,
        folder: Path,
        repository: Path | None = None,
        cache: Path | None = None,
        env: Mapping[str, str] | None = None,
        docker: Any = None,
        uploads: Uploads | None = None,
    ) -> None:
        self.fault = fault
        self.stage = stage
        self.bound_s = bound_s
        self.folder = folder
        self.repository = repository
        self.cache = cache
        self.docker = docker  # a docker-py client, to count containers (None: no engine in this fault)
        self.uploads = (
            uploads  # the models the front door uploads to a live server, to count those left there
        )
        self.marker = uuid.uuid4().hex
        self.tmp = folder / "tmp"
        self.tmp.mkdir(parents=True, exist_ok=True)
        self.env = {**os.environ, MARKER: self.marker, "TMPDIR": str(self.tmp), **(env or {})}
        if cache is not None:
            self.env[CACHE_ENV] = str(cache)
        self.cache_root = cache_of(self.env)  # the cache its front door writes to, private or the user's
        self._cache_before = set(partial_cache_entries(self.cache_root))  # others' work in a shared cache
        self.began = time.time()
        self.injected: float | None = None
        self.process: subprocess.Popen[str] | None = None
        self._lines: list[str] = []
        self._reader: threading.Thread | None = None

    # --- the front door -----------------------------------------------------------------------------------------

    def hold(self, step: str) -> FaultRun:
        """Before :meth:`start`: the front door is to pause at the first step (a progress line, or a matrix check
        ``check <id>``) that holds ``step``, and wait there for the fault."""
        self.env[stopping.HOLD_ENV] = step
        self.env[stopping.HELD_ENV] = str(self.folder / "held.txt")
        return self

    def wait_held(self, timeout: float) -> str:
        """Wait until the front door holds where :meth:`hold` asked; the step it holds at."""
        held = Path(self.env[stopping.HELD_ENV])
        self.wait_file(held, "holding at: ", timeout)
        return held.read_text(encoding="utf-8").removeprefix("holding at: ").strip()

    def start(self, command: Sequence[str], *, cwd: Path = ROOT, sigint_ignored: bool = False) -> FaultRun:
        """Start the front door in its own process group; ``sigint_ignored``: as a non-interactive shell starts a
        background job (``command &``), with SIGINT ignored on entry."""
        self.process = subprocess.Popen(
            command,
            cwd=cwd,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            start_new_session=True,  # its own group, like a terminal's foreground job: Ctrl-C goes to all of it
            preexec_fn=_ignored_sigint if sigint_ignored else _default_sigint,  # noqa: PLW1509 - no threads between fork and exec here that matter
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        return self

    def _read(self) -> None:
        assert self.process is not None
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.append(line)

    @property
    def output(self) -> str:
        return "".join(self._lines)

    def wait_output(self, text: str, timeout: float) -> None:
        """Wait until the front door printed ``text``; fail the test (after cleaning up) if it did not."""
        self._wait(lambda: text in self.output, f"{text!r} never appeared in its output", timeout)

    def wait_file(self, path: Path, text: str, timeout: float) -> None:
        """Wait until the file ``path`` holds ``text``; fail the test (after cleaning up) if it did not."""

        def there() -> bool:
            return path.is_file() and text in path.read_text(encoding="utf-8", errors="replace")

        self._wait(there, f"{text!r} never appeared in {path}", timeout)

    def _wait(self, condition: Callable[[], bool], failure: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            ended = self.process is not None and self.process.poll() is not None
            self.require(not ended and time.monotonic() < deadline, failure)
            time.sleep(0.05)

    def require(self, ok: bool, what: str) -> None:
        """Give up on the fault (cleaning up) when a precondition does not hold."""
        if not ok:
            code = self.process.poll() if self.process is not None else None
            self.abandon()
            msg = f"{self.fault}: {what} (front door exit: {code})\n{self.output[-3000:]}"
            raise AssertionError(msg)

    def inject(self, action: Callable[[], object]) -> None:
        """Run the fault; the time to exit counts from its end."""
        action()
        self.injected = time.monotonic()

    def signal(self, sig: signal.Signals) -> None:
        """``sig`` to the front door's own process, as ``timeout``, systemd, a CI runner or ``kill`` send it."""
        assert self.process is not None
        self.inject(lambda: os.kill(self.process.pid, sig))  # type: ignore[union-attr]

    def interrupt(self) -> None:
        """Ctrl-C as a terminal sends it: SIGINT to the front door's whole process group."""
        assert self.process is not None
        self.inject(lambda: os.killpg(self.process.pid, signal.SIGINT))  # type: ignore[union-attr]

    def finish(
        self,
        *,
        expected_exit: tuple[int, ...] = (1, 2, 130),
        before_count: Callable[[], object] | None = None,
    ) -> Outcome:
        """Wait for the exit (bound + grace, then kill), count the leftovers, then clear them for the next fault.

        ``before_count`` runs between the exit and the count (the engine-stop fault starts the engine again).
        """
        assert self.process is not None
        assert self.injected is not None
        returncode: int | None
        try:
            returncode = self.process.wait(self.bound_s + GRACE_S)
        except subprocess.TimeoutExpired:
            returncode = None
            _kill_group(self.process.pid)
            self.process.wait()
        exit_s = time.monotonic() - self.injected
        self._close()
        (self.folder / "output.txt").write_text(
            self.output, encoding="utf-8"
        )  # the whole of it, for a person
        if before_count is not None:
            before_count()
        leftovers, left = self.count_leftovers()
        self.clear()
        return Outcome(
            fault=self.fault,
            stage=self.stage,
            bound_s=self.bound_s,
            exit_s=exit_s,
            returncode=returncode,
            output=self.output,
            leftovers=leftovers,
            left=left,
            expected_exit=expected_exit,
        )

    def abandon(self) -> None:
        """End the front door and whatever it left (a precondition failed; nothing is recorded)."""
        if self.process is not None and self.process.poll() is None:
            _kill_group(self.process.pid)
            self.process.wait()
        self._close()
        self.clear()

    def _close(self) -> None:
        if self._reader is not None:
            self._reader.join(timeout=10)
        if self.process is not None and self.process.stdout is not None:
            self.process.stdout.close()

    # --- leftovers ----------------------------------------------------------------------------------------------

    def count_leftovers(self, settle_s: float = SETTLE_S) -> tuple[dict[str, int], list[str]]:
        """What is left once the front door exited; its processes get up to ``settle_s`` to end (a reaper
        finishing), the wait ending as soon as none is left."""
        deadline = time.monotonic() + settle_s
        while marked_processes(self.marker) and time.monotonic() < deadline:
            time.sleep(0.1)
        found: dict[str, list[str]] = {kind: [] for kind in LEFTOVER_KINDS}
        found["processes"] = [f"pid {pid} {name}" for pid, name in marked_processes(self.marker)]
        found["containers"] = [f"container {c.short_id} ({c.status})" for c in self.containers()]
        found["temp_dirs"] = [p.name for p in sorted(self.tmp.iterdir()) if p.name.startswith(TEMP_PREFIXES)]
        if self.repository is not None and self.repository.is_dir():
            found["staging_dirs"] = [
                p.name for p in self.repository.iterdir() if p.name.startswith(".staging-")
            ]
            found["partial_files"] = partial_files(self.repository)
        found["partial_cache"] = [
            f"{self.cache_root}/{entry}"
            for entry in partial_cache_entries(self.cache_root)
            if entry not in self._cache_before
        ]
        if self.uploads is not None:
            found["loaded_models"] = [f"{n} still loaded" for n in self.uploads.ready()]
        return {kind: len(items) for kind, items in found.items()}, [
            i for items in found.values() for i in items
        ]

    def containers(self) -> list[Any]:
        """Our containers (harness label) that mount this fault's repository, in any state."""
        if self.docker is None or self.repository is None:
            return []
        mine = []
        # a reaper may remove one between docker-py's listing and its inspection of each: it is gone, not left
        listed = self.docker.containers.list(all=True, filters={"label": LABEL_HARNESS}, ignore_removed=True)
        for container in listed:
            sources = [m.get("Source", "") for m in container.attrs.get("Mounts", [])]
            if str(self.repository) in sources:
                mine.append(container)
        return mine

    def clear(self) -> None:
        """Remove what the fault left, so that the next one starts clean (after it was counted)."""
        for pid, _ in marked_processes(self.marker):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        if self.uploads is not None:
            self.uploads.unload()
        for container in self.containers():
            with contextlib.suppress(Exception):
                container.remove(force=True)


def _default_sigint() -> None:
    """In the child before exec: Ctrl-C acts, even when this run started with SIGINT ignored (a background job)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _ignored_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def marked_processes(marker: str) -> list[tuple[int, str]]:
    """Live processes (not zombies) whose environment carries ``TRITONPT_FAULT=marker``: (pid, command line)."""
    return [(p.pid, p.command) for p in procs.marked(MARKER, marker)]


def cache_of(env: Mapping[str, str]) -> Path:
    """The cache a front door with this environment writes to (as :func:`tritonpt.backend.cache_root` reads it)."""
    if env.get(CACHE_ENV):
        return Path(env[CACHE_ENV])
    return Path(env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")) / "tritonpt"


def partial_files(repository: Path) -> list[str]:
    """``*.partial`` files a write left in the repository or in a model folder (a stamp, the split file): each
    is staged there and renamed into place, so one that is left means an interrupted write."""
    found = [*repository.glob("*.partial"), *repository.glob("*/*.partial")]  # pathlib's * matches dot names
    return sorted(str(p.relative_to(repository)) for p in found)


COMPLETE: dict[str, Callable[[Path], bool]] = {
    "backends": lambda entry: (entry / MANIFEST).is_file(),
    "qa-models": lambda entry: (entry / RECORD).is_file(),
    "tools": lambda entry: (entry / "perf_analyzer").is_file(),
    "served": lambda entry: (
        (entry / "pytorch" / LIBRARY).exists() and (entry / PT2_NAME / PT2_LIBRARY).exists()
    ),
    # The link, dangling or not: an entry made for an install since removed (a test's own venv) is whole.
    "server-libs": lambda entry: os.path.lexists(entry / "libtritonserver.so"),
}
"""What makes an entry of each cache folder whole (its last rename put it there); an entry without it is partial."""


def partial_cache_entries(cache: Path) -> list[str]:
    """What an interrupted build, download, install or generation may leave in a cache, in every folder of it:
    a staging folder or partial download (a name starting with ``.``: every stage writes beside the cache and
    renames into place), an entry without what makes it whole (:data:`COMPLETE`), a staged link."""
    found: list[str] = []
    if not cache.is_dir():
        return found
    for folder in sorted(p for p in cache.iterdir() if p.is_dir()):
        for entry in sorted(folder.iterdir()):
            where = f"{folder.name}/{entry.name}"
            if entry.name.startswith(".") or (
                folder.name in COMPLETE and entry.is_dir() and not COMPLETE[folder.name](entry)
            ):
                found.append(where)
            elif entry.is_dir() and folder.name == "server-libs":
                found += [f"{where}/{p.name}" for p in sorted(entry.glob(".*"))]
    return found
