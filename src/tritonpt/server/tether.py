"""The tether: this process's containers go when it goes, however it goes, where testcontainers' Ryuk is off.

    tether()                      once per process, before its first container starts: a small process outside
                                  this one's process tree holds the read end of a pipe only this process writes to
    python -m tritonpt.server.tether SESSION
                                  that process: it reads until end of file, which comes when this process has
                                  ended (the kernel closes the write end, also on SIGKILL), then force-removes
                                  every container labelled ``io.tritonpt.session=SESSION`` and exits

Why it is needed: ``stop()`` and the exit hook (:mod:`tritonpt.server.engine`) run only in a process that is let
finish. GitHub's runner cancels a step with SIGINT, SIGTERM 7.5 s later and kills the step's process tree 2.5 s
after that (docs.github.com, "Canceling a workflow"); a run whose teardown needs longer (two containers to stop
on a busy 2-core runner) was killed in the middle of it, and its containers kept running (seen under act,
tests/workflows/test_cancel.py). Ryuk does the same job from a container whose image this machine cannot pull.

How it stays out of the way: it is started through a launcher that exits at once, so it belongs to no process
tree a runner kills (its parent is init), in a session of its own (no Ctrl-C of a terminal reaches it), and
without ``RUNNER_TRACKING_ID``, the variable by which GitHub's runner kills a job's leftover processes at the
job's end (actions/runner, JobExtension.cs, "Cleaning up orphan processes"), which would otherwise kill it
before it did its work. A process that ends normally stops its containers itself; the tether then finds none
and exits.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys

from testcontainers.core.labels import SESSION_ID

from tritonpt.server import engine

TRACKING = "RUNNER_TRACKING_ID"
ENGINE_WAIT_S = 120.0
"""How long the tether waits for an engine that does not answer when its owner ended (one restarting)."""
LAUNCH = (
    "import subprocess, sys; "
    "subprocess.Popen([sys.executable, '-m', 'tritonpt.server.tether', sys.argv[1]], stdin=0, "
    "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)"
)
"""The launcher: it starts the tether and exits, so the tether is reparented to init."""

_HELD: tuple[int, int] | None = None
"""(pid, write end) of the process holding a tether: the write end is held open, never written, and closed by
the kernel when that process ends. A forked child (another pid) starts its own."""


def tether() -> None:
    """Start this process's tether unless it runs already."""
    global _HELD  # noqa: PLW0603 - one tether per process
    if _HELD is not None and _HELD[0] == os.getpid():
        return
    # Both ends are non-inheritable: no other child of this process holds the write end open.
    read_end, write_end = os.pipe()
    env = {name: value for name, value in os.environ.items() if name != TRACKING}
    try:
        subprocess.run(
            [sys.executable, "-c", LAUNCH, SESSION_ID],
            stdin=read_end,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
            check=True,
            timeout=60,
        )
    except (OSError, subprocess.SubprocessError):
        os.close(write_end)
        raise
    finally:
        os.close(read_end)
    _HELD = (os.getpid(), write_end)


def main(argv: list[str]) -> int:
    """Wait for the owner's end (end of file on stdin), then remove its containers."""
    (session,) = argv
    with contextlib.suppress(OSError):
        while os.read(0, 4096):  # nobody writes: only end of file ends this
            pass
    engine.remove_session(session, within=ENGINE_WAIT_S)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
