"""The export stage itself: a ModelSpec becomes ``model.pt`` (or ``model.pt2``) + ``config.pbtxt`` + eager reference
data in a repository, staged and validated before it is moved in (the package's face, :mod:`tritonpt.export`, says
how)."""

from __future__ import annotations

import importlib
import importlib.metadata
import platform
import sys
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch

from tritonpt import __version__, builtin, caches, dtypes, jit, reference, spec, validate
from tritonpt.errors import HINT, ExportError, SpecError, first_line
from tritonpt.export import cache as export_cache
from tritonpt.export import pt2 as pt2_export
from tritonpt.export.config import add_warmup, build_config, header
from tritonpt.export.eager import Eager, sentence
from tritonpt.export.stamp import builtin_fingerprint, stamp_matches, write_stamp
from tritonpt.export.torchscript import check_reloaded, compile_model, torchscript_format
from tritonpt.options import MODEL_FORMATS, ModelFormat, Pt2Build
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
from tritonpt.spec import ModelSpec

Step = Callable[[str], None]


def _quiet(_: str) -> None:
    pass


@dataclass(frozen=True, kw_only=True)
class ExportResult:
    """What one export wrote."""

    name: str
    model: ModelDir
    method: str
    cases: tuple[str, ...]
    seconds: float
    warnings: tuple[str, ...]
    kept: bool = False  # unchanged since the last export: nothing was written
    cached: bool = False  # the same export, copied from the export cache (tritonpt.export.cache)
    notes: tuple[str, ...] = ()  # what export did to serve the model as given (an adapted output, say)


def load_factory(module_name: str, attr: str) -> Callable[[], object]:
    """Import ``module_name`` (importable from the current directory) and return its callable ``attr``."""
    target = f"{module_name}:{attr}"
    if "" not in sys.path and str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        if exc.name and exc.name != module_name and not module_name.startswith(f"{exc.name}."):
            msg = (
                f"--model {target!r}: importing {module_name!r} failed: it imports {exc.name!r}, which this "
                f"environment does not have ({first_line(exc)}). {HINT} install it here, or export from the "
                "environment the model runs in."
            )
        else:
            msg = (
                f"--model {target!r}: cannot import {module_name!r} ({exc}). Run from the folder that holds it, "
                "or put it on PYTHONPATH."
            )
        raise SpecError(msg) from exc
    except Exception as exc:  # the user's module runs here: whatever it raises is the user's to fix
        msg = (
            f"--model {target!r}: importing {module_name!r} raised {type(exc).__name__}: {first_line(exc)}. "
            f"{HINT} fix the module (`python -c 'import {module_name}'` shows the traceback), or rerun with --debug."
        )
        raise SpecError(msg) from exc
    factory = getattr(module, attr, None)
    if not callable(factory):
        msg = (
            f"--model {target!r}: {module_name} has no callable {attr!r}. It must be a zero-argument function "
            "returning (torch.nn.Module, tuple_of_example_tensors) or a tritonpt.spec.ModelSpec."
        )
        raise SpecError(msg)
    return factory  # type: ignore[no-any-return]


def export_factory(
    factory: Callable[[], object],
    *,
    name: str,
    repository: Path,
    seed: int = 0,
    step: Step = _quiet,
    model_format: ModelFormat = "torchscript",
    pt2_build: Pt2Build = "stock",
    **options: object,
) -> ExportResult:
    """Build a model from its factory (torch seeded), then :func:`export` it."""
    started = time.perf_counter()
    step(f"[{name}] building the model (seed {seed})")
    try:
        built = builtin.build(factory, seed)
    except Exception as exc:  # the user's factory: whatever it raises is the user's to fix
        msg = (
            f"Model {name!r}: the factory raised {type(exc).__name__}: {sentence(first_line(exc))} {HINT} call it "
            "yourself to see the traceback (or rerun with --debug); it must take no arguments and return "
            "(torch.nn.Module, example inputs) or a tritonpt.spec.ModelSpec."
        )
        raise SpecError(msg) from exc
    model_spec = spec.coerce(built, name=name, **options)  # type: ignore[arg-type]
    result = export(
        model_spec,
        repository=repository,
        seed=seed,
        step=step,
        model_format=model_format,
        pt2_build=pt2_build,
    )
    return replace(result, seconds=time.perf_counter() - started)


def builtin_names(model_format: ModelFormat) -> dict[str, str]:
    """The built-in set's folder names for one format, to the model each is made from (``resnet18_pt2``:
    ``resnet18``); models torch.export cannot take (builtin.NOT_PT2) have no PT2 copy."""
    if model_format == "torchscript":
        return {name: name for name in builtin.BUILTIN}
    return {f"{name}{pt2_export.SUFFIX}": name for name in builtin.BUILTIN if name not in builtin.NOT_PT2}


