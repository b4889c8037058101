"""What a model file is run on: inputs shaped and typed as the config declares, and the reference cases that
fit the config (family D, the reference data parity sends; and M012, a config too large to run on).

Triton never reads reference.json or reference.npz, so every D rule is a warning: the model serves, but the
parity checks have less (or nothing) to compare with.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
from tritonclient.grpc.model_config_pb2 import ModelConfig, ModelInput

from tritonpt import dtypes, reference
from tritonpt.errors import ReferenceDataError
from tritonpt.repository import ModelDir
from tritonpt.validate.rules import Findings, config_type, dims_match, model_shape, reshape_refusal, rule

TOO_LARGE = rule(
    "M012",
    "dims that ask for more than 2^28 elements in one request",
    why="Warning: the model is not run on such dims here.",
    example=(
        'input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 16384, 16384, 2 ] } ]  # 2^29 elements'
    ),
)
NO_REFERENCE = rule(
    "D001",
    "no reference data",
    why=(
        "Warning: parity holds the served model to its own file run in-process (tritonpt.in_process), which "
        "cannot show what an export changed (Triton never reads the reference data)."
    ),
    example="a model folder with neither reference.json nor reference.npz",
)
UNREADABLE = rule(
    "D002",
    "reference.json or reference.npz that cannot be read",
    why="Warning: Triton never reads them, and parity has nothing to compare with.",
    example="a reference.json that is not JSON, a damaged reference.npz, or one with a wrong dtype",
)
MISFIT = rule(
    "D003",
    "a reference case whose inputs no longer fit the config",
    why="Warning: parity cannot send it.",
    example="reference cases of 4 features, after the config's input changed to dims: [ 8 ]",
)
FAILS = rule(
    "D004",
    "a reference case the model fails on",
    why="Warning: Triton serves the model, and the case fails the same way.",
    example="a reference case whose inputs the model raises on",
)

SYNTH_LENGTH = 5
"""The length sent on a -1 axis: any length must work there, and no exporter picks 5 by accident."""
SYNTH_MAX_ELEMENTS = 2**28
"""1 GiB of float32: far beyond any model's input, well below what numpy refuses."""
SYNTHESIZED = "inputs shaped and typed as the config declares"

Array = npt.NDArray[np.generic]


@dataclass(frozen=True, kw_only=True)
class Feed:
    """One set of inputs, in config order, and what it is (for messages)."""

    what: str
    arrays: list[Array]

    @property
    def synthesized(self) -> bool:
        return self.what == SYNTHESIZED

    def shapes(self, config: ModelConfig) -> str:
        return ", ".join(
            f"{t.name} {list(a.shape)} {a.dtype}" for t, a in zip(config.input, self.arrays, strict=True)
        )


def feeds(model: ModelDir, config: ModelConfig, findings: Findings) -> list[Feed]:
    """Config-shaped zeros first (when they fit in memory), then every reference case that fits the config."""
    found = []
    synthesized = synthesize(config, model.config, findings)
    if synthesized is not None:
        found.append(Feed(what=SYNTHESIZED, arrays=synthesized))
    return found + reference_feeds(model, config, findings)


def synthesize(config: ModelConfig, path: Path, findings: Findings) -> list[Array] | None:
    """Zeros of the declared type and dims: -1 axes get :data:`SYNTH_LENGTH`, batch 2 (or 1).

    None (and a warning) when the dims ask for more than :data:`SYNTH_MAX_ELEMENTS` elements in all.
    """
    shapes = []
    for tensor in config.input:
        shape = [(SYNTH_LENGTH if d == -1 else d) for d in tensor.dims]
        if config.max_batch_size > 0:
            shape = [min(2, config.max_batch_size), *shape]
        shapes.append(shape)
    elements = sum(math.prod(shape) for shape in shapes)
    if elements > SYNTH_MAX_ELEMENTS:
        findings.add(
            TOO_LARGE,
            "warning",
            path,
            "input dims",
            f"one request of these dims holds {elements:.3g} elements, more than the {SYNTH_MAX_ELEMENTS:.3g} "
            "validate allocates; the model was not run on config-shaped inputs, so they are unchecked.",
            "check the dims (a typo adds digits); if they are right, serve the model to check it "
            "(`nox -s integration -- --repository ...`).",
        )
        return None
    return [
        np.zeros(_model_shape(t, shape, config), dtype=dtypes.from_config(config_type(t)).numpy)
        for t, shape in zip(config.input, shapes, strict=True)
    ]


