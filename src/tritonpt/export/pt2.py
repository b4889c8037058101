"""PT2: the model through ``torch.export`` and AOTInductor into ``model.pt2``, for ``platform: "torch_aoti"``.

Tensors are named after the call spec, as pytorch_backend r26.03 and later read it: inputs ``ARGS[i]`` or
``KWARGS[name]``, outputs ``RESULT``, ``RESULT[i]`` or ``RESULT[key]``. What is exported is an adapter that
returns the model's tensors as a plain dict, tuple or tensor, since the backend's call-spec parser takes only
builtins. The config leaves out what the r26.05 backend does not serve right (docs/guide/pt2.md lists it).
"""

from __future__ import annotations

import importlib.util
import shutil
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from tritonpt import reference, spec
from tritonpt.errors import HINT, ExportError, first_line
from tritonpt.export import packages
from tritonpt.export.eager import Eager, as_served, sentence
from tritonpt.export.outputs import Structure
from tritonpt.options import Pt2Build
from tritonpt.parity import compare
from tritonpt.spec import ModelSpec

SUFFIX = "_pt2"
"""A built-in model's PT2 copy is named ``<name>_pt2``, so that one repository holds both formats."""


def input_names(model_spec: ModelSpec) -> tuple[str, ...]:
    if model_spec.keyword_inputs:
        return tuple(f"KWARGS[{n}]" for n in model_spec.resolved_input_names())
    return tuple(f"ARGS[{i}]" for i in range(len(model_spec.example_inputs)))


def output_names(structure: Structure) -> tuple[str, ...]:
    if structure.kind == "Tensor":
        return ("RESULT",)
    if not structure.keyed:
        return tuple(f"RESULT[{i}]" for i in range(len(structure.paths)))
    return tuple(f"RESULT[{key}]" for key in _keys(structure))


def _keys(structure: Structure) -> list[str]:
    return [".".join(str(part) for part in path) for path in structure.paths]


def notes(model_spec: ModelSpec, structure: Structure, pt2_build: Pt2Build = "stock") -> list[str]:
    """What a PT2 export leaves out of what TorchScript's would write, said once."""
    said = []
    if model_spec.batching and model_spec.dynamic_batching and pt2_build == "stock":
        said.append(
            "no dynamic_batching: pytorch_backend r26.05's PT2 path returns the whole merged batch to every request "
            "(docs/upstream/pt2-dynamic-batching.md; --pt2-build patched writes it, for our patched build)"
        )
    if dict(model_spec.parameters) != dict(spec.DEFAULT_PARAMETERS) and model_spec.parameters:
        said.append(
            "no backend parameters: the PT2 path never applies them (docs/upstream/pt2-parameters.md)"
        )
    if structure.dropped:
        said.append(
            f"left out, as they are None on the example inputs: {', '.join(map(str, structure.dropped))}"
        )
    return said


def as_written(model_spec: ModelSpec, pt2_build: Pt2Build = "stock") -> ModelSpec:
    """The settings a PT2 config is written with: those :func:`notes` says it leaves out, left out. For the
    patched PT2 build, which splits a dynamic batch, dynamic_batching is written as for TorchScript."""
    return replace(
        model_spec, dynamic_batching=model_spec.dynamic_batching and pt2_build == "patched", parameters={}
    )


def requirements() -> None:
    """What AOTInductor needs at export time: a C++ compiler and setuptools (its build helpers import it)."""
    missing = []
    if shutil.which("c++") is None and shutil.which("g++") is None:
        missing.append("a C++ compiler (c++ or g++ on PATH; Debian/Ubuntu: `apt-get install g++`)")
    if importlib.util.find_spec("setuptools") is None:
        missing.append("setuptools in this environment (`pip install setuptools`)")
    if missing:
        msg = (
            f"Cannot export a PT2 package without {' and '.join(missing)}: AOTInductor compiles the exported "
            "program into a shared library at export time. TorchScript (--format torchscript) needs neither."
        )
        raise ExportError(msg)


