"""Front doors run many times, each a process of its own, without paying torch's import each time.

`python -m invoke export ...` or `python -m tritonpt.matrix ...` spends 4 to 5 s of its run on two cores importing
torch, before the user's module is even read. The system tier runs them about 70 times (the export contract's 33
cases, the matrix on shards, teams' own files, migrated repositories): minutes on that alone. :func:`run` starts
each as a child of a server process that imported torch once (:mod:`multiprocessing`'s forkserver, preloaded with
torch; the server is a fresh interpreter, not a fork of pytest). The child is the front door's own process: its own pid, working folder, environment, argv, stdout and
stderr (files), and exit code, running ``python -m MODULE`` through :mod:`runpy` as the interpreter does. Only
torch is preloaded: tritonpt, invoke and the user's module are imported by the child, as a person's run does.

What the preloading leaves out (the interpreter's start, torch's import) is what these tests do not test; the
tests that hold a door's first seconds (its import, its first warning) or its signals start ``python -m`` itself.
"""

from __future__ import annotations

import atexit
import multiprocessing
import os
import runpy
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

PRELOAD = ["torch"]
"""What the server imports once: what every front door that reads a model imports first, and most of its time."""

_context = multiprocessing.get_context("forkserver")
_context.set_forkserver_preload(PRELOAD)


def _child(module: str, args: Sequence[str], cwd: str, env: Mapping[str, str], out: str, err: str) -> None:
    """In the forked child: become ``python -m module args`` run from ``cwd`` with ``env``, its output in files."""
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    for fd, path in ((1, out), (2, err)):
        handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(handle, fd)
        os.close(handle)
    # `python -m`: the working folder first on the path, then $PYTHONPATH's folders, then the interpreter's own
    extra = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[:] = [cwd, *extra, *(p for p in sys.path if p not in extra and p not in ("", cwd))]
    sys.argv = [module, *args]
    try:
        runpy.run_module(
            module, run_name="__main__", alter_sys=True
        )  # its SystemExit is the child's exit code
    finally:
        atexit._run_exitfuncs()  # as the interpreter does at its exit (multiprocessing's child skips it)


def run(
    module: str,
    args: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout: float,
) -> subprocess.CompletedProcess[str]:
    """``python -m module args`` in ``cwd`` with ``env``, as a child of the preloaded server; what
    :func:`subprocess.run` with ``capture_output=True, text=True`` returns (``TimeoutExpired`` when it outlives
    ``timeout``, after it was killed)."""
    with tempfile.TemporaryDirectory(prefix="tritonpt-preloaded-") as folder:
        out, err = Path(folder) / "stdout", Path(folder) / "stderr"
        child = _context.Process(
            target=_child, args=(module, list(args), str(cwd), dict(env), str(out), str(err))
        )
        child.start()
        child.join(timeout)
        if child.exitcode is None:
            child.kill()
            child.join()
            raise subprocess.TimeoutExpired([sys.executable, "-m", module, *args], timeout)
        stdout = out.read_text(encoding="utf-8", errors="replace") if out.exists() else ""
        stderr = err.read_text(encoding="utf-8", errors="replace") if err.exists() else ""
    # a negative code for a signal, as subprocess gives it
    return subprocess.CompletedProcess([sys.executable, "-m", module, *args], child.exitcode, stdout, stderr)


def run_command(
    command: Sequence[str], *, cwd: Path, timeout: float, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """:func:`run` for a ``[sys.executable, "-m", MODULE, *args]`` command (``tests.helpers.matrix_command``'s):
    what ``subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)`` returns,
    ``env`` this process's environment where not given."""
    executable, flag, module, *args = command
    if executable != sys.executable or flag != "-m":
        message = f"not a `python -m MODULE` command of this interpreter ({sys.executable}): {command}"
        raise ValueError(message)
    return run(module, args, cwd=cwd, env=dict(os.environ) if env is None else env, timeout=timeout)
