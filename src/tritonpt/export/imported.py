"""Stage "export" for a file made elsewhere: a TorchScript file or AOTInductor package becomes a model folder.

:func:`import_file` finds what the file is, runs it on ``--samples FILE.npz`` (a file does not record its
inputs' shapes, so without samples it stops and says how to give them), finds its batch axis by running it at
batch 1 and 2, and writes config.pbtxt from what it returns, the file as it is, reference data from an
in-process run (:mod:`tritonpt.in_process`) and a warmup sample: validated staged, then moved in.
"""

from __future__ import annotations

import shutil
import time
import zipfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from tritonpt import dtypes, in_process, jit, reference, spec, validate
from tritonpt.errors import HINT, ExportError, InProcessError, first_line
from tritonpt.export import pt2 as pt2_export
from tritonpt.export.config import add_warmup, build_config
from tritonpt.export.eager import other_length
from tritonpt.export.exporting import ExportResult
from tritonpt.options import InstanceKind, Pt2Build
from tritonpt.repository import (
    MODEL_FILE,
    PLATFORM,
    PT2_FILE,
    PT2_PLATFORM,
    VERSION,
    ModelDir,
    render_config,
    staged_model,
)
from tritonpt.validate import pt2 as pt2_rules

Step = Callable[[str], None]
Call = Callable[[list[torch.Tensor]], object]

HEADER = (
    "# Written by `tritonpt export --from-file` from {file}: the file as it was given, this config from what it\n"
    "# takes and returns, the reference data from the file run in-process on {samples}.\n"
)
NO_EXAMPLES = (
    "give its inputs with --samples FILE.npz: one array per input, named as the input ({names}), each with a first "
    "axis of samples (two or more rows, so that the batch axis can be checked), e.g. "
    "`numpy.savez('samples.npz', {example})`."
)


@dataclass(frozen=True, kw_only=True)
class _File:
    """The file as the backend will run it: its format, input names and how to call it (inputs in that order)."""

    path: Path
    model_format: str  # "torchscript" or "pt2"
    input_names: tuple[str, ...]
    aliases: tuple[tuple[str, ...], ...]  # per input, the other names --samples may use for it
    output_names: (
        tuple[str, ...] | None
    )  # the package's call spec; None for TorchScript (from what it returns)
    call: Call


def import_file(
    path: Path,
    *,
    name: str,
    repository: Path,
    samples: Path | None = None,
    max_batch_size: int | None = None,
    dynamic_axes: Mapping[int | str, tuple[int, ...]] | None = None,
    instance_kind: InstanceKind | None = None,
    parameters: Mapping[str, str] | None = None,
    pt2_build: Pt2Build = "stock",
    step: Step = lambda _: None,
) -> ExportResult:
    """Write ``repository/name`` for the model file ``path`` (see the module docstring)."""
    started = time.perf_counter()
    step(f"[{name}] reading {path}")
    found = _describe(path)
    rows = _examples(found, samples)
    axes = _axes(found, dynamic_axes or {})
    step(f"[{name}] {found.model_format} file; running it at batch 1 and batch 2 to find its batch axis")
    batching, notes = _batch_axis(found, rows, max_batch_size)
    examples = tuple(r[:1] for r in rows) if batching else _one_request(found, rows, notes)
    produced = _outputs(found, list(examples))
    output_names = found.output_names or tuple(f"OUTPUT__{j}" for j in range(len(produced)))
    if len(output_names) != len(produced):
        msg = f"{path}: the package's call spec names {len(output_names)} output(s), and it returned {len(produced)}."
        raise ExportError(msg)
    other = _other_run(found, examples, axes)
    model_spec = spec.ModelSpec(
        name=name,
        module=torch.nn.Module(),  # the file is not traced again: only its inputs and settings are read here
        example_inputs=examples,
        input_names=found.input_names,
        dynamic_axes=axes,
        max_batch_size=(max_batch_size or 8) if batching else 0,
        instance_kind=instance_kind or "KIND_AUTO",
        parameters={**spec.DEFAULT_PARAMETERS, **(parameters or {})},
    )
    pt2 = found.model_format == "pt2"
    if pt2:
        model_spec = pt2_export.as_written(model_spec, pt2_build)
    # One value a sample ([batch]) has no dims after the batch axis, which Triton refuses: dims [ 1 ] with
    # reshape { shape: [ ] }, and core answers [batch, 1] (as export writes it for a module).
    reshaped = [batching and t.dim() == 1 for t in produced]
    config = build_config(
        model_spec,
        found.input_names,
        output_names,
        [dtypes.from_torch(t.dtype).config for t in produced],
        [
            [1] if one else dims
            for one, dims in zip(reshaped, _dims(produced, other, batching=batching), strict=True)
        ],
        platform=PT2_PLATFORM if pt2 else PLATFORM,
        reshaped=reshaped,
    )
    if pt2:
        config.default_model_filename = PT2_FILE
    given = _samples(rows if batching else list(examples), batching=batching)  # unbatched: the one request
    with staged_model(repository, name) as model:
        (model.root / VERSION).mkdir()
        shutil.copyfile(path, model.root / VERSION / (PT2_FILE if pt2 else MODEL_FILE))
        # the team's inputs stay with the model, named as the config names them (a later check runs on them)
        stacked = _stack(given, batching=batching)
        np.savez(model.root / in_process.SAMPLES, **dict(zip(found.input_names, stacked, strict=True)))
        step(
            f"[{name}] reference data: the file in-process on {given.what}, at batch 1 and the largest batch"
        )
        try:
            ref = in_process.reference_of(model, config, given=given)
        except InProcessError as exc:
            raise ExportError(str(exc)) from exc
        add_warmup(config, model, min(ref.cases, key=lambda c: c.batch_size))
        header = HEADER.format(file=path.name, samples=given.what)
        model.config.write_text(header + render_config(config), encoding="utf-8")
        reference.save(ref, model)
        step(f"[{name}] validating the staged model folder")
        validate.refuse_staged(
            model, repository / name, validate.validate_model(model, gpu_available=True, pt2_build=pt2_build)
        )
    step(f"[{name}] written to {repository / name} in {time.perf_counter() - started:.1f} s")
    return ExportResult(
        name=name,
        model=ModelDir(root=repository / name),
        method="imported",
        cases=tuple(c.id for c in ref.cases),
        seconds=time.perf_counter() - started,
        warnings=(),
        notes=tuple(notes),
    )


