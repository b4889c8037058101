"""The rule book's spine: every rule has a code, a family and one line that says what it catches.

A code is a family's letter and a number (``C005``): R folders, T text, C config, W warmup, M torchscript,
A pt2, E ensemble, D feeds, P process (:data:`FAMILIES`, in the order a model is read). :func:`rule` declares
one into :data:`RULES` with its ``why`` and ``example``, from which :mod:`tritonpt.validate.reference` writes
docs/reference/validator.md. Also here, shared by the families: :class:`Findings` (one model's problems) and
the tensor-name rules of the pytorch backend.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from tritonclient.grpc.model_config_pb2 import DataType, ModelInput, ModelOutput, ModelWarmup

from tritonpt.errors import Problem, Severity

FAMILIES = {
    "R": "repository and version folders",
    "T": "config text and schema",
    "C": "config against Triton's and the backend's rules",
    "W": "warmup",
    "M": "TorchScript model file",
    "A": "PT2 (AOTInductor) package",
    "E": "ensemble steps",
    "D": "reference data",
    "P": "process-wide, across models",
}


@dataclass(frozen=True, kw_only=True)
class Rule:
    code: str
    title: str  # what it catches, in a few words
    why: str  # one or two sentences: the severity, and what Triton or the backend does with such a model
    example: str  # a config.pbtxt fragment, or a one-line description of a repository that breaks the rule

    @property
    def family(self) -> str:
        return FAMILIES[self.code[0]]


RULES: dict[str, Rule] = {}


def rule(code: str, title: str, *, why: str, example: str) -> Rule:
    """Declare a rule (once per code), with the why and the example that the rule reference shows."""
    if code in RULES or code[0] not in FAMILIES:
        msg = f"rule code {code!r} is taken or names no family"
        raise ValueError(msg)
    if not why.strip() or not example.strip():
        msg = f"rule {code} needs a why and an example: the rule reference (docs/reference/validator.md) shows both"
        raise ValueError(msg)
    RULES[code] = Rule(code=code, title=title, why=why, example=example)
    return RULES[code]


class Findings(list[Problem]):
    """The problems found so far in one model folder."""

    def add(  # noqa: PLR0917 - a finding reads in order: rule, severity, where, what, fix
        self, found: Rule, severity: Severity, path: Path, field: str, message: str, fix: str
    ) -> None:
        problem = Problem(
            severity=severity, path=path, field=field, message=message, fix=fix, rule=found.code
        )
        if problem not in self:  # the same finding on several inputs is one problem
            self.append(problem)

    @property
    def failed(self) -> bool:
        return any(p.severity == "error" for p in self)

    def errors_since(self, count: int) -> bool:
        """Whether an error was added after the first ``count`` findings."""
        return any(p.severity == "error" for p in self[count:])


# --- What the families share -------------------------------------------------------------------------------


def config_type(tensor: ModelInput | ModelOutput | ModelWarmup.Input) -> str:
    """The data type's enum name, e.g. ``TYPE_FP32``; a number model_config.proto does not name stays a number."""
    try:
        return str(DataType.Name(tensor.data_type))
    except ValueError:
        return f"data type {tensor.data_type} (not a model_config.proto DataType)"


def named_index(name: str) -> int | None:
    """The <index> of a ``<name>__<index>`` tensor name as the pytorch backend reads it, else None.

    pytorch_backend r25.10 (src/libtorch.cc): the *first* "__" splits the name, everything after it must be
    ASCII digits (none at all reads as index 0), and the index is their value. ``A__B__1`` is not indexed.
    """
    _, separator, index = name.partition("__")
    if not separator or not all(c in "0123456789" for c in index):
        return None
    return int(index or "0")


def all_indexed(names: Iterable[str]) -> bool:
    return all(named_index(n) is not None for n in names)


def dims_match(declared: Iterable[int], shape: tuple[int, ...]) -> bool:
    dims = list(declared)
    return len(dims) == len(shape) and all(d in (-1, s) for d, s in zip(dims, shape, strict=True))


