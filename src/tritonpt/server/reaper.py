"""The tether: a process's containers go when it goes, however it goes (SIGKILL too), where Ryuk is off.

    tether(session)          before the first container: a process outside this one's tree holds a pipe's read end
    release()                at a normal exit, once this process removed its containers: the tether just ends
    remove_session(session)  force-remove every container labelled ``io.tritonpt.session=SESSION``
    reaper.py SESSION        the tether, run by its path: at end of file (its owner ended) it removes the containers

Started through a launcher that exits at once (parent init, session its own) and without ``RUNNER_TRACKING_ID``,
so no runner's cancel or orphan clean-up kills it first (docs/guide/ci-and-gpu.md).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time

from tritonpt import image
from tritonpt.errors import TritonPtError

TRACKING = "RUNNER_TRACKING_ID"
ENGINE_WAIT_S = 120.0
"""How long a tether waits for an engine that does not answer when its owner ended (one restarting)."""
RELEASED = b"released\n"
RUN = "import runpy, sys; runpy.run_path(sys.argv.pop(1), run_name='__main__')"
"""How the tether runs: this file by its path, so that it loads what it needs (tritonpt.image, docker-py) and not
tritonpt.server's package, whose servers and clients bring torch (seconds and hundreds of MB, for the whole life
of every container)."""
LAUNCH = (
    "import subprocess, sys; "
    f"subprocess.Popen([sys.executable, '-c', {RUN!r}, sys.argv[1], sys.argv[2]], stdin=0, "
    "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)"
)
"""The launcher: it starts the tether and exits, so the tether is reparented to init."""

_HELD: tuple[int, int] | None = None
"""(pid, write end) of the process holding a tether: the write end is held open and closed by the kernel when
that process ends. A forked child (another pid) starts its own."""


def tether(session: str) -> None:
    """Start this process's tether for the containers labelled with ``session``, unless it runs already."""
    global _HELD  # noqa: PLW0603 - one tether per process
    if _HELD is not None and _HELD[0] == os.getpid():
        return
    # Both ends are non-inheritable: no other child of this process holds the write end open.
    read_end, write_end = os.pipe()
    env = {name: value for name, value in os.environ.items() if name != TRACKING}
    try:
        subprocess.run(
            [sys.executable, "-c", LAUNCH, __file__, session],
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


def release() -> None:
    """Tell this process's tether that its containers are gone (a normal exit): it ends without acting."""
    global _HELD  # noqa: PLW0603 - one tether per process
    if _HELD is None or _HELD[0] != os.getpid():
        return
    with contextlib.suppress(OSError):
        os.write(_HELD[1], RELEASED)
        os.close(_HELD[1])
    _HELD = None


def remove_session(session: str, *, within: float = 0.0) -> list[str]:
    """Force-remove every container labelled ``io.tritonpt.session=session``; their ids. An engine that does not
    answer is asked again every second for ``within`` seconds (0: once)."""
    docker = image.docker_module()
    deadline = time.monotonic() + within
    while True:
        try:
            client = image.docker_client(timeout=30)
        except TritonPtError:
            client = None
        if client is not None:
            removed: list[str] = []
            try:
                found = client.containers.list(
                    all=True, filters={"label": f"{image.LABEL_SESSION}={session}"}, ignore_removed=True
                )
                for left in found:
                    with contextlib.suppress(docker.errors.NotFound):
                        left.remove(force=True)
                        removed.append(str(left.id))
            except image.engine_errors():
                pass
            else:
                return removed
            finally:
                client.close()
        if time.monotonic() >= deadline:
            return []
        time.sleep(1.0)


def main(argv: list[str]) -> int:
    """Wait for the owner's end (end of file on stdin); unless it released this tether, remove its containers."""
    (session,) = argv
    said = b""
    with contextlib.suppress(OSError):
        while chunk := os.read(0, 4096):
            said += chunk
    if RELEASED not in said:
        remove_session(session, within=ENGINE_WAIT_S)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
