"""TorchScript through one door: ``trace``, ``script``, ``save`` and ``load`` as every stage calls them.

torch 2.12 deprecates ``torch.jit`` (a DeprecationWarning on load); torch 2.15 warns on every trace, script, save
and load (a FutureWarning, shown by default: "`torch.jit.save` is deprecated. Please switch to `torch.export`.").
The files still load, and the pytorch backend's libtorch still serves them. Here that warning is caught, never an
error where warnings are errors (the matrix's pytest, the tests), and the user is told once per process, in one
line that says what to do (:data:`MOVE`); any other warning passes as before.
"""

from __future__ import annotations

import contextlib
import re
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

from tritonpt.errors import HINT, ExportError, first_line

DEPRECATED = re.compile(r"`torch\.jit\.\w+` is deprecated")
MOVE = (
    "note: torch {version} deprecates TorchScript (torch.jit.* warns that it is deprecated); model.pt still "
    "exports and Triton's pytorch_libtorch still serves it, but the way forward is PT2 (torch_aoti): "
    "`tritonpt export --format pt2` for a model you define, `tritonpt migrate` for the model.pt files you have."
)
"""The one line a user is told, the first time torch warns that TorchScript is deprecated."""

_told: list[str] = []


def tell(line: str) -> None:
    """Where the note goes: standard error (a test may swap this for a list's append)."""
    print(line, file=sys.stderr, flush=True)


class TorchScriptRefusedError(ExportError):
    """This torch refuses to write or read TorchScript at all (a torch.jit call raised its deprecation)."""


@contextlib.contextmanager
def _deprecation_told(operation: str) -> Iterator[None]:
    """Run torch.jit with its deprecation caught; the first one of this process is told (:data:`MOVE`). Where
    the deprecation is raised instead (a torch that turned it into an error), :class:`TorchScriptRefusedError`."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            yield
        except Exception as exc:  # torch raises RuntimeError, or whatever its deprecation is made of
            if not DEPRECATED.search(str(exc)):
                raise
            fix = (
                "read the file with a torch that still reads TorchScript (2.15 and older do, with a warning), and "
                "move the repository to torch_aoti there (`tritonpt migrate`)"
                if operation == "load"
                else "export the model as PT2 (`tritonpt export --format pt2`, platform torch_aoti), which this "
                "torch writes, or use a torch that still writes TorchScript (2.15 and older do, with a warning)"
            )
            msg = (
                f"torch {torch.__version__} refuses TorchScript: torch.jit.{operation} raised "
                f"{type(exc).__name__}: {first_line(exc)} {HINT} {fix}."
            )
            raise TorchScriptRefusedError(msg) from exc
    for found in caught:
        if DEPRECATED.search(str(found.message)):
            if not _told:
                _told.append(torch.__version__)
                tell(MOVE.format(version=torch.__version__))
            continue
        warnings.warn_explicit(
            found.message, found.category, found.filename, found.lineno, source=found.source
        )


def deprecated_in_this_torch() -> bool:
    """Whether this torch has warned in this process that TorchScript is deprecated (what the note said)."""
    return bool(_told)


def load(path: Path | str) -> Any:  # noqa: ANN401 - a ScriptModule, whose methods (forward.schema) torch leaves untyped
    """``torch.jit.load(path, map_location="cpu").eval()``."""
    with _deprecation_told("load"):
        module = torch.jit.load(str(path), map_location="cpu")
    return module.eval()


def save(module: torch.jit.ScriptModule, path: Path | str) -> None:
    """``torch.jit.save(module, path)``."""
    with _deprecation_told("save"):
        torch.jit.save(module, str(path))


def script(module: torch.nn.Module) -> Any:  # noqa: ANN401 - a ScriptModule (torch types it as its input)
    """``torch.jit.script(module)``."""
    with _deprecation_told("script"):
        return torch.jit.script(module)


def trace(module: Callable[..., Any], inputs: tuple[torch.Tensor, ...], **options: Any) -> Any:  # noqa: ANN401
    """``torch.jit.trace(module, inputs, **options)``; the tracer's own warnings pass to the caller."""
    with _deprecation_told("trace"):
        return torch.jit.trace(module, inputs, **options)