def _describe(path: Path) -> _File:
    """The file as a TorchScript module or an AOTInductor package; ``ExportError`` naming both reasons otherwise."""
    if not path.is_file():
        msg = f"--from-file {path}: there is no such file. {HINT} give the path of a model.pt or a model.pt2."
        raise ExportError(msg)
    try:
        module = jit.load(str(path))
    except jit.TorchScriptRefusedError:
        raise  # this torch reads no TorchScript at all: the file is not what is wrong
    except Exception as exc:  # torch raises many kinds for a file that is not TorchScript
        torchscript = first_line(exc)
    else:
        arguments = tuple(a.name for a in module.forward.schema.arguments[1:])
        indexed = tuple(f"INPUT__{i}" for i in range(len(arguments)))
        return _File(
            path=path,
            model_format="torchscript",
            input_names=indexed,
            aliases=tuple((a,) for a in arguments),
            output_names=None,
            call=lambda tensors: module(*tensors),
        )
    try:
        inputs, outputs = pt2_rules.call_spec(path)
        loaded = torch._inductor.aoti_load_package(str(path))
    except (ValueError, RuntimeError, OSError, zipfile.BadZipFile) as exc:
        msg = (
            f"--from-file {path}: it is neither a TorchScript file (torch.jit.load: {torchscript}) nor an AOTInductor "
            f"package ({first_line(exc)}). {HINT} give a file saved with torch.jit.save (model.pt) or made by "
            "torch._inductor.aoti_compile_and_package (model.pt2); a state_dict or a torch.export .pt2 is neither."
        )
        raise ExportError(msg) from exc

    def call(tensors: list[torch.Tensor]) -> object:
        said, result = pt2_rules.call(loaded, tensors, inputs)
        if result is None:
            raise RuntimeError(said)
        return result

    return _File(
        path=path,
        model_format="pt2",
        input_names=tuple(inputs),
        aliases=tuple((f"INPUT__{i}",) for i in range(len(inputs))),
        output_names=tuple(outputs),
        call=call,
    )


