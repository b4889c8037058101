"""The front door for people: the tasks of `tritonpt` (installed) and `invoke` (a checkout, the root tasks.py).

Each task is a function of :mod:`tritonpt.cli`, whose keyword parameters name its options; what each option is
(help, default, choices) is declared once in :data:`tritonpt.options.OPTIONS`. :func:`door` composes the task's
command line from both, refuses a value outside an option's choices, and hands the function typed values (a
``Path``, ``None`` for an option left empty) as its annotations ask.
"""

from __future__ import annotations

import functools
import inspect
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

from invoke import tasks as invoke_tasks
from invoke.collection import Collection
from invoke.context import Context

from tritonpt import cli
from tritonpt.options import OPTIONS, Option


def _help(option: Option) -> str:
    """The option's help, with its default where it has one worth saying."""
    value = option.default
    shown = bool(value) and not isinstance(value, bool) and not (isinstance(value, int | float) and value < 0)
    return (
        f"{option.help} (default {option.default})" if shown and "default" not in option.help else option.help
    )


def _typed(hint: object, value: object) -> object:
    """``value`` as invoke parsed it, made what ``hint`` asks: a Path; None for an optional value left empty (a
    negative number, for an optional count); a list for a sequence."""
    # ``X | None`` is a types.UnionType, ``Literal[...] | None`` a typing.Union
    union = typing.get_origin(hint) in (types.UnionType, typing.Union)
    optional = union and type(None) in typing.get_args(hint)
    kind = next((a for a in typing.get_args(hint) if a is not type(None)), hint) if optional else hint
    if optional and (value in ("", None) or (isinstance(value, int | float) and value < 0)):
        return None
    if kind is Path:
        return Path(str(value))
    if typing.get_origin(kind) is not None and isinstance(value, list | tuple | type(None)):
        return list(value or [])
    return value


def door(work: Callable[..., None]) -> Any:
    """An invoke task from ``work``, whose keyword parameters name its options (each one of OPTIONS): their
    defaults, help, repeatability and place come from there, the values' types from ``work``'s annotations. A value
    outside an option's choices is refused in one paragraph before ``work`` runs. invoke makes up no short flags:
    ``-h`` is help in every task."""
    hints = typing.get_type_hints(work)
    declared = [OPTIONS[name] for name in inspect.signature(work).parameters]

    @functools.wraps(work)
    def run(c: Context, **given: object) -> None:
        from tritonpt.console import guard  # noqa: PLC0415

        with guard(debug=bool(given.get("debug"))):
            for option in declared:
                if not option.repeatable:
                    option.check(given[option.name])
        work(**{o.name: _typed(hints[o.name], given[o.name]) for o in declared})

    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    run.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter("c", kind)]
        + [inspect.Parameter(o.name, kind, default=None if o.repeatable else o.default) for o in declared]
    )
    return invoke_tasks.task(
        run,
        name=work.__name__,
        auto_shortflags=False,
        iterable=[o.name for o in declared if o.repeatable],
        help={o.name: _help(o) for o in declared},
    )


PIPELINE: tuple[Callable[..., None], ...] = (
    cli.export,
    cli.validate,
    cli.build_backend,
    cli.build_image,
    cli.doctor,
    cli.serve,
    cli.check,
    cli.tune,
    cli.migrate,
    cli.merge_reports,
)
"""Every task's work, in the pipeline's order: the one list of tasks (the root tasks.py, ``tritonpt`` and the
tasks page take theirs from :data:`namespace`)."""
TASKS: tuple[invoke_tasks.Task[Any], ...] = tuple(door(work) for work in PIPELINE)
namespace = Collection(*TASKS)
"""What `invoke` (a checkout's tasks.py) and `tritonpt` offer."""