def _model_shape(tensor: ModelInput, shape: Sequence[int], config: ModelConfig) -> list[int]:
    """What the model gets for a client's ``shape``: Triton's core applies the input's reshape first (one it
    refuses, C023, is not applied)."""
    if reshape_refusal(tensor, batching=config.max_batch_size > 0):
        return list(shape)
    if config.max_batch_size > 0:
        return [shape[0], *model_shape(tensor, shape[1:])]
    return model_shape(tensor, shape)


def missing(model: ModelDir, findings: Findings) -> None:
    if not reference.exists(model):
        findings.add(
            NO_REFERENCE,
            "warning",
            model.reference_json,
            "reference data",
            "no reference.json/reference.npz: the parity checks hold the served outputs to the model's own file "
            "run in-process, which shows that Triton serves the file as torch runs it, not that the file is the "
            "model you exported.",
            "export the model with `tritonpt export --model` to record eager PyTorch reference outputs (a file "
            "alone: `tritonpt export --from-file`).",
        )


def reference_feeds(model: ModelDir, config: ModelConfig, findings: Findings) -> list[Feed]:
    """The reference cases whose inputs fit the config; a warning when one does not (parity cannot send it)."""
    if not reference.exists(model):
        return []
    try:
        ref = reference.load(model)
    except ReferenceDataError as exc:
        findings.add(UNREADABLE, "warning", exc.path, f"reference data {exc.field}", exc.detail, exc.fix)
        return []
    by_name = {info.name: index for index, info in enumerate(ref.inputs)}
    batch = config.max_batch_size > 0
    found = []
    for case in ref.cases:
        arrays = [case.inputs[by_name[t.name]] if t.name in by_name else None for t in config.input]
        misfit = next(
            (
                (t, a)
                for t, a in zip(config.input, arrays, strict=True)
                if a is None
                or dtypes.from_numpy(a.dtype).config != config_type(t)
                or (batch and a.ndim == 0)
                or not dims_match(t.dims, a.shape[1:] if batch else a.shape)
                or (batch and a.shape[0] > config.max_batch_size)
            ),
            None,
        )
        if misfit is None:
            fitting = [(t, a) for t, a in zip(config.input, arrays, strict=True) if a is not None]
            found.append(
                Feed(
                    what=f"reference case {case.id!r}",
                    arrays=[a.reshape(_model_shape(t, a.shape, config)) for t, a in fitting],
                )
            )
            continue
        tensor, array = misfit
        got = "absent" if array is None else f"{dtypes.from_numpy(array.dtype).config} {list(array.shape)}"
        findings.add(
            MISFIT,
            "warning",
            model.reference_json,
            f"reference case {case.id!r}",
            f"its input {tensor.name!r} ({got}) does not fit the config ({config_type(tensor)}, dims "
            f"{list(tensor.dims)}{', after the batch axis' if batch else ''}): the parity checks cannot send it.",
            "re-export the model so that the reference data matches its config.",
        )
        break
    return found


def fails_on_reference(
    model: ModelDir, config: ModelConfig, feed: Feed, error: str, findings: Findings
) -> None:
    """The inputs fit the config and config-shaped zeros ran: the stored values are what the model fails on."""
    findings.add(
        FAILS,
        "warning",
        model.reference_npz,
        feed.what,
        f"the model fails on its inputs ({feed.shapes(config)}): {error}; served, it fails the same way, so "
        "parity on this case would fail.",
        "re-export the model so that its reference inputs are values the model accepts.",
    )