# A tensor's reshape, as Triton's core applies it (core r24.10, src/infer_request.cc and src/infer_response.cc):
# a client sends and receives ``dims``, the model takes and returns ``reshape.shape``, and a -1 of the reshape
# takes the length of the client's -1 axes in turn. Core checks the pair at load (src/model_config_utils.cc).


def model_dims(tensor: ModelInput | ModelOutput) -> list[int]:
    """The dims the model itself takes or returns (after the batch axis where it batches)."""
    return list(tensor.reshape.shape) if tensor.HasField("reshape") else list(tensor.dims)


def model_shape(tensor: ModelInput | ModelOutput, shape: Iterable[int]) -> list[int]:
    """The shape the model gets for a client's ``shape`` (after the batch axis where it batches)."""
    if not tensor.HasField("reshape"):
        return list(shape)
    variable = [length for length, d in zip(shape, tensor.dims, strict=True) if d == -1]
    return [variable.pop(0) if d == -1 else d for d in tensor.reshape.shape]


def _count(dims: Iterable[int]) -> int:
    """core's GetElementCount: -1 when an axis is variable, 0 for no axes."""
    found = list(dims)
    if -1 in found:
        return -1
    count = 1
    for d in found:
        count *= d
    return count if found else 0


def _runs(dims: Iterable[int]) -> list[int]:
    """The element counts between the variable axes."""
    runs, current = [], 1
    for d in dims:
        if d == -1:
            runs.append(current)
            current = 1
        else:
            current *= d
    return [*runs, current]


def reshape_refusal(tensor: ModelInput | ModelOutput, *, batching: bool) -> str | None:
    """What core says when it refuses a tensor's reshape at load, else None."""
    if not tensor.HasField("reshape"):
        return None
    shape = list(tensor.reshape.shape)
    if not shape and not batching:
        return "cannot have empty reshape for non-batching model as scalar tensors are not supported"
    if any(d < 1 and d != -1 for d in shape):
        return "reshape dimensions must be integer >= 1, or -1 to indicate a variable-size dimension"
    dims_count, reshape_count = _count(tensor.dims), _count(shape)
    if dims_count != reshape_count and (reshape_count != 0 or dims_count != 1):
        return "has different size for dims and reshape"
    if dims_count == -1:
        if len(_runs(tensor.dims)) != len(_runs(shape)):
            return "has different number of variable-size dimensions for dims and reshape"
        if _runs(tensor.dims) != _runs(shape):
            return "has different size for dims and reshape"
    return None


def output_fits(tensor: ModelOutput, shape: tuple[int, ...]) -> bool:
    """Whether a model's output of ``shape`` (after the batch axis where it batches) is served as declared. With a
    reshape, core replaces the model's shape by dims (-1 axes taken from the reshape's -1 axes of the model's
    shape), so where dims are fixed only the element count has to agree."""
    if not tensor.HasField("reshape"):
        return dims_match(tensor.dims, shape)
    if -1 not in tensor.dims:
        return bool(math.prod(shape) == math.prod(tensor.dims))
    return dims_match(tensor.reshape.shape, shape)


def check_output_shape(
    findings: Findings,
    found: Rule,
    path: Path,
    tensor: ModelOutput,
    shape: tuple[int, ...],
    *,
    batch: bool,
    what: str,
) -> None:
    """``found`` (an error) where an output that ``what`` ("the model", "the package") returns in ``shape`` (after
    the batch axis where it batches) is not served as ``tensor`` declares it (:func:`output_fits`)."""
    if output_fits(tensor, shape):
        return
    findings.add(
        found,
        "error",
        path,
        f"output {tensor.name!r} {'reshape' if tensor.HasField('reshape') else 'dims'}",
        f"{model_dims(tensor)} is declared, {what} returns shape {list(shape)}"
        f"{' after the batch axis' if batch else ''}; Triton serves {what}'s shape, not the declared one.",
        f"declare dims {list(shape)} (with -1 on variable-length axes).",
    )
