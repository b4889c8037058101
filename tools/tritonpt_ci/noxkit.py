"""What noxfile.py's sessions share, so that the noxfile is a list of sessions.

    session(...)                    nox.session, timed into the run's table, a proof of the tree reused
    install(session, *groups)       the shared environment (tritonpt_ci.venvs) for the session's commands
    run / pytest / matrix           a program of that environment; pytest; python -m tritonpt.matrix
    missing(session, reason)        skipped, saying why; an error under CI=true

Imported before any install: the standard library, nox and this repository's stdlib-only modules.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nox

from tritonpt import stopping
from tritonpt.versions import VERSIONS
from tritonpt_ci import proofs, timings, venvs

ROOT = Path(__file__).resolve().parents[2]
"""The checkout whose noxfile imported this (each act job's copy has its own)."""
PYTHON = "3.11"
"""Every session's Python: the offline stand-in image runs Debian bookworm's 3.11 and mounts a session's packages."""
PINS = (
    f"torch=={VERSIONS.pytorch.torch}",
    f"torchvision=={VERSIONS.pytorch.torchvision}",
    f"cmake=={VERSIONS.backend.cmake}",
)
RUN = timings.Run.current()
"""This run: every session's seconds go to reports/timings/, and the caches' hits and misses of every process below
(act's jobs, nested noxes) to the run's ledger; the `timings` session prints both last."""
DURATIONS = ("--durations=15", "--durations-min=2")
"""The slowest tests of a heavy tier, at the end of its output."""
SIDE_BY_SIDE = ("-n", "auto", "--dist", "loadfile")
"""pytest-xdist: one worker per core, each test file whole on one worker (a module's fixtures and the reliability
part it writes stay in one process). For the tiers whose tests share nothing but the caches: unit and system; and
faults, each marked by its own environment, folder and repository (tests/faults/injector.py), so what one leaves is
not counted as another's, and every one that uses the Docker engine in one file (one of them stops the engine).
(Not ``--dist loadgroup``: pytest-xdist 3.8 names a group in ``item._nodeid``, which pytest 9 no longer reads, so
its ``xdist_group`` marks are ignored, seen here.)"""
BARE = {"PYTHONPATH": os.pathsep.join(str(ROOT / folder) for folder in venvs.IMPORTABLE)}
"""The environment of a session that installs nothing (its program is standard library only): the checkout's
own folders importable."""


class _Missing(Exception):  # noqa: N818 - a skip, said by :func:`missing`
    """A prerequisite this machine lacks: the session is skipped (its wrapper says so to nox)."""


def session(
    *, name: str | None = None, default: bool = True, of_the_tree: bool = False
) -> Callable[[Callable[[nox.Session], None]], object]:
    """``nox.session``, each run timed into this run's table (tritonpt_ci.timings). ``of_the_tree``: what the
    session proves depends on the checkout's files alone (and the pinned dependencies), so a pass is recorded as a
    proof for that tree, which an act job of the same tree reuses instead of running it again
    (tritonpt_ci.proofs; only where $TRITONPT_PROOFS=reuse, which the workflows tier sets).

    A stop sent to nox alone (a CI runner cancelling the step, systemd, `kill`) is passed on to the running command
    as Ctrl-C, which stops its servers and containers while nox waits for it (``interrupt_timeout``); SIGTERM and
    SIGHUP end nox as Ctrl-C does (tritonpt.stopping): set as each session starts, not when nox reads the file."""

    def register(func: Callable[[nox.Session], None]) -> object:
        @functools.wraps(func)
        def timed(session: nox.Session) -> None:
            stopping.forward_stop_signals()
            started, wall = time.perf_counter(), time.time()
            tree = _tree() if of_the_tree else None
            proof = proofs.find(session.name, session.posargs, tree) if tree else None
            if proof is not None:
                session.log(proof.describe())
                RUN.record(session.name, status="proved before", seconds=0.0, started=wall)
                return
            status = "failed"
            try:
                func(session)
                status = "success"
            except _Missing as lacking:
                status = "skipped"
                session.skip(str(lacking))
            except KeyboardInterrupt:
                status = "interrupted"
                raise
            finally:
                seconds = time.perf_counter() - started
                RUN.record(session.name, status=status, seconds=seconds, started=wall)
            if tree:
                proofs.record(session.name, session.posargs, tree, run=RUN.id, seconds=seconds)

        return nox.session(name=name, default=default)(timed)

    return register


@functools.cache
def _tree() -> str | None:
    """The digest of this checkout's files, once per nox (tritonpt_ci.proofs)."""
    return proofs.tree_digest(ROOT)


def install(session: nox.Session, *groups: str, packages: tuple[str, ...] = ()) -> venvs.Env:
    """The shared environment of these dependency groups (and ``packages``) for this session's commands: made
    once for every session, clone and act job that needs the same (tritonpt_ci.venvs)."""
    label = "-".join([*groups, *(p.split("=")[0] for p in packages)])
    env = venvs.shared(
        ROOT, python=PYTHON, groups=groups, packages=(*PINS, *packages), label=label, say=session.log
    )
    session.env.update(env.variables(ROOT))
    return env


def run(session: nox.Session, program: str, *args: str, **kwargs: Any) -> Any:  # noqa: ANN401 - session.run's
    """``session.run`` of ``program`` from the session's environment (nox itself looks only on its own PATH)."""
    venv = session.env.get("VIRTUAL_ENV")
    found = shutil.which(program, path=str(Path(venv) / "bin")) if venv else None
    return session.run(found or program, *args, **kwargs)


def pytest(session: nox.Session, *args: str) -> None:
    """pytest, its slowest tests listed at the end, with time on Ctrl-C for fixtures to stop servers and containers
    (nox's default is 0.3 s)."""
    run(session, "pytest", *DURATIONS, *args, interrupt_timeout=30.0, terminate_timeout=10.0)


def matrix(session: nox.Session, *args: str) -> None:
    """The integration matrix, `python -m tritonpt.matrix` (what `tritonpt check` runs): its options and pytest's."""
    run(session, "python", "-m", "tritonpt.matrix", *args, interrupt_timeout=30.0, terminate_timeout=10.0)


def missing(session: nox.Session, reason: str) -> None:
    """A prerequisite this machine lacks: the session is skipped, saying so, except under CI=true, which must
    provide it (as tests/prerequisites.py fails such a test there)."""
    if os.environ.get("CI", "").lower() == "true":
        session.error(f"CI=true, and {reason}")
    raise _Missing(reason)


def docker_answers() -> bool:
    """Whether a Docker engine answers `docker version`."""
    if shutil.which("docker") is None:
        return False
    return subprocess.run(["docker", "version"], capture_output=True, check=False, timeout=60).returncode == 0
