"""invoke's front door in a checkout: `invoke --list`. The tasks live in src/tritonpt/tasks.py, so that `tritonpt`
(the console script of an installed package) offers exactly the same ones; invoke takes a tasks.py's
``namespace``."""

from tritonpt.tasks import namespace

__all__ = ["namespace"]
