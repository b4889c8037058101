"""How a CI program (the soak, the cycles, the zoo) runs its work: a stop signal stops it as Ctrl-C does, an error
of the package is said in one line, and each ends with its exit code, the same in every program."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

from tritonpt import stopping
from tritonpt.errors import TritonPtError


def say(line: str) -> None:
    """A progress line on stderr, flushed."""
    print(line, file=sys.stderr, flush=True)


@contextlib.contextmanager
def work(name: str) -> Iterator[None]:
    """The body of ``name``'s run: its servers are stopped on the way out of a stop (exit 128 + the signal's
    number, or 130 for Ctrl-C) or an error of the package (exit 1), each said in one line; nothing is reported."""
    try:
        with stopping.stop_signals_interrupt():
            yield
    except TritonPtError as exc:
        say(f"error: {exc}")
        raise SystemExit(1) from None
    except KeyboardInterrupt as interrupt:
        say(f"{name}: interrupted; the server was stopped and no report was written")
        raise SystemExit(stopping.exit_code(interrupt)) from None
