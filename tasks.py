"""invoke's front door in a checkout: `invoke --list`. The tasks themselves live in src/tritonpt/tasks.py, so
that `tritonpt` (the console script of an installed package) offers exactly the same ones."""

from tritonpt.tasks import (
    build_backend,
    build_image,
    check,
    doctor,
    export,
    merge_reports,
    serve,
    tune,
    validate,
)

__all__ = [
    "build_backend",
    "build_image",
    "check",
    "doctor",
    "export",
    "merge_reports",
    "serve",
    "tune",
    "validate",
]
