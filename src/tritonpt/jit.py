"""TorchScript files loaded in-process as every stage loads them: ``load(path)``, on the CPU, in eval mode.

torch 2.12 deprecates ``torch.jit`` (``DeprecationWarning: `torch.jit.load` is deprecated``). The file still
loads, and the pytorch backend's libtorch still reads it; where warnings are errors (the matrix's pytest, the
tests), that warning would stand in for the load's own outcome (seen in `nox -s compat`: every TorchScript model
refused as unloadable under torch 2.12.1). Only that warning is ignored here; any other is raised as before.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import torch

DEPRECATED = r"`torch\.jit\.\w+` is deprecated"


def load(path: Path | str) -> Any:  # noqa: ANN401 - a ScriptModule, whose methods (forward.schema) torch leaves untyped
    """``torch.jit.load(path, map_location="cpu").eval()``, without torch 2.12's deprecation warning."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=DEPRECATED, category=DeprecationWarning)
        module = torch.jit.load(str(path), map_location="cpu")
    return module.eval()
