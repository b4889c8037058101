"""The matrix as a command (`python -m tritonpt.matrix`, what `tritonpt check` runs): with ``--export-builtin`` the
built-in set exported first, the backend builds the repository needs, then pytest on this package.

The matrix's options are read once into :class:`~tritonpt.matrix.settings.Settings`, which pytest is handed as a
plugin; the rest of the command line is pytest's. Reports go to ``--reports`` (default reports/, or
reports/shard-K-of-N for a shard), junit.xml among them. The exit code is pytest's: 0 only when every check passed
or was skipped with its reason.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from tritonpt import backend, stopping
from tritonpt.backend import Step
from tritonpt.errors import SpecError, TritonPtError
from tritonpt.export.builtin_set import export_builtin_set
from tritonpt.matrix import crash
from tritonpt.matrix.settings import NAMES, Plugin, Settings, parse, parser
from tritonpt.options import OPTIONS, resolve_target
from tritonpt.repository import pt2_models

PACKAGE = Path(__file__).resolve().parent
INI = PACKAGE / "pytest.ini"
ROOT = PACKAGE.parent.parent
"""pytest's rootdir: the folder holding the tritonpt package (src/ in a checkout, site-packages once installed), so
the checks' ids read ``tritonpt/matrix/test_parity.py::test_parity[...]`` wherever it is installed."""


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def pytest_args_of(args: Sequence[str]) -> list[str]:
    """pytest's command line for the matrix: this package's folder (a path, not ``--pyargs``: pytest loads the
    conftest.py of the paths it is given as the harness), its own settings, then ``args``."""
    return [
        str(PACKAGE),
        "-c",
        str(INI),
        "--rootdir",
        str(ROOT),
        "-p",
        "no:cacheprovider",
        *args,
    ]


def builds_needed(given: Settings) -> bool:
    """Whether the server the settings name runs the cache's builds (a local tritonserver), not an image's or a
    remote server's."""
    return resolve_target(given.target, url=given.url, image=given.image) == "local"


def ensure_builds(
    repository: Path, *, pt2_build: str, sanitizer: backend.Sanitizer | None = None, step: Step = _say
) -> None:
    """The backend builds a local server of ``repository`` needs (instrumented with ``sanitizer`` if one is
    named), from the cache or built (a cold build says what it does as it goes)."""
    backend.ensure_serving(
        pt2=bool(pt2_models(repository)), pt2_patches=pt2_build == "patched", sanitizer=sanitizer, step=step
    )


RERUN_COMMAND: list[str] | None = None
"""This run's own command line, ``python -m tritonpt.matrix ARGS``, set by :func:`run`: what the conftest's rerun
policy (tritonpt.matrix.crash.after_abort) replaces the process with after a known crash of the server."""


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m tritonpt.matrix``: the command line read once into the settings, then :func:`run`."""
    args = list(sys.argv[1:] if argv is None else argv)
    if any(arg in ("-h", "--help") for arg in args):
        parser().print_help()
        print("\npytest's own options pass through (python -m pytest --help lists them).")
        return 0
    try:
        given, rest = parse(args)
    except TritonPtError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return run(given, rest)


def checked(values: Mapping[str, object], pytest_args: Sequence[str]) -> int:
    """`tritonpt check`: the matrix on ``values`` (every option of the matrix, as the task typed it) and pytest's
    own ``pytest_args``; one of the matrix's options among those is refused, naming the task's own flag."""
    flags = {OPTIONS[name].flag for name in NAMES} | {f"--no-{OPTIONS[n].flag[2:]}" for n in NAMES}
    theirs = sorted({arg.split("=", 1)[0] for arg in pytest_args} & flags)
    if theirs:
        msg = (
            f"--pytest {shlex.join(pytest_args)!r} holds {', '.join(theirs)}, an option of the matrix: give it to "
            f"`tritonpt check` itself (`tritonpt check {theirs[0]} ...`); --pytest takes pytest's own options only."
        )
        raise SpecError(msg)
    return run(Settings.of(values), pytest_args)


def run(given: Settings, pytest_args: Sequence[str] = ()) -> int:
    """Export the built-in set where asked, build or reuse the backends, then run the matrix with ``given`` handed
    to its conftest; pytest's exit code, the run recorded (tritonpt.matrix.crash.after_run)."""
    import pytest  # noqa: PLC0415 - the command alone needs it

    global RERUN_COMMAND  # noqa: PLW0603 - one command per process, read by the conftest it loads
    args = list(pytest_args)
    RERUN_COMMAND = [sys.executable, "-m", "tritonpt.matrix", *given.line, *args]
    if any(arg in ("-h", "--help") for arg in args):  # pytest's help: nothing exported, built or recorded
        return int(pytest.main(pytest_args_of(args), plugins=[Plugin(given)]))
    try:
        if given.export_builtin:
            export_builtin_set(
                given.repository, pt2_build=given.pt2_build, shard=given.shard, costs=given.costs, step=_say
            )
        if builds_needed(given):
            ensure_builds(given.repository, pt2_build=given.pt2_build, sanitizer=given.sanitize)
    except TritonPtError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as interrupt:
        print("interrupted before the checks: the export and the builds were stopped", file=sys.stderr)
        return stopping.exit_code(interrupt)
    junit = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    junit.add_argument("--junitxml")
    if junit.parse_known_args(args)[0].junitxml is None:
        args.append(f"--junitxml={given.reports / 'junit.xml'}")
    code = int(pytest.main(pytest_args_of(args), plugins=[Plugin(given)]))
    crash.after_run(given.reports, code)
    return code