class _Pt2Adapter(torch.nn.Module):
    """The model called as its example inputs say, returning its tensors as builtins: the tensor, a tuple, or a
    dict by key (what the backend's call-spec parser takes)."""

    def __init__(self, eager: Eager) -> None:
        super().__init__()
        self.inner = eager.module
        self.structure = eager.structure
        self.names = eager.spec.resolved_input_names()
        self.keywords = eager.spec.keyword_inputs
        self.keys = _keys(eager.structure)

    def run(self, inputs: Sequence[torch.Tensor]) -> object:
        if self.keywords:
            result = self.inner(**dict(zip(self.names, inputs, strict=True)))
        else:
            result = self.inner(*inputs)
        tensors = self.structure.pick(result)
        if self.structure.kind == "Tensor":
            return tensors[0]
        if not self.structure.keyed:
            return tensors
        return dict(zip(self.keys, tensors, strict=True))


def _adapter(eager: Eager) -> torch.nn.Module:
    """A subclass of _Pt2Adapter whose forward() has one parameter per input, named after it: torch.export binds
    keyword inputs to parameters by name, and records them in the call spec as KWARGS[name]."""
    names = [f"x{i}" for i in range(len(eager.spec.example_inputs))]
    if eager.spec.keyword_inputs:
        names = list(eager.spec.resolved_input_names())
    source = f"def forward(self, {', '.join(names)}):\n    return self.run(({', '.join(names)},))\n"
    namespace: dict[str, Any] = {}
    exec(source, namespace)  # noqa: S102 - the names are the model's own argument names, checked identifiers
    made: torch.nn.Module = type("Pt2Adapter", (_Pt2Adapter,), {"forward": namespace["forward"]})(eager)
    return made


def _example(eager: Eager, cases: Sequence[reference.Case]) -> list[torch.Tensor]:
    """The largest reference case's inputs: a batch of max_batch_size (torch.export cannot make an axis of
    length 1 dynamic), every variable axis at the example's length."""
    largest = max(cases, key=lambda c: c.batch_size)
    return [torch.from_numpy(a.copy()) for a in largest.inputs]


def _dynamic_shapes(model_spec: ModelSpec) -> list[dict[int, Any]]:
    dynamic = torch.export.Dim.DYNAMIC
    shapes = []
    for index in range(len(model_spec.example_inputs)):
        axes: dict[int, Any] = dict.fromkeys(model_spec.dynamic_axes.get(index, ()), dynamic)
        if model_spec.batching and model_spec.max_batch_size > 1:
            axes[0] = dynamic
        shapes.append(axes)
    return shapes


def device_for(model_spec: ModelSpec) -> str:
    """CUDA where this host has a GPU and the instances will use it (KIND_GPU, or KIND_AUTO), else the CPU: a
    package runs on the device it was compiled for."""
    return "cuda" if torch.cuda.is_available() and model_spec.instance_kind != "KIND_CPU" else "cpu"


def _export(eager: Eager, cases: Sequence[reference.Case], device: str) -> torch.export.ExportedProgram:
    """torch.export of the model in its adapter, every batch and variable axis dynamic; ``ExportError`` naming
    what torch.export could not capture (its own error is the cause)."""
    model_spec = eager.spec
    example = [t.to(device) for t in _example(eager, cases)]
    adapter = _adapter(eager).to(device)
    shapes = _dynamic_shapes(model_spec)
    try:
        with torch.no_grad():
            if model_spec.keyword_inputs:
                names = model_spec.resolved_input_names()
                return torch.export.export(
                    adapter,
                    (),
                    dict(zip(names, example, strict=True)),
                    dynamic_shapes=dict(zip(names, shapes, strict=True)),
                    strict=False,
                )
            return torch.export.export(adapter, tuple(example), dynamic_shapes=tuple(shapes), strict=False)
    except Exception as exc:  # torch.export raises its own errors for what it cannot capture
        msg = (
            f"Model {model_spec.name!r}: torch.export failed: {type(exc).__name__}: {sentence(first_line(exc))} {HINT} "
            "torch.export needs one graph for every input: data-dependent Python control flow needs torch.cond, "
            "and a shape that depends on the values (a detection model's per-image results) cannot be one "
            "program. TorchScript (--format torchscript, with --script for control flow) may still serve it."
        )
        raise ExportError(msg) from exc


def compile_package(eager: Eager, cases: Sequence[reference.Case], model_file: Path, step: Any) -> str:  # noqa: ANN401
    """torch.export, then AOTInductor into ``model_file``; returns the device it was compiled for."""
    requirements()
    model_spec = eager.spec
    device = device_for(model_spec)
    program = _export(eager, cases, device)
    step(f"[{model_spec.name}] compiling with AOTInductor for {device} (tens of seconds, once per program)")
    started = time.perf_counter()
    try:
        packages.compile_package(program, model_file, what=model_spec.name, say=step)
    except Exception as exc:  # the inductor compiler: a C++ error, a missing toolchain, an unsupported op
        msg = (
            f"Model {model_spec.name!r}: AOTInductor could not compile the exported program: {type(exc).__name__}: "
            f"{sentence(first_line(exc))} {HINT} rerun with --debug for the compiler's output."
        )
        raise ExportError(msg) from exc
    step(f"[{model_spec.name}] compiled in {time.perf_counter() - started:.0f} s")
    return device


