"""This machine as the self-hosted runner act runs the jobs on, with nothing of the user's reaching them.

    tool_cache(into)        the Python that runs this, where actions/setup-python looks on an offline runner
    home(into)              a HOME of the run's own; its .cache/uv and .cache/tritonpt link to this machine's
    environment(...)        this process's variables, without secrets or this venv, plus the run's marker
    leftovers(marker, ...)  the processes and the harness's containers a run left behind

The runner of each `nox -s workflows` run (tritonpt_ci.workflows.runner) uses these.
"""

from __future__ import annotations

import contextlib
import os
import platform
import re
import signal
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tritonpt import backend
from tritonpt_ci import procs

MARKER = "TRITONPT_ACT_RUN"
"""Every process of a run carries ``TRITONPT_ACT_RUN=<run id>`` in its environment: how its leftovers are found."""
SECRET = re.compile(r"(TOKEN|SECRET|PASSW|CREDENTIAL|API_?KEY|PRIVATE|AUTH)", re.IGNORECASE)
"""Names that look like a secret's; their variables are not passed to the jobs (only their names are reported)."""
OUTER = (
    "GITHUB_",
    "RUNNER_",
    "ACTIONS_",
    "NOX_",
    "VIRTUAL_ENV",
    "PYTHONHOME",
    "PYTHONPATH",
    "UV_PROJECT_ENVIRONMENT",
    "TRITONPT_HOLD",
)
"""An outer run's variables (a GitHub job, the nox session that runs this), which would leak into the jobs' own."""


def python_version() -> str:
    return platform.python_version()


def tool_cache(into: Path) -> Path:
    """``into`` as setup-python's tool cache, holding this Python (``AGENT_TOOLSDIRECTORY``)."""
    version = into / "Python" / python_version()
    version.mkdir(parents=True, exist_ok=True)
    link = version / "x64"
    prefix = Path(sys.base_prefix)
    if not (link.is_symlink() and link.resolve() == prefix.resolve()):
        staged = version / f".x64.{os.getpid()}"
        staged.unlink(missing_ok=True)
        staged.symlink_to(prefix, target_is_directory=True)
        staged.replace(link)
    (version / "x64.complete").touch()
    return into


def home(into: Path) -> Path:
    """A fresh HOME whose ``.cache/uv`` and ``.cache/tritonpt`` are this machine's caches."""
    cache = into / ".cache"
    cache.mkdir(parents=True, exist_ok=True)
    uv = Path(os.environ.get("UV_CACHE_DIR") or Path.home() / ".cache" / "uv")
    for name, target in (("uv", uv), ("tritonpt", backend.cache_root())):
        target.mkdir(parents=True, exist_ok=True)
        (cache / name).symlink_to(target.resolve(), target_is_directory=True)
    return into


def environment(
    *, home_dir: Path, marker: str, base: Mapping[str, str] | None = None
) -> tuple[dict[str, str], list[str]]:
    """The jobs' environment and the names of the variables left out of it."""
    source = dict(os.environ if base is None else base)
    venv = source.get("VIRTUAL_ENV")
    dropped = sorted(name for name in source if SECRET.search(name) or name.startswith(OUTER))
    env = {name: value for name, value in source.items() if name not in dropped}
    if venv:  # the nox session's venv stays out of the jobs' PATH: they set up their own Python
        env["PATH"] = os.pathsep.join(
            p for p in env.get("PATH", "").split(os.pathsep) if not p.startswith(venv)
        )
    env.update(
        {
            "HOME": str(home_dir),
            "XDG_CONFIG_HOME": str(home_dir / ".config"),  # act reads $XDG_CONFIG_HOME/act/actrc
            "XDG_CACHE_HOME": str(home_dir / ".cache"),
            MARKER: marker,
        }
    )
    return env, [name for name in dropped if name != MARKER]


def carries(pid: int, marker: str) -> bool:
    process = procs.read(pid)
    return process is not None and process.environ.get(MARKER) == marker


def marked(marker: str, folder: Path | None = None) -> list[tuple[int, str]]:
    """Live processes of the run (its marker in their environment), or naming ``folder`` in their command line (a
    server that left the run's environment behind still serves the run's repository): (pid, command line)."""
    return [(p.pid, p.command) for p in procs.marked(MARKER, marker, folder)]


def containers(folder: Path) -> list[Any]:
    """The harness's containers (any state) that mount something inside ``folder``; [] without an engine."""
    try:
        import docker  # noqa: PLC0415 - only a run that may have started containers asks
        from tritonpt.image import LABEL_HARNESS  # noqa: PLC0415

        client = docker.from_env(timeout=10)
        listed = client.containers.list(all=True, filters={"label": LABEL_HARNESS}, ignore_removed=True)
    except Exception:
        return []
    inside = str(folder.resolve())
    return [
        c for c in listed if any(m.get("Source", "").startswith(inside) for m in c.attrs.get("Mounts", []))
    ]


def leftovers(marker: str, folder: Path) -> list[str]:
    """What a run left: its marked processes and the containers that mount its folder, one line each."""
    found = [f"process {pid}: {command}" for pid, command in marked(marker, folder)]
    found += [f"container {c.short_id} ({c.status}): {c.name}" for c in containers(folder)]
    return found


def clear(marker: str, folder: Path) -> None:
    """Kill what :func:`leftovers` finds (after it was counted)."""
    for pid, _ in marked(marker, folder):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    for container in containers(folder):
        with contextlib.suppress(Exception):
            container.remove(force=True)
