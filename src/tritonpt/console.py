"""How the front doors (tasks.py, noxfile.py) talk to a person: progress lines, problems and exit codes.

Errors this package raises on purpose are printed as their message alone (no traceback unless
``TRITONPT_DEBUG=1`` or ``--debug``) and end the command with exit code 1.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator, Sequence

from rich.console import Console
from rich.markup import escape

from tritonpt import stopping
from tritonpt.errors import Problem, TritonPtError, ValidationError

err = Console(stderr=True, highlight=False, soft_wrap=True)
out = Console(highlight=False, soft_wrap=True)


class Progress:
    """Step lines with the time since the command started: ``[  4.2s] [resnet18] tracing``."""

    def __init__(self) -> None:
        self._started = time.perf_counter()

    def __call__(self, message: str) -> None:
        err.print(f"[dim]\\[{time.perf_counter() - self._started:6.1f}s][/dim] {escape(message)}")
        stopping.hold_at(message)  # a fault test's pause at this step ($TRITONPT_HOLD_AT), else nothing


def print_problems(problems: Sequence[Problem]) -> None:
    for problem in problems:
        colour = "red" if problem.severity == "error" else "yellow"
        head, _, fix = problem.render().partition("\n")
        err.print(f"[{colour}]{escape(head)}[/{colour}]\n{escape(fix)}\n")
    errors = sum(p.severity == "error" for p in problems)
    warnings = len(problems) - errors
    if problems:
        err.print(f"{errors} error(s), {warnings} warning(s).")


@contextlib.contextmanager
def guard(*, debug: bool = False) -> Iterator[None]:
    """Turn this package's errors into a short message and exit code 1; SIGTERM, SIGHUP and SIGINT (even one
    ignored on entry) stop the block as Ctrl-C does (servers and containers are stopped on the way out), exit
    128 + the signal's number."""
    try:
        with stopping.stop_signals_interrupt():
            yield
    except TritonPtError as exc:
        if debug or os.environ.get("TRITONPT_DEBUG") == "1":
            err.print_exception()
        problems = getattr(exc, "problems", None)
        if problems:
            print_problems(problems)
            if isinstance(exc, ValidationError) and exc.outcome:
                err.print(escape(exc.outcome))
        else:
            err.print(f"[red]error:[/red] {escape(str(exc))}")
        sys.exit(1)
    except KeyboardInterrupt as interrupt:
        which = f" ({interrupt.args[0]})" if isinstance(interrupt, stopping.Interrupted) else ""
        err.print(f"[yellow]interrupted{which}[/yellow]")
        sys.exit(stopping.exit_code(interrupt))
