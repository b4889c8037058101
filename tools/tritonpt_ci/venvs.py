"""One virtual environment per set of dependencies, shared by every nox session, clone and act job that needs it.

    shared(project, groups=..., packages=...) -> Env    <cache>/venvs/<groups>-<key>: made once, under a lock
    Env.variables(project)                              VIRTUAL_ENV, PATH, PYTHONPATH=<project>/src:<project>/tools

An environment holds the dependencies only, never the project: a session puts its own checkout's ``src`` and
``tools`` on PYTHONPATH, so two checkouts (an act job's copy beside the outer run) share one environment. The key
is a sha256 of what is installed (pyproject.toml's dependencies and dependency groups, the Python, the groups, the
packages), not of the files' other settings. Standard library only: noxfile.py reads it before any install.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
import tomllib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from tritonpt import caches

DONE = "tritonpt-env.json"
"""Written last into a finished environment: what it was made from. Without it, a folder is half-made."""
KEEP = 12
"""Environments kept (the most recently used); a change of the dependencies or the pins makes new ones."""
IDLE_S = 24 * 3600
"""An environment beyond :data:`KEEP` is removed only once unused this long (another checkout may be using it)."""
IMPORTABLE = ("src", "tools")
"""The checkout's folders a session's commands import from: the package, and this repository's own tools."""


@dataclass(frozen=True, kw_only=True)
class Env:
    """A shared environment: its folder and what it was made from."""

    location: Path
    key: str

    def bin(self, program: str) -> str:
        """The environment's ``program`` (its console scripts: pytest, invoke, ruff, ...)."""
        return str(self.location / "bin" / program)

    @property
    def python(self) -> str:
        return self.bin("python")

    def variables(self, project: Path) -> dict[str, str]:
        """What a session's commands run with: this environment first on PATH, ``project``'s src importable."""
        path = os.pathsep.join([str(self.location / "bin"), os.environ.get("PATH", "")])
        importable = os.pathsep.join(str(project / folder) for folder in IMPORTABLE)
        return {"VIRTUAL_ENV": str(self.location), "PATH": path, "PYTHONPATH": importable}


def key_of(
    project: Path,
    *,
    python: str,
    groups: Sequence[str],
    packages: Sequence[str],
    overrides: Sequence[str] = (),
) -> str:
    """16 hex digits naming what an environment installs: pyproject.toml's requirements (read, so that a change of
    its lint or build settings keeps the environments), the Python, the groups, the packages, the overrides."""
    declared = tomllib.loads((project / "pyproject.toml").read_text(encoding="utf-8"))
    wanted = {
        "python": declared["project"].get("requires-python"),
        "dependencies": declared["project"].get("dependencies", []),
        "groups": declared.get("dependency-groups", {}),
    }
    digest = hashlib.sha256(json.dumps(wanted, sort_keys=True).encode())
    over = ("--override", *sorted(overrides)) if overrides else ()
    for part in (python, *sorted(groups), "--", *sorted(packages), *over):
        digest.update(b"\0" + part.encode())
    return digest.hexdigest()[:16]


def shared(
    project: Path,
    *,
    python: str,
    groups: Sequence[str] = (),
    packages: Sequence[str] = (),
    overrides: Sequence[str] = (),
    label: str = "",
    say: Callable[[str], None] | None = None,
) -> Env:
    """The environment for these dependencies: found, or made now with uv (from its cache: seconds once torch is
    there), its folder named ``label`` (default: the groups) and the key. ``overrides`` replace what
    pyproject.toml asks for (uv's ``--override``: another torch than its range admits, for `nox -s compat`).
    Processes that ask at once wait on one lock; the first makes it, the others find it."""
    key = key_of(project, python=python, groups=groups, packages=packages, overrides=overrides)
    root = caches.root() / "venvs"
    root.mkdir(parents=True, exist_ok=True)
    name = f"{label or '-'.join(groups) or 'base'}-{key}"
    env = Env(location=root / name, key=key)
    with _locked(root / f"{name}.lock"):
        if (env.location / DONE).is_file():
            os.utime(env.location / DONE)  # used now: pruned last
            caches.note("venv", name, hit=True, say=say)
            return env
        started = time.perf_counter()
        shutil.rmtree(env.location, ignore_errors=True)  # half-made by a run that was stopped
        found = shutil.which("uv")
        uv = [found] if found else [sys.executable, "-m", "uv"]
        subprocess.run([*uv, "venv", "-q", "--python", python, str(env.location)], check=True)
        install = [*uv, "pip", "install", "-q", "--python", env.python, "-r", "pyproject.toml"]
        install += [arg for group in groups for arg in ("--group", group)]
        if overrides:
            wanted = env.location / "overrides.txt"
            wanted.write_text("".join(f"{o}\n" for o in overrides), encoding="utf-8")
            install += ["--override", str(wanted)]
        subprocess.run([*install, *packages], check=True, cwd=project)
        made = {"key": key, "groups": list(groups), "packages": list(packages), "python": python}
        made["overrides"] = list(overrides)
        (env.location / DONE).write_text(json.dumps(made, indent=2) + "\n", encoding="utf-8")
    caches.note("venv", name, hit=False, seconds=time.perf_counter() - started, say=say)
    _prune(root)
    return env


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _prune(root: Path) -> None:
    made = sorted(
        (p for p in root.iterdir() if (p / DONE).is_file()),
        key=lambda p: (p / DONE).stat().st_mtime,
        reverse=True,
    )
    for old in made[KEEP:]:
        with contextlib.suppress(OSError), _locked(root / f"{old.name}.lock"):
            if time.time() - (old / DONE).stat().st_mtime > IDLE_S:
                shutil.rmtree(old, ignore_errors=True)
