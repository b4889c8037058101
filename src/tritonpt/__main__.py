"""``tritonpt`` and ``python -m tritonpt``: the invoke tasks of :mod:`tritonpt.tasks` as a program of their own.

tritonpt --list                      the tasks (tritonpt.tasks.PIPELINE)
tritonpt --help export               one task's options
tritonpt export --model my_models:classifier --name classifier
"""

from __future__ import annotations

from tritonpt import stopping

LOADING = stopping.quiet_while_loading()  # a stop while the imports below run: exit at once, no traceback

from invoke.program import Program  # noqa: E402

from tritonpt import __version__, tasks  # noqa: E402

program = Program(
    name="tritonpt",
    binary="tritonpt",
    version=__version__,
    namespace=tasks.namespace,
)


def main() -> None:
    """The console script's entry point."""
    stopping.restore(LOADING)  # loaded: each task handles its stops
    program.run()


if __name__ == "__main__":
    main()