def check_package(  # noqa: PLR0917 - the same columns as torchscript.check_reloaded's
    model_spec: ModelSpec,
    model_file: Path,
    cases: Sequence[reference.Case],
    names: Sequence[str],
    types: Sequence[str],
    device: str,
) -> None:
    """The package loaded as the backend loads it (``aoti_load_package``) against eager on every case."""
    try:
        loaded = torch._inductor.aoti_load_package(str(model_file))
    except Exception as exc:  # a package the loader refuses
        msg = f"Model {model_spec.name!r}: the compiled package does not load ({first_line(exc)})."
        raise ExportError(msg) from exc
    _hold(model_spec, loaded, cases, names, types, device, what="the compiled package")


def _hold(  # noqa: PLR0917 - check_package's columns, and what is held
    model_spec: ModelSpec,
    call: Any,  # noqa: ANN401 - a loaded package or an exported program's module: called as the adapter is
    cases: Sequence[reference.Case],
    names: Sequence[str],
    types: Sequence[str],
    device: str,
    *,
    what: str,
) -> None:
    """``call`` against eager on every reference case; ``ExportError`` naming the case and the outputs."""
    for case in cases:
        inputs = [torch.from_numpy(a.copy()).to(device) for a in case.inputs]
        try:
            with torch.no_grad():
                if model_spec.keyword_inputs:
                    result = call(**dict(zip(model_spec.resolved_input_names(), inputs, strict=True)))
                else:
                    result = call(*inputs)
        except Exception as exc:  # what the compiled or exported model raises
            msg = (
                f"Model {model_spec.name!r}: {what} failed on reference case {case.id!r} ({first_line(exc)})."
            )
            raise ExportError(msg) from exc
        outputs = _flat(result)
        failures = []
        for name, data_type, got, expected in zip(names, types, outputs, case.outputs, strict=True):
            found = compare(
                name,
                as_served(got, batching=model_spec.batching).cpu().numpy(),
                expected,
                spec.tolerance_for(data_type, overrides=model_spec.tolerances),
            )
            if not found.ok:
                failures.append(found.describe())
        if failures:
            msg = (
                f"Model {model_spec.name!r}: {what} disagrees with eager PyTorch on case {case.id!r}:\n  "
                + "\n  ".join(failures)
            )
            raise ExportError(msg)


def verdict(eager: Eager, cases: Sequence[reference.Case], types: Sequence[str], step: Any) -> str:  # noqa: ANN401
    """For a model TorchScript refused: would PT2 serve it? Tried, not guessed: exported, compiled into a
    scratch package and held to eager on every reference case, as ``--format pt2`` would (tens of seconds)."""
    try:
        requirements()
    except ExportError as exc:
        return f"Whether PT2 (--format pt2) would serve it is not known here: {exc}"
    with tempfile.TemporaryDirectory(prefix="tritonpt-pt2-trial-") as folder:
        model_file = Path(folder) / "model.pt2"
        try:
            device = compile_package(eager, cases, model_file, step)
            check_package(eager.spec, model_file, cases, output_names(eager.structure), types, device)
        except ExportError as exc:
            said = (
                first_line(exc).removeprefix(f"Model {eager.spec.name!r}: ").split(f" {HINT}")[0].rstrip(":")
            )
            return f"PT2 would not serve it either, tried just now: {sentence(said)}"
    return (
        "PT2 would, tried just now: torch.export and AOTInductor make a package of it that agrees with eager "
        "PyTorch on every reference case, so `invoke export --format pt2` serves it (platform torch_aoti: "
        "Triton 26.03 and later, or the PT2 build this repository installs in the embedded server)."
    )


def _flat(result: object) -> list[torch.Tensor]:
    if isinstance(result, torch.Tensor):
        return [result]
    if isinstance(result, Mapping):
        return list(result.values())
    assert isinstance(result, tuple | list)  # noqa: S101 - the adapter returns a tensor, a dict or a tuple
    return list(result)
