"""The backends built beside an export: `tritonpt build-backend` in a child process while the export runs."""

from __future__ import annotations

import collections
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from tritonpt import stopping
from tritonpt.errors import BackendError

Say = Callable[[str], None]

BESIDE_STOP_S = 30.0
"""How long a stopped export waits for the backend build beside it to stop (it removes its half-built tree)."""


@contextlib.contextmanager
def backends_beside(repository: Path, *, pt2: bool, patched: bool, step: Say, relay: Say) -> Iterator[None]:
    """``tritonpt build-backend`` in a child process while the block exports: the builds and the exports do not
    depend on each other, and each leaves CPU idle the other can use (a configure, a link, a download, a trace).
    Its lines go to ``relay``. A block that fails or is stopped stops the build (Ctrl-C, which it answers by
    removing its half-built tree). A build that fails fails the export at once, with the build's last lines: the
    export is interrupted where it is (as Ctrl-C would, so that it leaves nothing half-written), not finished first.
    Needs the main thread (the interruption is a SIGINT to this process).
    """
    command = [sys.executable, "-m", "tritonpt", "build-backend", "--repository", str(repository)]
    command += ["--pt2"] * pt2 + ["--pt2-build", "patched"] * patched
    step("building the backends beside the export: " + " ".join(command[1:]))
    child = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    tail: collections.deque[str] = collections.deque(maxlen=30)
    lock = threading.Lock()
    exporting = True
    failed = threading.Event()

    def read() -> None:
        nonlocal exporting
        assert child.stderr is not None  # noqa: S101 - stderr=PIPE
        for line in child.stderr:
            tail.append(line.rstrip())
            relay(line.rstrip())
        code = child.wait()
        with lock:
            if code != 0 and exporting:
                exporting = False
                failed.set()
                # the export stops where it is; the handler below says why
                os.kill(os.getpid(), signal.SIGINT)

    def build_failed() -> BackendError:
        said = "\n".join(tail)
        msg = (
            f"building the backends beside the export failed (exit {child.returncode}); its last lines:\n{said}\n"
            f"Run `tritonpt build-backend --repository {repository}` alone to see the whole build."
        )
        return BackendError(msg)

    reader = threading.Thread(target=read, name="backend-build-output", daemon=True)
    started = time.perf_counter()
    try:
        reader.start()  # inside: a build that fails at once interrupts this very line
        yield
        with lock:
            exporting = False
        exported = time.perf_counter() - started
        step(f"export done in {exported:.1f} s; waiting for the backend builds beside it")
        code = child.wait()
    except BaseException:  # a failed export, or a stop (while exporting or waiting for the build)
        with lock:
            exporting = False
        if failed.is_set():  # the interruption was ours: the build failed
            with contextlib.suppress(KeyboardInterrupt):  # our SIGINT, should it land only now
                reader.join(timeout=5.0)
            raise build_failed() from None
        stopping.stop_group(child, BESIDE_STOP_S)
        raise
    reader.join(timeout=5.0)
    step(
        f"export {exported:.1f} s and the backend builds beside it: {time.perf_counter() - started:.1f} s in all"
    )
    if code:
        raise build_failed()
