"""A model's own file, run in-process as Triton's pytorch backend runs it: the reference for a model without one.

    samples(model, config)      the folder's samples.npz, else inputs generated from the config
    OwnFile.load(model, config) model.pt or model.pt2, called and answering as the backend and core do
    reference_of(model, config) a Reference at batch 1 and the largest batch, each row held to its own sample

It proves that Triton serves the file as torch runs it, not that the file is the model meant. Every failure
is an ``InProcessError`` that says what to do.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import platform
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import numpy as np
import numpy.typing as npt
import torch
from tritonclient.grpc.model_config_pb2 import ModelConfig

from tritonpt import __version__, dtypes, jit, reference, spec
from tritonpt.errors import InProcessError, first_line
from tritonpt.repository import PT2_PLATFORM, ModelDir, default_model_file
from tritonpt.validate import pt2 as pt2_rules
from tritonpt.validate.rules import all_indexed, config_type, model_shape, named_index

Array = npt.NDArray[np.generic]

SAMPLES = "samples.npz"
"""A team's own inputs for a model, beside its config: one array per config input, named as the input; where the
config batches, its first axis is the samples (each row one request of batch 1), else it is one request."""
GENERATED_ROWS = 8
"""Distinct samples generated for a model that batches (its largest batch repeats them)."""
VARIABLE_LENGTH = 5
"""The length generated on a -1 axis: any length must work there."""
GENERATED = "generated from config.pbtxt"
SEED = 0
SOURCE = "in-process"
"""``Provenance.source`` of a reference made here (export's is "export")."""


@dataclass(frozen=True, kw_only=True)
class Samples:
    """Requests of batch 1 (or whole requests, where the config does not batch), inputs in config order."""

    rows: tuple[tuple[Array, ...], ...]
    what: str  # SAMPLES, or GENERATED


def numeric(config: ModelConfig) -> bool:
    """Whether every input and output is a tensor of a type the backend maps to torch (not TYPE_STRING, whose
    List[str] this module neither generates nor compares): the models it can make a reference for."""
    return all(dtypes.is_served(config_type(t)) for t in (*config.input, *config.output))


def samples(model: ModelDir, config: ModelConfig) -> Samples:
    """The model folder's samples.npz, else inputs generated from its config."""
    given = model.root / SAMPLES
    return read_samples(given, config) if given.is_file() else generate(config, path=model.config)


def generate(config: ModelConfig, *, path: Path) -> Samples:
    """Seeded inputs as the config declares them: normal floats, integers 0 and 1, booleans true in even samples
    and false in odd ones."""
    generator = np.random.default_rng(SEED)
    batching = config.max_batch_size > 0
    count = min(GENERATED_ROWS, config.max_batch_size) if batching else 1
    kinds = []
    for tensor in config.input:
        name = config_type(tensor)
        if not dtypes.is_served(name):
            msg = (
                f"input {tensor.name!r} is {name}, which no inputs can be generated for; give the model's inputs "
                f"in {path.parent / SAMPLES} ({_FORMAT})."
            )
            raise InProcessError(path=path, field=f"input {tensor.name!r} data_type", detail=msg, fix=_GIVE)
        kinds.append((dtypes.from_config(name), [VARIABLE_LENGTH if d == -1 else d for d in tensor.dims]))
    rows = []
    for index in range(count):
        row = []
        for kind, shape in kinds:
            if kind.torch == torch.bool:
                array = np.full(shape, index % 2 == 0, dtype=np.bool_)
            elif kind.torch.is_floating_point:
                array = generator.standard_normal(shape).astype(kind.numpy)
            else:
                array = generator.integers(0, 2, size=shape).astype(kind.numpy)
            row.append(array)
        rows.append(tuple(row))
    return Samples(rows=tuple(rows), what=GENERATED)


_FORMAT = (
    "one array per config input, named as the input, with the input's data type; where the config batches, a first "
    "axis of samples, each row one request of batch 1; else exactly one request"
)
_GIVE = f"give the model's own inputs in its folder as {SAMPLES} ({_FORMAT}), e.g. `numpy.savez(path, INPUT__0=x)`."


def read_samples(path: Path, config: ModelConfig) -> Samples:
    """A team's samples.npz, held to the config: the same names, each input's data type and dims."""

    def refuse(field: str, detail: str) -> NoReturn:
        raise InProcessError(path=path, field=field, detail=detail, fix=_GIVE)

    try:
        with np.load(path, allow_pickle=False) as npz:
            arrays = {key: np.asarray(npz[key]) for key in npz.files}
    except Exception as exc:  # numpy and zipfile raise many kinds on a file that is not an .npz
        detail = f"it cannot be read as a numpy .npz archive ({first_line(exc)})."
        raise InProcessError(path=path, field="file", detail=detail, fix=_GIVE) from exc
    names = [t.name for t in config.input]
    if sorted(arrays) != sorted(names):
        detail = f"it holds {sorted(arrays)}; the config's inputs are {names}."
        refuse("arrays", detail)
    batching = config.max_batch_size > 0
    counts = set()
    for tensor in config.input:
        array, declared = arrays[tensor.name], config_type(tensor)
        wanted = np.dtype(dtypes.from_config(declared).numpy) if dtypes.is_served(declared) else None
        if array.dtype != wanted:
            detail = f"its data type is {array.dtype}; the config declares {declared}" + (
                f" ({wanted})." if wanted is not None else ", which the pytorch backend does not take."
            )
            refuse(f"array {tensor.name!r}", detail)
        shape = array.shape[1:] if batching else array.shape
        if (
            (batching and array.ndim == 0)
            or len(shape) != len(tensor.dims)
            or any(d not in (-1, s) for d, s in zip(tensor.dims, shape, strict=False))
        ):
            where = "after its first axis (the samples) " if batching else ""
            detail = (
                f"its shape is {list(array.shape)}; {where}it must fit the config's dims {list(tensor.dims)}."
            )
            refuse(f"array {tensor.name!r}", detail)
        counts.add(array.shape[0] if batching else 1)
    if len(counts) != 1 or 0 in counts:
        detail = f"the inputs hold different numbers of samples ({sorted(counts)}), or none."
        refuse("arrays", detail)
    if not batching:
        return Samples(rows=(tuple(arrays[n] for n in names),), what=SAMPLES)
    count = counts.pop()
    return Samples(rows=tuple(tuple(arrays[n][i] for n in names) for i in range(count)), what=SAMPLES)


class OwnFile:
    """The model's file loaded as the backend loads it, called as the backend calls it."""

    def __init__(
        self, *, path: Path, config: ModelConfig, call: Callable[[list[torch.Tensor]], list[torch.Tensor]]
    ) -> None:
        self.path = path
        self.config = config
        self._call = call

    @classmethod
    def load(cls, model: ModelDir, config: ModelConfig, *, keyed: bool = False) -> OwnFile:
        """The file Triton serves: the newest version's (its default version policy), as the config names it.
        ``keyed``: a TorchScript forward() that returns a dict is taken apart by the config's output names (the
        pytorch backend refuses it; what a migration serves of it as torch_aoti)."""
        loaded = model.loaded_versions()  # under the config's version_policy, as Triton reads them
        if not loaded:
            msg = "it has no version folder (1/, 2/, ...) that Triton would load."
            raise InProcessError(path=model.root, field="version folders", detail=msg, fix=_REEXPORT)
        newest = loaded[-1]  # what a request without a version gets
        path = model.root / newest / default_model_file(config)
        if not path.is_file():
            msg = f"the config names {path.name} in version {newest}, and there is no such file."
            raise InProcessError(path=path, field="model file", detail=msg, fix=_REEXPORT)
        if config.platform == PT2_PLATFORM:
            return cls(path=path, config=config, call=_pt2_call(path, config))
        return cls(path=path, config=config, call=_torchscript_call(path, config, keyed=keyed))

    def run(self, inputs: Sequence[Array]) -> list[Array]:
        """One request's inputs (with the batch axis where the config batches) to its outputs, as served."""
        batching = self.config.max_batch_size > 0
        fed = fed_tensors(self.config, inputs)
        with torch.inference_mode():
            produced = self._call(fed)
        served = []
        for tensor, value in zip(self.config.output, produced, strict=True):
            array = value.detach().contiguous().cpu().numpy()
            if tensor.HasField("reshape"):  # core answers with dims, the variable axes taken from the model's
                returned = array.shape[1:] if batching else array.shape
                variable = [n for n, d in zip(returned, tensor.reshape.shape, strict=False) if d == -1]
                dims = [variable.pop(0) if d == -1 and variable else d for d in tensor.dims]
                array = array.reshape([array.shape[0], *dims] if batching else dims)
            served.append(array)
        return served


def fed_tensors(config: ModelConfig, inputs: Sequence[Array]) -> list[torch.Tensor]:
    """One request's inputs as the model gets them, in config order: each reshaped as core applies ``reshape``."""
    batching = config.max_batch_size > 0
    fed = []
    for tensor, array in zip(config.input, inputs, strict=True):
        shape = list(array.shape)
        wanted = [shape[0], *model_shape(tensor, shape[1:])] if batching else model_shape(tensor, shape)
        fed.append(torch.from_numpy(np.ascontiguousarray(array).reshape(wanted)))
    return fed


def _torchscript_call(
    path: Path, config: ModelConfig, *, keyed: bool = False
) -> Callable[[list[torch.Tensor]], list[torch.Tensor]]:
    """forward() fed as the backend feeds it (by argument name, else <name>__<index>, else config order); its
    outputs taken apart as the backend does (a tensor or a tuple), picked by <name>__<index> or config order; with
    ``keyed``, a dict too, by :func:`keyed_outputs`."""
    try:
        module = jit.load(str(path))
    except jit.TorchScriptRefusedError:
        raise  # this torch reads no TorchScript at all: the file is not what is wrong
    except Exception as exc:  # torch raises many kinds for a file that is not TorchScript
        msg = f"torch.jit.load cannot load it ({first_line(exc)}); Triton's pytorch backend would refuse it too."
        raise InProcessError(path=path, field="model file", detail=msg, fix=_REEXPORT) from exc
    order, picks = binding(module, config, path)
    declared = [t.name for t in config.output]

    def call(fed: list[torch.Tensor]) -> list[torch.Tensor]:
        result = module(*[fed[i] for i in order])
        if keyed and isinstance(result, dict):
            return keyed_outputs(result, declared)
        outputs = (result,) if isinstance(result, torch.Tensor) else result
        if not isinstance(outputs, tuple) or not all(isinstance(o, torch.Tensor) for o in outputs):
            msg = f"forward() returns {type(result).__name__}; the backend serves a tensor or a tuple of tensors."
            raise InProcessError(path=path, field="outputs", detail=msg, fix=_REEXPORT)
        if max(picks, default=0) >= len(outputs):
            msg = f"the config declares outputs {declared}; forward() returns {len(outputs)}."
            raise InProcessError(path=config_path(path), field="output", detail=msg, fix=_FIX_CONFIG)
        return [outputs[k] for k in picks]

    return call


def keyed_outputs(result: dict[str, torch.Tensor], declared: Sequence[str]) -> list[torch.Tensor]:
    """A dict's tensors in config order: by key where every declared name is one, else in the dict's order."""
    if all(name in result for name in declared):
        return [result[name] for name in declared]
    return list(result.values())[: len(declared)]


def binding(module: Any, config: ModelConfig, path: Path) -> tuple[list[int], list[int]]:  # noqa: ANN401 - a ScriptModule
    """How the pytorch backend binds a TorchScript file's forward() to its config: ``order[k]``, the config input
    that feeds argument ``k`` (by argument name, else ``<name>__<index>``, else config order); ``picks[j]``, the
    element of the returned tuple that config output ``j`` is (``<name>__<index>``, else config order)."""
    arguments = [a.name for a in module.forward.schema.arguments[1:]]
    names = [t.name for t in config.input]
    if len(arguments) != len(names):
        msg = f"forward() takes {len(arguments)} input(s) ({', '.join(arguments)}); the config declares {len(names)}."
        raise InProcessError(path=config_path(path), field="input", detail=msg, fix=_FIX_CONFIG)
    indices = [named_index(n) for n in names]
    if all(n in arguments for n in names):
        order = [names.index(a) for a in arguments]
    elif all_indexed(names) and sorted(i or 0 for i in indices) == list(range(len(names))):
        order = [indices.index(i) for i in range(len(names))]
    elif all_indexed(names):
        msg = f"input indices {sorted(i or 0 for i in indices)} are not 0..{len(names) - 1}."
        raise InProcessError(path=config_path(path), field="input names", detail=msg, fix=_FIX_CONFIG)
    else:
        order = list(range(len(names)))
    declared = [t.name for t in config.output]
    picks = [named_index(n) or 0 for n in declared] if all_indexed(declared) else list(range(len(declared)))
    return order, picks


def _pt2_call(path: Path, config: ModelConfig) -> Callable[[list[torch.Tensor]], list[torch.Tensor]]:
    """The package called by its call spec (``ARGS`` by position, ``KWARGS[key]`` by keyword), outputs picked by
    name (``RESULT``, ``RESULT[i]``, ``RESULT[key]``) or ``OUTPUT__i``, as the PT2 path does."""
    try:
        inputs, outputs = pt2_rules.call_spec(path)
        loaded = torch._inductor.aoti_load_package(str(path))
    except Exception as exc:  # a package the loader refuses, or a call spec the backend cannot read
        msg = f"it does not load as an AOTInductor package ({first_line(exc)})."
        raise InProcessError(path=path, field="model file", detail=msg, fix=_REEXPORT) from exc
    feed = pt2_rules.positions([t.name for t in config.input], inputs, "INPUT__")
    pick = pt2_rules.positions([t.name for t in config.output], outputs, "OUTPUT__")
    if None in feed or None in pick or len(feed) != len(inputs):
        msg = (
            f"the config's names do not follow the package's call spec (inputs {inputs}; outputs {outputs})."
        )
        raise InProcessError(path=config_path(path), field="input/output names", detail=msg, fix=_FIX_CONFIG)

    def call(fed: list[torch.Tensor]) -> list[torch.Tensor]:
        ordered: list[torch.Tensor] = list(fed)
        for tensor, position in zip(fed, feed, strict=True):
            ordered[position or 0] = tensor
        said, result = pt2_rules.call(loaded, ordered, inputs)
        if result is None:
            raise RuntimeError(said)
        produced = pt2_rules.outputs(result)
        return [produced[p or 0] for p in pick]

    return call


_REEXPORT = (
    "export the model again (`tritonpt export`), or check that the file is the one Triton is to serve."
)
_FIX_CONFIG = "make the config's inputs and outputs those of the model file (`tritonpt export --from-file` writes them)."


def config_path(model_file: Path) -> Path:
    """The config.pbtxt of the model a version's file belongs to."""
    return model_file.parent.parent / "config.pbtxt"


def reference_of(
    model: ModelDir, config: ModelConfig, *, given: Samples | None = None, keyed: bool = False
) -> reference.Reference:
    """The reference a model without one is held to: its own file in-process, on its samples (``given``, else its
    folder's samples.npz or inputs generated from the config), at batch 1 and at the largest batch the config
    allows; ``InProcessError`` where the file cannot be run so, or mixes rows. ``keyed``: as :meth:`OwnFile.load`."""
    given = given or samples(model, config)
    own = OwnFile.load(model, config, keyed=keyed)
    batching = config.max_batch_size > 0
    alone = [
        _run(own, [a[np.newaxis] for a in row] if batching else list(row), given, index)
        for index, row in enumerate(given.rows)
    ]
    cases = []
    if batching and len(given.rows) == 1 and config.max_batch_size > 1:
        given = Samples(
            rows=given.rows, what=f"{given.what} (one sample: the rows of a batch were not compared)"
        )
    if batching:
        first = given.rows[0]
        cases.append(_case("b1", 1, [a[np.newaxis] for a in first], alone[0]))
        largest = config.max_batch_size
        if largest > 1:
            picked = [index % len(given.rows) for index in range(largest)]
            batch = [np.stack([given.rows[i][k] for i in picked]) for k in range(len(config.input))]
            outputs = _run(own, batch, given, None)
            _rows_are_alone(own, outputs, [alone[i] for i in picked], largest)
            cases.append(_case(f"b{largest}", largest, batch, outputs))
    else:
        cases.append(_case("full", 0, list(given.rows[0]), alone[0]))
    return reference.Reference(
        model=model.name,
        provenance=provenance(config, given),
        inputs=tuple(reference.TensorInfo(name=t.name, data_type=config_type(t)) for t in config.input),
        outputs=tuple(
            reference.OutputInfo(
                name=t.name,
                data_type=config_type(t),
                cpu_tolerance=spec.tolerance_for(config_type(t)),
                gpu_tolerance=spec.tolerance_for(config_type(t), gpu=True),
            )
            for t in config.output
        ),
        cases=tuple(cases),
    )


def provenance(config: ModelConfig, given: Samples) -> reference.Provenance:
    return reference.Provenance(
        torch_version=torch.__version__,
        torchvision_version=_version("torchvision"),
        numpy_version=np.__version__,
        python_version=platform.python_version(),
        device="cpu",
        seed=SEED,
        method="aoti_load_package" if config.platform == PT2_PLATFORM else "torch.jit.load",
        torchscript_format=0,
        exporter=f"tritonpt {__version__}",
        model_format="pt2" if config.platform == PT2_PLATFORM else "torchscript",
        source=SOURCE,
        samples=given.what,
    )


def _version(package: str) -> str:
    with contextlib.suppress(importlib.metadata.PackageNotFoundError):
        return importlib.metadata.version(package)
    return "not installed"


def _case(case_id: str, batch: int, inputs: Sequence[Array], outputs: Sequence[Array]) -> reference.Case:
    return reference.Case(id=case_id, batch_size=batch, inputs=tuple(inputs), outputs=tuple(outputs))


def _run(own: OwnFile, inputs: Sequence[Array], given: Samples, index: int | None) -> list[Array]:
    try:
        return own.run(inputs)
    except InProcessError:
        raise
    except Exception as exc:  # whatever the model raises, in its own words
        batch = inputs[0].shape[0] if own.config.max_batch_size > 0 and inputs else None
        which = (
            f"sample {index} of the inputs {given.what}"
            if index is not None
            else f"a batch of {inputs[0].shape[0]} of the inputs {given.what}"
        )
        shapes = ", ".join(
            f"{t.name} {list(a.shape)} {a.dtype}" for t, a in zip(own.config.input, inputs, strict=True)
        )
        msg = f"the model's own file fails on {which} ({shapes}): {said(exc)}"
        fix = (
            _GIVE.rstrip(".")
            if given.what != SAMPLES
            else "check that samples.npz holds inputs the model accepts"
        )
        if batch is not None:
            fix += (
                f"; where the file was traced at one batch size and keeps it (it fails at batch {batch}), "
                "declare max_batch_size: 0 and dims with that batch, or export it again with a batch axis"
            )
        raise InProcessError(
            path=own.path, field="run in-process", detail=msg, fix=fix.rstrip(".") + "."
        ) from exc


def said(exc: BaseException) -> str:
    """What went wrong, in the model's words: for an error of the TorchScript interpreter (whose first line only
    says that an operation failed) its last line, the error it raised."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    if len(lines) > 1 and "TorchScript interpreter" in lines[0]:
        return lines[-1]
    return first_line(exc)


def _rows_are_alone(
    own: OwnFile, batch: Sequence[Array], alone: Sequence[Sequence[Array]], size: int
) -> None:
    """Each row of the batch's outputs against the same sample run alone, within the output type's tolerance."""
    for tensor, served in zip(own.config.output, batch, strict=True):
        if served.ndim == 0 or served.shape[0] != size:
            msg = (
                f"at batch {size} output {tensor.name!r} has shape {list(served.shape)}: its first axis is not the "
                "batch. The file computes a fixed batch size (traced with one), so Triton's batcher would hand "
                "clients rows that are not theirs."
            )
            raise InProcessError(path=own.path, field="batch axis", detail=msg, fix=_NO_BATCH)
    tolerances = [spec.tolerance_for(config_type(t)) for t in own.config.output]
    for row in range(size):
        for k, (tensor, tolerance) in enumerate(zip(own.config.output, tolerances, strict=True)):
            got, single = batch[k][row], alone[row][k][0]
            if got.shape != single.shape or not np.allclose(
                got.astype(np.float64),
                single.astype(np.float64),
                atol=tolerance.atol,
                rtol=tolerance.rtol,
                equal_nan=True,  # as parity compares: NaN where both have it is the same answer
            ):
                error = (
                    float(np.max(np.abs(got.astype(np.float64) - single.astype(np.float64))))
                    if got.shape == single.shape
                    else float("nan")
                )
                msg = (
                    f"row {row} of a batch of {size} differs from the same sample run alone (output {tensor.name!r}, "
                    f"max abs difference {error:.3g}; atol {tolerance.atol:g}, rtol {tolerance.rtol:g}): the "
                    "file mixes the rows of a batch, or baked the batch size it was traced with. Under dynamic "
                    "batching Triton would hand one client an answer that depends on another's request."
                )
                raise InProcessError(path=own.path, field="rows of a batch", detail=msg, fix=_NO_BATCH)


_NO_BATCH = (
    "export the model with a batch axis whose rows are independent (trace it at a batch size other than 1 and "
    "check it at another), or declare max_batch_size: 0 so that Triton never batches it."
)
