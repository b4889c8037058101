"""The matrix as a command: the backend builds the repository needs, then pytest on this package.

Options of the harness (conftest.py) and of pytest pass through as they are; the command only reads those that
decide which builds to make: ``--repository`` (the PT2 build where it holds torch_aoti models), ``--target`` (a
server of the cache's builds runs for ``local``, and for ``auto`` without ``--url`` or ``--image``) and
``--pt2-build`` and ``--sanitize`` (the builds instrumented with ASan or UBSan). Reports go to ``--reports``
(default ``reports``), junit.xml among them unless ``--junitxml`` says otherwise. The exit code is pytest's: 0
only when every check passed or was skipped with its reason.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from tritonpt import backend
from tritonpt.backend import Step
from tritonpt.errors import TritonPtError
from tritonpt.matrix import crash
from tritonpt.options import add_arguments
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


def _known(args: Sequence[str]) -> argparse.Namespace:
    """The options that decide the builds, read as the matrix's conftest declares them (tritonpt.options)."""
    parser = argparse.ArgumentParser(add_help=False)
    add_arguments(
        parser.add_argument, ("repository", "target", "url", "image", "pt2_build", "sanitize", "reports")
    )
    parser.add_argument("--junitxml")
    known, _ = parser.parse_known_args(list(args))
    return known


def builds_needed(args: Sequence[str]) -> bool:
    """Whether the server the options name runs the cache's builds (a local tritonserver), not an image's or a
    remote server's."""
    known = _known(args)
    return known.target == "local" or (known.target == "auto" and not known.url and not known.image)


def ensure_builds(
    repository: Path, *, pt2_build: str, sanitizer: backend.Sanitizer | None = None, step: Step = _say
) -> None:
    """The backend builds a local server of ``repository`` needs (instrumented with ``sanitizer`` if one is
    named), from the cache or built (a cold build says what it does as it goes)."""
    backend.ensure_serving(
        pt2=bool(pt2_models(repository)), pt2_patches=pt2_build == "patched", sanitizer=sanitizer, step=step
    )


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
    known = _known(args)
    asks_help = any(arg in ("-h", "--help") for arg in args)
    if builds_needed(args) and not asks_help:
        try:
            ensure_builds(Path(known.repository), pt2_build=known.pt2_build, sanitizer=known.sanitize or None)
        except TritonPtError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
    if known.junitxml is None:
        args.append(f"--junitxml={Path(known.reports) / 'junit.xml'}")
    code = int(pytest.main(pytest_args(args)))
    if not asks_help:
        crash.after_run(Path(known.reports), code)
    return code
