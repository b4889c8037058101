"""``tritonpt`` and ``python -m tritonpt``: the invoke tasks of :mod:`tritonpt.tasks` as a program of their own.

tritonpt --list                      the tasks (tritonpt.tasks.PIPELINE)
tritonpt --help export               one task's options
tritonpt export --model my_models:classifier --name classifier
"""

from __future__ import annotations

from invoke.program import Program

from tritonpt import __version__, tasks

program = Program(
    name="tritonpt",
    binary="tritonpt",
    version=__version__,
    namespace=tasks.namespace,
)


def main() -> None:
    """The console script's entry point."""
    program.run()


if __name__ == "__main__":
    main()
