"""TorchScript: the model traced (default) or scripted, wrapped in an Adapter where its inputs or outputs need
one, saved as ``model.pt``, reloaded with ``torch.jit.load`` and held to eager PyTorch on every reference case."""

from __future__ import annotations

import warnings
import zipfile
from collections.abc import Sequence
from pathlib import Path

import torch

from tritonpt import jit, reference, spec
from tritonpt.errors import HINT, ExportError, first_line
from tritonpt.export.eager import Eager, as_served, sentence
from tritonpt.export.outputs import Adapter
from tritonpt.parity import compare
from tritonpt.spec import ModelSpec

TracerWarning: type[Warning] = torch.jit.TracerWarning  # type: ignore[attr-defined]


def _script_failure(exc: Exception) -> str:
    """TorchScript's compile errors run to a page of source: the first line and where it points."""
    lines = [line.strip() for line in str(exc).strip().splitlines()]
    where = next((line for line in lines if line.startswith('File "')), "")
    return f"{first_line(exc).rstrip(':')}{f' ({where})' if where else ''}"


def needs_adapter(eager: Eager) -> bool:
    """Inputs passed as keywords, or outputs that are not a Tensor or a flat tuple of tensors."""
    return eager.spec.keyword_inputs or not eager.structure.flat


def compile_model(eager: Eager) -> tuple[torch.jit.ScriptModule, list[str]]:
    """Trace or script the model (a scripted one traced once more inside the Adapter, which keeps its control
    flow: the tracer records a call of the scripted forward); tracer warnings come back as notes."""
    model_spec = eager.spec
    target: torch.nn.Module = eager.module
    caught: list[warnings.WarningMessage] = []
    try:
        if model_spec.method == "script":
            scripted = jit.script(eager.module)
            if not needs_adapter(eager):
                return scripted, []
            target = scripted
        if needs_adapter(eager):
            target = Adapter(
                target,
                eager.structure,
                input_names=model_spec.resolved_input_names(),
                keywords=model_spec.keyword_inputs,
            )
        # Under no_grad, as it is served: nn.MultiheadAttention takes another path when gradients are on.
        with warnings.catch_warnings(record=True) as caught, torch.no_grad():
            warnings.simplefilter("always", TracerWarning)
            # on copies, as Eager runs it: a forward() that changes its inputs must not change the user's
            traced = jit.trace(target, tuple(t.clone() for t in model_spec.example_inputs), check_trace=False)
    except jit.TorchScriptRefusedError:
        raise
    except Exception as exc:  # torch raises anything from RuntimeError to NotSupportedError here
        scripting = model_spec.method == "script" and not isinstance(target, torch.jit.ScriptModule | Adapter)
        hint = (
            "Scripting supports a subset of Python: annotate types or simplify the code, or trace instead."
            if scripting
            else "If the model has data-dependent control flow, export it with --script."
        )
        method = "script" if scripting else "trace"
        detail = _script_failure(exc) if scripting else first_line(exc)
        msg = (
            f"Model {model_spec.name!r}: torch.jit.{method} failed: {type(exc).__name__}: {sentence(detail)} "
            f"{HINT} {hint}"
        )
        raise ExportError(msg) from exc
    notes = {str(w.message).splitlines()[0] for w in caught if w.category is TracerWarning}
    return traced, sorted(notes)


def check_reloaded(  # noqa: PLR0917 - the columns of one reference case, as export holds them
    model_spec: ModelSpec,
    reloaded: torch.jit.ScriptModule,
    case: reference.Case,
    output_names: Sequence[str],
    output_types: Sequence[str],
    warned: Sequence[str] = (),
) -> None:
    """The reloaded TorchScript against eager on one case; a disagreement names what the tracer ``warned`` of."""
    inputs = [torch.from_numpy(a.copy()) for a in case.inputs]
    try:
        with torch.inference_mode():
            result = reloaded(*inputs)
    except Exception as exc:  # the reloaded TorchScript raises what the model raises
        msg = (
            f"Model {model_spec.name!r}: the reloaded TorchScript failed on reference case {case.id!r} "
            f"({type(exc).__name__}: {first_line(exc)}). {_trace_hint(model_spec)}"
        )
        raise ExportError(msg) from exc
    outputs = (result,) if isinstance(result, torch.Tensor) else tuple(result)
    if len(outputs) != len(case.outputs) or not all(isinstance(t, torch.Tensor) for t in outputs):
        msg = (
            f"Model {model_spec.name!r}: the reloaded TorchScript returns {type(result).__name__} of "
            f"{len(outputs)}, eager {len(case.outputs)} tensors."
        )
        raise ExportError(msg)
    failures = []
    for name, data_type, got, expected in zip(output_names, output_types, outputs, case.outputs, strict=True):
        tolerance = spec.tolerance_for(data_type, overrides=model_spec.tolerances)
        result_of = compare(name, as_served(got, batching=model_spec.batching).numpy(), expected, tolerance)
        if not result_of.ok:
            failures.append(result_of.describe())
    if failures:
        said = f"\nThe tracer warned: {'; '.join(warned)}" if warned else ""
        msg = (
            f"Model {model_spec.name!r}: the reloaded TorchScript disagrees with eager PyTorch on case "
            f"{case.id!r}:\n  " + "\n  ".join(failures) + f"{said}\n{_trace_hint(model_spec)}"
        )
        raise ExportError(msg)


def _trace_hint(model_spec: ModelSpec) -> str:
    if model_spec.method == "trace":
        return (
            "Tracing records one path through the code with fixed shapes: export with --script if forward() "
            "branches on data, or declare the variable axes (--dynamic-axis) or max_batch_size 0 if shapes are fixed."
        )
    return "Check that the scripted forward() matches the eager one on these inputs."


def torchscript_format(path: Path) -> int:
    """The file-format version recorded in a TorchScript archive.

    torch.jit.save writes it to ``<archive>/.data/version`` or ``<archive>/version``; PyTorch's reader
    takes ``.data/version`` first, and so do we.
    """
    with zipfile.ZipFile(path) as archive:
        names = archive.namelist()
        for suffix in ("/.data/version", "/version"):
            for entry in names:
                if entry.endswith(suffix) and entry.count("/") == suffix.count("/"):
                    return int(archive.read(entry).decode().strip())
    msg = f"{path}: no version record inside; this is not a TorchScript archive written by torch.jit.save."
    raise ValueError(msg)