def builtin_parameters(folders: Collection[str], *, seed: int = 0) -> dict[str, dict[str, str]]:
    """The config parameters an export of each of these built-in folders writes, without exporting them: what a
    sharded export records of the other runners' models for the rules across models."""
    built: dict[str, ModelSpec] = {}  # each model once, for both of its folders
    written = {}
    for model_format in MODEL_FORMATS:
        for folder, name in builtin_names(model_format).items():
            if folder in folders:
                if name not in built:
                    built[name] = spec.coerce(builtin.build(builtin.BUILTIN[name], seed), name=name)
                model_spec = built[name]
                if model_format == "pt2":
                    model_spec = pt2_export.as_written(model_spec)
                written[folder] = dict(model_spec.parameters)
    return written


def export_builtin(
    names: Sequence[str],
    *,
    repository: Path,
    seed: int = 0,
    force: bool = False,
    step: Step = _quiet,
    model_formats: Sequence[ModelFormat] = ("torchscript",),
    folders: Collection[str] | None = None,
    pt2_build: Pt2Build = "stock",
) -> list[ExportResult]:
    """Export models of the built-in set by name, in each format (a PT2 copy is ``<name>_pt2``); one whose
    stamp says nothing changed is kept (unless ``force``). ``folders``: only these of the folders that makes
    (a shard's). ``pt2_build``: the PT2 build that will serve the PT2 copies (patched: with dynamic_batching)."""
    unknown = [n for n in names if n not in builtin.BUILTIN]
    if unknown:
        msg = f"Unknown built-in model(s) {', '.join(unknown)}; the built-in set is {', '.join(builtin.BUILTIN)}."
        raise SpecError(msg)
    results = []
    for model_format in model_formats:
        for folder, name in builtin_names(model_format).items():
            if name not in names or (folders is not None and folder not in folders):
                continue
            model = ModelDir(root=repository / folder)
            written_for = f"+{pt2_build}" if model_format == "pt2" and pt2_build != "stock" else ""
            fingerprint = builtin_fingerprint(
                f"{folder}:{model_format}{written_for}",
                seed,
                machine=export_cache.machine() if model_format == "pt2" else "",
            )
            if not force and stamp_matches(model, fingerprint):
                step(
                    f"[{folder}] unchanged since its last export (model code, torch, seed): kept (--force re-exports)"
                )
                results.append(_unchanged(model, kept=True))
                continue
            if not force and export_cache.restore(fingerprint, model):
                caches.note("export", folder, hit=True, say=step)
                results.append(_unchanged(model, kept=False))
                continue
            result = export_factory(
                builtin.BUILTIN[name],
                name=folder,
                repository=repository,
                seed=seed,
                step=step,
                model_format=model_format,
                pt2_build=pt2_build,
            )
            write_stamp(result.model, fingerprint, seconds=result.seconds)
            export_cache.store(result.model, fingerprint)
            caches.note("export", folder, hit=False, seconds=result.seconds, say=step)
            results.append(result)
        if model_format == "pt2":
            for name in sorted(set(names) & set(builtin.NOT_PT2)):
                step(f"[{name}] no PT2 copy: {builtin.NOT_PT2[name]}")
    return results


def _unchanged(model: ModelDir, *, kept: bool) -> ExportResult:
    """A built-in export that wrote nothing new: kept in place, or copied from the export cache."""
    return ExportResult(
        name=model.name,
        model=model,
        method="",
        cases=(),
        seconds=0.0,
        warnings=(),
        kept=kept,
        cached=not kept,
    )


