"""Stage "export": a ModelSpec becomes ``model.pt`` (or ``model.pt2``) + ``config.pbtxt`` + eager reference data.

The stage's face: the stage is :mod:`~tritonpt.export.exporting` (:func:`export`, :func:`export_builtin`,
:func:`export_factory`): eager run and its refusals (``eager``), outputs flattened (``outputs``), TorchScript
(``torchscript``) or AOTInductor (``pt2``, ``packages``), config.pbtxt (``config``), kept by ``stamp`` or copied
from ``cache``. ``imported`` takes a file made elsewhere; ``builtin_set`` exports the built-in set for the runs
that check it; ``beside`` builds the backends during an export.
"""

from __future__ import annotations

from tritonpt.export.config import MAX_QUEUE_DELAY_US, WARMUP_COUNT, build_config
from tritonpt.export.exporting import (
    ExportResult,
    builtin_names,
    builtin_parameters,
    export,
    export_builtin,
    export_factory,
    load_factory,
)
from tritonpt.export.stamp import STAMP, restamp
from tritonpt.export.torchscript import torchscript_format
from tritonpt.options import MODEL_FORMATS

__all__ = [
    "MAX_QUEUE_DELAY_US",
    "MODEL_FORMATS",
    "STAMP",
    "WARMUP_COUNT",
    "ExportResult",
    "build_config",
    "builtin_names",
    "builtin_parameters",
    "export",
    "export_builtin",
    "export_factory",
    "load_factory",
    "restamp",
    "torchscript_format",
]
