"""nox sessions: the pipeline's front door for CI and for anyone checking a change.

    nox -s lint          ruff, mypy; hadolint on docker/, zizmor + check-jsonschema on workflows
    nox -s unit          fast tests with real torch and real protobuf
    nox -s integration   export the built-in models, start Triton, run the integration matrix

Every session installs the exact torch pins from src/tritonpt/versions.toml. The uv backend hard-links
packages from its cache, so the multi-gigabyte torch install is downloaded once and shared by all sessions.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nox

sys.path.insert(0, str(Path(__file__).parent / "src"))
from tritonpt.versions import VERSIONS

nox.needs_version = ">=2025.2.9"
nox.options.default_venv_backend = "uv"
nox.options.error_on_missing_interpreters = True

PYTHON = "3.11"
PINS = (f"torch=={VERSIONS.pytorch.torch}", f"torchvision=={VERSIONS.pytorch.torchvision}")


def _install(session: nox.Session, *groups: str) -> None:
    group_args = [arg for group in groups for arg in ("--group", group)]
    session.install("-e", ".", *PINS, *group_args)


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """Lint and type-check: ruff check, ruff format --check, mypy (strict)."""
    _install(session, "lint")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("mypy")


@nox.session(python=PYTHON)
def unit(session: nox.Session) -> None:
    """Unit tests: export, config, validation, reference data, with real torch and protobuf."""
    _install(session, "test")
    session.run("pytest", "tests/unit", *session.posargs)


@nox.session(python=PYTHON)
def integration(session: nox.Session) -> None:
    """Export the built-in models, start Triton (--target auto|local|url|container) and run the matrix.

    Arguments after `--` go to pytest, e.g. `nox -s integration -- --target url --url http://host:8000 -k parity`.
    With `--repository DIR` your own repository is tested as it is; otherwise the built-in set is exported
    into model_repository/ first.
    """
    _install(session, "test")
    if not any(arg.startswith("--repository") for arg in session.posargs):
        session.run("invoke", "export")
    session.run(
        "pytest",
        "tests/integration",
        "--junitxml=reports/junit.xml",
        *session.posargs,
        interrupt_timeout=30.0,
        terminate_timeout=10.0,
    )
