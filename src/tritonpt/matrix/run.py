"""The matrix as a command (`python -m tritonpt.matrix`, what `tritonpt check` runs): with ``--export-builtin`` the
built-in set exported first, the backend builds the repository needs, then pytest on this package.

Options of the harness (conftest.py) and of pytest pass through as they are. Reports go to ``--reports`` (default
reports/, or reports/shard-K-of-N for a shard), junit.xml among them. The exit code is pytest's: 0 only when every
check passed or was skipped with its reason.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

from tritonpt import backend, shards, stopping
from tritonpt.backend import Step
from tritonpt.errors import ExportError, TritonPtError
from tritonpt.matrix import crash
from tritonpt.options import DEFAULT_REPOSITORY, OPTIONS, add_arguments, resolve_target
from tritonpt.repository import pt2_models

PACKAGE = Path(__file__).resolve().parent
SETTINGS = PACKAGE / "pytest.ini"
ROOT = PACKAGE.parent.parent
"""pytest's rootdir: the folder holding the tritonpt package (src/ in a checkout, site-packages once installed), so
the checks' ids read ``tritonpt/matrix/test_parity.py::test_parity[...]`` wherever it is installed."""


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def pytest_args(args: Sequence[str]) -> list[str]:
    """pytest's command line for the matrix: this package's folder (a path, not ``--pyargs``: pytest reads the
    harness's options from the conftest.py of the paths it is given, before it parses the rest), its own settings,
    then ``args``."""
    return [
        str(PACKAGE),
        "-c",
        str(SETTINGS),
        "--rootdir",
        str(ROOT),
        "-p",
        "no:cacheprovider",
        *args,
    ]


def read_options(args: Sequence[str]) -> argparse.Namespace:
    """The options that decide the builds, the export and the reports, read as the matrix's conftest declares them
    (tritonpt.options); ``reports`` is None where none was given."""
    parser = argparse.ArgumentParser(add_help=False)
    decisive = (
        "repository",
        "target",
        "url",
        "image",
        "pt2_build",
        "sanitize",
        "reports",
        "shard",
        "shard_costs",
    )
    add_arguments(parser.add_argument, (*decisive, "export_builtin"))
    parser.set_defaults(reports=None)
    parser.add_argument("--junitxml")
    known, _ = parser.parse_known_args(list(args))
    return known


def reports_of(known: argparse.Namespace) -> Path:
    """Where the run's reports go: ``--reports``, else a shard's own folder (reports/shard-K-of-N, where
    `nox -s merge-reports` looks), else reports/."""
    if known.reports is not None:
        return Path(known.reports)
    default = Path(str(OPTIONS["reports"].default))
    return default / shards.Shard.parse(known.shard).slug if known.shard else default


def export_builtin(
    repository: Path, *, pt2_build: str, shard: str = "", shard_costs: str = "", step: Step = _say
) -> None:
    """``--export-builtin``: the built-in set exported into ``repository`` where it is model_repository/ (any other
    folder is the user's, checked as it is), by `tritonpt export` in a child process, as a person runs it: both
    formats, the backends built beside it. ``ExportError`` when the export fails."""
    if repository.resolve() != DEFAULT_REPOSITORY.resolve():
        step(f"--export-builtin: {repository} is not {DEFAULT_REPOSITORY}/, so it is checked as it is")
        return
    shards.given(shard, shard_costs)  # refused here, as the export would, before it starts
    command = [sys.executable, "-m", "tritonpt", "export", "--format", "both", "--pt2-build", pt2_build]
    command += ["--shard", shard] if shard else []
    command += ["--shard-costs", shard_costs] if shard_costs else []
    code = stopping.run_stoppable([*command, "--build-backend"], EXPORT_STOP_S)
    if code:
        msg = f"The export of the built-in set failed (exit {code}, above): `{shlex.join(command[2:])}`."
        raise ExportError(msg)


def builds_needed(known: argparse.Namespace) -> bool:
    """Whether the server the options (:func:`read_options`) name runs the cache's builds (a local tritonserver),
    not an image's or a remote server's."""
    return resolve_target(known.target, url=known.url, image=known.image) == "local"


def ensure_builds(
    repository: Path, *, pt2_build: str, sanitizer: backend.Sanitizer | None = None, step: Step = _say
) -> None:
    """The backend builds a local server of ``repository`` needs (instrumented with ``sanitizer`` if one is
    named), from the cache or built (a cold build says what it does as it goes)."""
    backend.ensure_serving(
        pt2=bool(pt2_models(repository)), pt2_patches=pt2_build == "patched", sanitizer=sanitizer, step=step
    )


EXPORT_STOP_S = 60.0
"""How long a stopped ``--export-builtin`` export has to stop its build and remove its staging, before SIGKILL."""
RERUN_COMMAND: list[str] | None = None
"""This run's own command line, ``python -m tritonpt.matrix ARGS``, set by :func:`main`: what the conftest's rerun
policy (tritonpt.matrix.crash.after_abort) replaces the process with after a known crash of the server."""


def main(argv: Sequence[str] | None = None) -> int:
    """Build or reuse the backends, then run the matrix; pytest's exit code, the run recorded
    (tritonpt.matrix.crash.after_run)."""
    import pytest  # noqa: PLC0415 - the command alone needs it

    global RERUN_COMMAND  # noqa: PLW0603 - one command per process, read by the conftest it loads
    args = list(sys.argv[1:] if argv is None else argv)
    RERUN_COMMAND = [sys.executable, "-m", "tritonpt.matrix", *args]
    known = read_options(args)
    asks_help = any(arg in ("-h", "--help") for arg in args)
    try:
        reports = reports_of(known)
        if known.export_builtin and not asks_help:
            export_builtin(
                Path(known.repository),
                pt2_build=known.pt2_build,
                shard=known.shard,
                shard_costs=known.shard_costs,
            )
        if builds_needed(known) and not asks_help:
            ensure_builds(Path(known.repository), pt2_build=known.pt2_build, sanitizer=known.sanitize or None)
    except TritonPtError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as interrupt:
        print("interrupted before the checks: the export and the builds were stopped", file=sys.stderr)
        return stopping.exit_code(interrupt)
    if known.reports is None:
        args.append(f"--reports={reports}")
    if known.junitxml is None:
        args.append(f"--junitxml={reports / 'junit.xml'}")
    code = int(pytest.main(pytest_args(args)))
    if not asks_help:
        crash.after_run(reports, code)
    return code