def _examples(found: _File, samples: Path | None) -> list[torch.Tensor]:
    """Each input with a first axis of samples, from --samples."""
    names = ", ".join(
        f"{n} (or {'/'.join(a)})" if a else n for n, a in zip(found.input_names, found.aliases, strict=True)
    )
    example = (
        ", ".join(f"{n}=x{i}" for i, n in enumerate(found.input_names) if "[" not in n) or "**{'ARGS[0]': x}"
    )
    if samples is None:
        msg = (
            f"--from-file {found.path}: a model file does not record its inputs' shapes and types (a loaded "
            "TorchScript graph types them as bare Tensor, a package compiles them into its code), so they cannot be "
            f"read from it. {HINT} {NO_EXAMPLES.format(names=names, example=example)}"
        )
        raise ExportError(msg)
    try:
        with np.load(samples, allow_pickle=False) as npz:
            arrays = {key: np.asarray(npz[key]) for key in npz.files}
    except Exception as exc:  # numpy and zipfile raise many kinds on a file that is not an .npz
        msg = (
            f"--samples {samples}: it cannot be read as a numpy .npz archive ({first_line(exc)}). {HINT} "
            + NO_EXAMPLES.format(names=names, example=example)
        )
        raise ExportError(msg) from exc
    rows = []
    for input_name, aliases in zip(found.input_names, found.aliases, strict=True):
        key = next((k for k in (input_name, *aliases) if k in arrays), None)
        if key is None:
            msg = (
                f"--samples {samples}: it has no array for input {input_name} (it holds {sorted(arrays)}). {HINT} "
                + NO_EXAMPLES.format(names=names, example=example)
            )
            raise ExportError(msg)
        array = arrays.pop(key)
        if array.ndim == 0 or not dtypes.is_served_torch(torch.from_numpy(np.zeros(1, array.dtype)).dtype):
            msg = (
                f"--samples {samples}: array {key!r} is {array.dtype} of shape {list(array.shape)}; each input needs a "
                "first axis of samples and a data type the pytorch backend takes (bool, uint8, int8/16/32/64, "
                f"float16/32/64). {HINT} " + NO_EXAMPLES.format(names=names, example=example)
            )
            raise ExportError(msg)
        rows.append(torch.from_numpy(np.ascontiguousarray(array)))
    if arrays:
        msg = (
            f"--samples {samples}: it holds arrays for no input of the file: {sorted(arrays)}. {HINT} "
            + NO_EXAMPLES.format(names=names, example=example)
        )
        raise ExportError(msg)
    if len({r.shape[0] for r in rows}) != 1:
        msg = (
            f"--samples {samples}: its arrays hold different numbers of samples ({[r.shape[0] for r in rows]}). {HINT} "
            + NO_EXAMPLES.format(names=names, example=example)
        )
        raise ExportError(msg)
    return rows


def _axes(found: _File, given: Mapping[int | str, tuple[int, ...]]) -> dict[int, tuple[int, ...]]:
    """--dynamic-axis by input index or name (INPUT__i, its alias, or the call spec's name)."""
    axes: dict[int, tuple[int, ...]] = {}
    for key, values in given.items():
        if isinstance(key, int):
            index = key
        else:
            index = next(
                (
                    i
                    for i, (n, a) in enumerate(zip(found.input_names, found.aliases, strict=True))
                    if key in (n, *a)
                ),
                -1,
            )
        if not 0 <= index < len(found.input_names):
            msg = f"--dynamic-axis {key}: the file has no such input (its inputs are {', '.join(found.input_names)})."
            raise ExportError(msg)
        axes[index] = tuple(values)
    return axes