def export(
    model_spec: ModelSpec,
    *,
    repository: Path,
    seed: int = 0,
    step: Step = _quiet,
    model_format: ModelFormat = "torchscript",
    pt2_build: Pt2Build = "stock",
) -> ExportResult:
    """Export one model into ``repository`` as TorchScript or as a PT2 package; see the package docstring.
    ``pt2_build``: the PT2 build that will serve it (patched: dynamic_batching is written, and validated, as for
    TorchScript)."""
    model_spec = spec.named_inputs(model_spec)
    spec.check(model_spec)
    started = time.perf_counter()
    name = model_spec.name
    pt2 = model_format == "pt2"
    if pt2:
        pt2_export.requirements()

    step(f"[{name}] running eagerly on the example inputs")
    eager = Eager(model_spec)
    notes = [n for n in [eager.structure.note()] if n and not pt2]
    eager.check_deterministic()
    cases = eager.reference_cases(seed)  # before tracing: a structure that changes with the input ends here
    step(f"[{name}] {len(cases)} reference case(s): {', '.join(c.id for c in cases)}")
    example_outputs = eager.outputs(model_spec.example_inputs)
    output_dims = eager.output_dims(example_outputs, cases)
    output_types = tuple(dtypes.from_torch(t.dtype).config for t in example_outputs)
    warnings: list[str] = []  # the tracer's
    if pt2:
        input_names, output_names = (
            pt2_export.input_names(model_spec),
            pt2_export.output_names(eager.structure),
        )
        notes += pt2_export.notes(model_spec, eager.structure, pt2_build)
        model_spec = pt2_export.as_written(model_spec, pt2_build)
    else:
        input_names, output_names = model_spec.resolved_input_names(), eager.structure.names()
        step(f"[{name}] {'scripting' if model_spec.method == 'script' else 'tracing'}")
        try:
            compiled, warnings = compile_model(eager)
        except ExportError as exc:
            raise _with_pt2_verdict(exc, eager, cases, output_types, step) from exc
    notes += [
        f"{output}: one value a sample ([batch]), served as [batch, 1] (dims [ 1 ], reshape {{ shape: [ ] }})"
        for output, one in zip(output_names, eager.reshaped, strict=True)
        if one
    ]
    for note in notes:
        step(f"[{name}] {note}")

    with staged_model(repository, name) as model:
        model_file = model.root / VERSION / (PT2_FILE if pt2 else MODEL_FILE)
        model_file.parent.mkdir()
        if pt2:
            device = pt2_export.compile_package(eager, cases, model_file, step)
            step(f"[{name}] loading {model_file.name} with aoti_load_package and comparing with eager")
            pt2_export.check_package(model_spec, model_file, cases, output_names, output_types, device)
        else:
            device = "cpu"
            jit.save(compiled, model_file)
            step(f"[{name}] reloading {model_file.name} with torch.jit.load and comparing with eager")
            reloaded = jit.load(str(model_file))
            try:
                for case in cases:
                    check_reloaded(model_spec, reloaded, case, output_names, output_types, warnings)
            except ExportError as exc:
                raise _with_pt2_verdict(exc, eager, cases, output_types, step) from exc
        config = build_config(
            model_spec,
            input_names,
            output_names,
            output_types,
            output_dims,
            platform=PT2_PLATFORM if pt2 else PLATFORM,
            reshaped=eager.reshaped,
        )
        if pt2:
            config.default_model_filename = PT2_FILE  # core r26.03 fills in model.pt otherwise
        add_warmup(config, model, min(cases, key=lambda c: c.batch_size))
        text = header(model_spec, spec.forward_arguments(model_spec)) + render_config(config)
        model.config.write_text(text, encoding="utf-8")
        found = _reference(
            model_spec,
            seed=seed,
            model_file=model_file,
            cases=cases,
            input_names=input_names,
            output_names=output_names,
            output_types=output_types,
            model_format=model_format,
            device=device,
        )
        reference.save(found, model)
        step(f"[{name}] validating the staged model folder")
        # As for the server it is exported for: a KIND_GPU model exported on a CPU machine is still sound.
        validate.refuse_staged(
            model, repository / name, validate.validate_model(model, gpu_available=True, pt2_build=pt2_build)
        )
    step(f"[{name}] written to {repository / name} in {time.perf_counter() - started:.1f} s")
    return ExportResult(
        name=name,
        model=ModelDir(root=repository / name),
        method="aoti" if pt2 else model_spec.method,
        cases=tuple(c.id for c in cases),
        seconds=time.perf_counter() - started,
        warnings=tuple(warnings),
        notes=tuple(notes),
    )


def _with_pt2_verdict(
    refused: ExportError, eager: Eager, cases: Sequence[reference.Case], types: Sequence[str], step: Step
) -> ExportError:
    """TorchScript's refusal, and whether PT2 would serve the model instead (tried, not guessed)."""
    step(
        f"[{eager.spec.name}] TorchScript refused it; trying PT2, to say whether --format pt2 would serve it"
    )
    return ExportError(f"{refused}\n{pt2_export.verdict(eager, cases, types, step)}")


def _reference(
    model_spec: ModelSpec,
    *,
    seed: int,
    model_file: Path,
    cases: Sequence[reference.Case],
    input_names: Sequence[str],
    output_names: Sequence[str],
    output_types: Sequence[str],
    model_format: ModelFormat,
    device: str,
) -> reference.Reference:
    return reference.Reference(
        model=model_spec.name,
        provenance=reference.Provenance(
            torch_version=torch.__version__,
            torchvision_version=importlib.metadata.version("torchvision"),
            numpy_version=np.__version__,
            python_version=platform.python_version(),
            device=device,
            seed=seed,
            method="aoti" if model_format == "pt2" else model_spec.method,
            torchscript_format=torchscript_format(model_file) if model_format == "torchscript" else 0,
            exporter=f"tritonpt {__version__}",
            model_format=model_format,
        ),
        inputs=tuple(
            reference.TensorInfo(name=n, data_type=dtypes.from_torch(t.dtype).config)
            for n, t in zip(input_names, model_spec.example_inputs, strict=True)
        ),
        outputs=tuple(
            reference.OutputInfo(
                name=n,
                data_type=t,
                cpu_tolerance=spec.tolerance_for(t, overrides=model_spec.tolerances),
                gpu_tolerance=spec.tolerance_for(t, gpu=True, overrides=model_spec.tolerances),
            )
            for n, t in zip(output_names, output_types, strict=True)
        ),
        cases=tuple(cases),
    )
