"""The built-in set exported for a run that checks it (the matrix's ``--export-builtin``, the bench, tune, the
soak, the cycles): by `tritonpt export` in a child process, as a person runs it, both formats, the backends built
beside it."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from tritonpt import shards, stopping
from tritonpt.backend import Step
from tritonpt.errors import ExportError
from tritonpt.options import DEFAULT_REPOSITORY

EXPORT_STOP_S = 60.0
"""How long a stopped export has to stop its build and remove its staging, before SIGKILL."""


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def export_builtin_set(
    repository: Path,
    *,
    pt2_build: str,
    shard: shards.Shard | None = None,
    costs: shards.Costs | None = None,
    step: Step = _say,
) -> None:
    """The built-in set exported into ``repository`` where it is model_repository/ (any other folder is the
    user's, checked as it is): both formats (the PT2 copies for ``pt2_build``), a shard's part only, the backends
    built beside it. ``ExportError`` when the export fails."""
    if repository.resolve() != DEFAULT_REPOSITORY.resolve():
        step(f"--export-builtin: {repository} is not {DEFAULT_REPOSITORY}/, so it is checked as it is")
        return
    command = [sys.executable, "-m", "tritonpt", "export", "--format", "both", "--pt2-build", pt2_build]
    command += ["--shard", f"{shard.index}/{shard.count}"] if shard else []
    command += ["--shard-costs", costs.source] if shard and costs and costs.source else []
    code = stopping.run_stoppable([*command, "--build-backend"], EXPORT_STOP_S)
    if code:
        msg = f"The export of the built-in set failed (exit {code}, above): `{shlex.join(command[2:])}`."
        raise ExportError(msg)