def _outputs(found: _File, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    """What the file returns for ``inputs``, as the backend takes it apart; ``ExportError`` in the model's words."""
    try:
        with torch.inference_mode():
            result = found.call(inputs)
    except Exception as exc:  # the model's own error
        shapes = ", ".join(
            f"{n} {list(t.shape)} {str(t.dtype).removeprefix('torch.')}"
            for n, t in zip(found.input_names, inputs, strict=True)
        )
        msg = f"--from-file {found.path}: it fails on its example inputs ({shapes}): {in_process.said(exc)}. {HINT} give inputs it takes with --samples FILE.npz."
        raise ExportError(msg) from exc
    found_tensors: list[torch.Tensor] | None = None
    if isinstance(result, torch.Tensor):
        found_tensors = [result]
    elif isinstance(result, dict) and all(isinstance(t, torch.Tensor) for t in result.values()):
        found_tensors = list(result.values())
    elif isinstance(result, tuple | list) and all(isinstance(t, torch.Tensor) for t in result):
        found_tensors = list(result)
    if found_tensors is not None:
        refused = [str(t.dtype) for t in found_tensors if not dtypes.is_served_torch(t.dtype)]
        if refused:
            msg = (
                f"--from-file {found.path}: it returns {', '.join(refused)}, which Triton's pytorch backend does not "
                f"serve. {HINT} cast the outputs in the model (bfloat16 to float16 or float32) and save it again."
            )
            raise ExportError(msg)
        return found_tensors
    msg = (
        f"--from-file {found.path}: forward() returns {type(result).__name__}; Triton's pytorch backend serves a tensor "
        f"or a tuple of tensors. {HINT} export the model again from its module (`tritonpt export --model ...` wraps "
        "dicts, lists and ModelOutputs)."
    )
    raise ExportError(msg)


def _batch_axis(found: _File, rows: list[torch.Tensor], wanted: int | None) -> tuple[bool, list[str]]:
    """Whether the file batches on its first axis: run at batch 1 and batch 2, every output's first axis must
    follow and each row must be the same sample alone. ``wanted`` 0 says not to batch; > 0 demands it."""
    if wanted == 0:
        return False, []
    count = rows[0].shape[0]
    pair = [torch.cat([r[:1], r[1:2] if count > 1 else r[:1]]) for r in rows]
    said = (
        [] if count > 1 else ["one sample given: its batch axis was checked on it twice, not on two samples"]
    )
    why = ""
    try:
        with torch.inference_mode():
            alone = [_outputs(found, [r[i : i + 1] for r in pair]) for i in (0, 1)]
            both = _outputs(found, pair)
    except ExportError as exc:
        why = f"it fails at batch 1 or 2 ({exc})"
    else:
        for j, output in enumerate(both):
            if output.dim() == 0 or output.shape[0] != 2 or any(a[j].shape[:1] != (1,) for a in alone):
                why = f"output {j}'s first axis does not follow the batch (shape {list(output.shape)} at batch 2)"
                break
            rows_alone = torch.cat([alone[0][j], alone[1][j]])
            tolerance = spec.tolerance_for(dtypes.from_torch(output.dtype).config)
            if rows_alone.shape != output.shape or not torch.allclose(
                output.double(), rows_alone.double(), atol=tolerance.atol, rtol=tolerance.rtol, equal_nan=True
            ):
                why = f"output {j} of a batch of 2 differs from its samples run alone (the file mixes rows)"
                break
    if not why:
        return True, said
    if wanted is not None:
        msg = (
            f"--from-file {found.path}: --max-batch-size {wanted} asks for a batch axis, and the file has none: {why}. "
            f"{HINT} leave --max-batch-size out (it is then served without batching, at its example's shape), or "
            "export the model again with a batch axis whose rows are independent."
        )
        raise ExportError(msg)
    return False, [f"served without a batch axis (max_batch_size 0): {why}"]


def _one_request(found: _File, rows: list[torch.Tensor], notes: list[str]) -> tuple[torch.Tensor, ...]:
    """Without a batch axis: the samples as one request (a file traced at the batch size they hold), else their
    first row alone (a file that takes one sample, with no batch axis of its own)."""
    try:
        _outputs(found, list(rows))
    except ExportError:
        if rows[0].shape[0] < 2:
            raise
        notes.append("its samples together are no request it takes: served on one sample's shape")
        return tuple(r[:1] for r in rows)
    return tuple(rows)


def _other_run(
    found: _File, examples: tuple[torch.Tensor, ...], axes: Mapping[int, tuple[int, ...]]
) -> list[torch.Tensor]:
    """The outputs for another length on every --dynamic-axis (cut short, or repeated along it, so that the values
    stay ones the model takes); none given: no second run."""
    if not axes:
        return []
    inputs = []
    for index, tensor in enumerate(examples):
        changed = tensor
        for axis in axes.get(index, ()):
            length = other_length(tensor.shape[axis])
            repeats = -(-length // max(1, tensor.shape[axis]))
            changed = torch.cat([changed] * repeats, dim=axis).narrow(axis, 0, length)
        inputs.append(changed)
    try:
        return _outputs(found, inputs)
    except ExportError as exc:
        given = ", ".join(f"{found.input_names[i]}:{a}" for i, axis in axes.items() for a in axis)
        msg = (
            f"--from-file {found.path}: with another length on --dynamic-axis {given} the file fails ({exc}). {HINT} "
            "leave out the axes whose length it fixes."
        )
        raise ExportError(msg) from exc


def _dims(
    produced: Sequence[torch.Tensor], other: Sequence[torch.Tensor], *, batching: bool
) -> list[list[int]]:
    """Each output's config dims: an axis whose length changed with another input length is -1."""
    dims = []
    for j, tensor in enumerate(produced):
        shape = list(tensor.shape)
        if other:
            shape = [-1 if a != b else a for a, b in zip(shape, other[j].shape, strict=False)]
        dims.append(shape[1:] if batching else shape)
    return dims


def _samples(rows: list[torch.Tensor], *, batching: bool) -> in_process.Samples:
    """The rows as in_process runs them: each a request of batch 1 (without its axis) or, unbatched, whole."""
    what = in_process.SAMPLES
    if not batching:
        return in_process.Samples(rows=(tuple(r.numpy() for r in rows),), what=what)
    count = rows[0].shape[0]
    return in_process.Samples(rows=tuple(tuple(r[i].numpy() for r in rows) for i in range(count)), what=what)


def _stack(given: in_process.Samples, *, batching: bool) -> list[in_process.Array]:
    """The samples as samples.npz holds them: one array per input, a first axis of samples where the model batches,
    else the one request."""
    if not batching:
        return list(given.rows[0])
    return [np.stack([row[k] for row in given.rows]) for k in range(len(given.rows[0]))]
