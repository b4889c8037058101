"""One TorchScript model folder to a torch_aoti one: the file converted, compiled, configured and held to itself.

The file goes through torch's TorchScript converter (``torch._export.converter.TS2EPConverter``), or the user's
module (``--model``) stands in for it; ``torch.export`` makes the batch axis and every ``-1`` axis dynamic, and
AOTInductor compiles ``model.pt2``. The config is the original's with the platform, file and names the PT2 path
takes; the reference data is the TorchScript file's own outputs in-process. The package is held to them before the
folder moves in. Anything that stops a model is a :class:`RefusedError`: its reason and what to do.
"""

from __future__ import annotations

import dataclasses
import re
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from tritonclient.grpc.model_config_pb2 import ModelConfig, ModelInstanceGroup

from tritonpt import dtypes, in_process, jit, reference, spec, validate
from tritonpt.errors import RefusedError, TritonPtError, first_line
from tritonpt.export import packages
from tritonpt.export.config import add_warmup
from tritonpt.options import Pt2Build
from tritonpt.parity import compare
from tritonpt.repository import PT2_FILE, PT2_PLATFORM, ModelDir, read_config, render_config, staged_model
from tritonpt.validate.rules import config_type

Step = Callable[[str], None]
How = Literal["converted", "re-exported"]
CONVERTED: How = "converted"
REEXPORTED: How = "re-exported"

MIGRATED = "torchscript"
"""``Provenance.source`` of a migrated model's reference: the TorchScript file it came from, run in-process."""
HEADER = (
    "# Written by `tritonpt migrate` from {source} (TorchScript, pytorch_libtorch): {how} by torch {torch},\n"
    "# compiled with AOTInductor; the reference data is the TorchScript file's own outputs in-process.\n"
)


@dataclass(frozen=True, kw_only=True)
class Renamed:
    """A tensor whose name a client sends or asks for changes with the move."""

    kind: Literal["input", "output"]
    before: str
    after: str


@dataclass(frozen=True, kw_only=True)
class Held:
    """One output of the package against the TorchScript file, in-process, over every reference case."""

    output: str  # the migrated name
    max_abs_error: float
    max_rel_error: float
    atol: float
    rtol: float
    ok: bool


@dataclass(frozen=True, kw_only=True)
class Migrated:
    """A model that moved: where from and to, how, what a client must change and what the config lost."""

    name: str
    source: Path
    target: Path
    how: How
    version: str  # the version folder migrated
    renamed: tuple[Renamed, ...]
    notes: tuple[str, ...]
    held: tuple[Held, ...]
    seconds: float
    original: reference.Reference  # the file's outputs under the original names (the proof serves both)


def migrate_model(
    model: ModelDir,
    into: Path,
    *,
    module: Callable[[], object] | None = None,
    samples: Path | None = None,
    pt2_build: Pt2Build = "stock",
    step: Step = lambda _: None,
) -> Migrated:
    """Write ``into/<name>``, the torch_aoti form of the TorchScript model ``model`` (see the module docstring);
    :class:`RefusedError` where it cannot."""
    started = time.perf_counter()
    name = model.name
    config = read_config(model.config)
    _refuse_what_pt2_cannot_take(config)
    given = in_process.read_samples(samples, config) if samples else in_process.samples(model, config)
    step(f"[{name}] the TorchScript file in-process on {given.what}: the reference outputs")
    try:
        original = in_process.reference_of(model, config, given=given, keyed=True)
        own = in_process.OwnFile.load(model, config)
        ts_module = jit.load(own.path)
        order, picks = in_process.binding(ts_module, config, own.path)
    except TritonPtError as exc:
        msg = f"the TorchScript file cannot be run as Triton runs it: {exc}"
        raise RefusedError(
            msg,
            "make the model serve on pytorch_libtorch first (`tritonpt check --repository` says what is wrong).",
        ) from exc
    largest = max(original.cases, key=lambda c: c.batch_size)
    fed = in_process.fed_tensors(config, largest.inputs)
    arguments = tuple(fed[order[k]] for k in range(len(order)))
    with torch.no_grad():
        keyed = isinstance(ts_module(*arguments), dict)
    declared = tuple(t.name for t in config.output)
    if keyed:  # a dict, which the TorchScript backend never served: its tensors in config order
        picks = list(range(len(declared)))
    if module is None:
        step(f"[{name}] converting {own.path.name} with torch's TorchScript converter")
        inner, how = _converted(ts_module, arguments, name), CONVERTED
    else:
        step(f"[{name}] re-exporting from the module --model gives, instead of converting the file")
        inner, how = _module(module, name), REEXPORTED
    renamed = _renamed(config, order, picks)
    device = "cuda" if torch.cuda.is_available() and _kind(config) != "KIND_CPU" else "cpu"
    flat = _flat(inner, len(arguments), declared if keyed else None)
    program = _exported(flat, arguments, config, order, device, name)
    migrated_config, notes = _config(config, renamed, pt2_build)
    version = own.path.parent.name
    with staged_model(into, name) as staged:
        (staged.root / version).mkdir()
        package = staged.root / version / PT2_FILE
        step(f"[{name}] compiling with AOTInductor for {device} (tens of seconds, once per program)")
        try:
            packages.compile_package(program, package, what=name, say=step)
        except Exception as exc:  # the inductor compiler: a C++ error, a missing toolchain, an unsupported op
            msg = (
                f"AOTInductor could not compile the exported program: {type(exc).__name__}: {first_line(exc)}"
            )
            raise RefusedError(
                msg,
                "rerun with --debug for the compiler's output; the TorchScript folder keeps serving meanwhile.",
            ) from exc
        ref = _renamed_reference(original, renamed)
        add_warmup(migrated_config, staged, min(ref.cases, key=lambda c: c.batch_size))
        header = HEADER.format(source=own.path, how=how, torch=torch.__version__)
        staged.config.write_text(header + render_config(migrated_config), encoding="utf-8")
        reference.save(ref, staged)
        step(f"[{name}] holding the package to the TorchScript file on {len(ref.cases)} case(s)")
        held = _held(staged, migrated_config, ref)
        step(f"[{name}] validating the staged model folder")
        errors = [
            p
            for p in validate.validate_model(staged, gpu_available=True, pt2_build=pt2_build)
            if p.severity == "error"
        ]
        if errors:
            said = "; ".join(f"{p.field}: {p.message} [{p.rule}]" for p in errors)
            msg = f"the migrated folder breaks the PT2 path's rules: {said}"
            raise RefusedError(msg, "; ".join(p.fix for p in errors))
    step(f"[{name}] written to {into / name} in {time.perf_counter() - started:.1f} s")
    return Migrated(
        name=name,
        source=model.root,
        target=into / name,
        how=how,
        version=version,
        renamed=tuple(r for r in renamed if r.before != r.after),
        notes=tuple(notes),
        held=held,
        seconds=time.perf_counter() - started,
        original=original,
    )


def _kind(config: ModelConfig) -> str:
    kinds = {ModelInstanceGroup.Kind.Name(g.kind) for g in config.instance_group}
    return "KIND_CPU" if kinds == {"KIND_CPU"} else "KIND_AUTO"


def _refuse_what_pt2_cannot_take(config: ModelConfig) -> None:
    for tensor in (*config.input, *config.output):
        kind = config_type(tensor)
        if not dtypes.is_served(kind):
            msg = (
                f"{tensor.name} is {kind}: a PT2 package takes and returns tensors only, and torch.export has no "
                "strings."
            )
            raise RefusedError(
                msg,
                "keep this model on pytorch_libtorch, or move the string handling into a Python model in front "
                "of it (an ensemble) and migrate the tensor part.",
            )
    if config.HasField("sequence_batching"):
        msg = (
            "the config has sequence_batching, which the PT2 path refuses at load (`Sequence batching is not "
            "supported yet.`)."
        )
        raise RefusedError(
            msg,
            "keep this model on pytorch_libtorch until a release's PT2 path takes sequence batching.",
        )


_NODE = re.compile(r"failed for node (\S+)")
_REWRITE = {
    "prim::Loop": "a scripted loop: write it without a Python loop over tensor values (a fixed count unrolls; "
    "torch.export needs one graph), or",
    "prim::If": "a scripted branch the converter could not turn into torch.cond: write it with torch.cond, or",
}


def _converted(module: Any, arguments: tuple[torch.Tensor, ...], name: str) -> torch.nn.Module:  # noqa: ANN401
    """The TorchScript module as an ExportedProgram's module (torch's converter); :class:`RefusedError` naming the node
    it refused."""
    try:
        from torch._export.converter import TS2EPConverter  # noqa: PLC0415 - torch's private converter
    except ImportError as exc:
        msg = f"torch {torch.__version__} has no TorchScript converter (torch._export.converter: {exc})."
        raise RefusedError(
            msg,
            f"migrate with torch 2.8 to 2.15, or give the module: --model MODULE:ATTR --name {name}.",
        ) from exc
    try:
        # the converter warns once per unused buffer (every batch norm's num_batches_tracked): noise, not news
        with torch.no_grad(), warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=UserWarning, module=r"torch\._export\.converter")
            program = TS2EPConverter(module, arguments).convert()
    except Exception as exc:  # the converter raises RuntimeError, its own errors, or torch.export's
        node = _NODE.search(str(exc))
        what = f"node {node.group(1)}" if node else first_line(exc)
        construct = _REWRITE.get(node.group(1), "") if node else ""
        msg = f"torch's TorchScript converter refused {what} ({type(exc).__name__}: {first_line(exc)})."
        raise RefusedError(
            msg,
            f"{construct or 'rewrite what it names, or'} give the module itself: `--model MODULE:ATTR --name "
            f"{name}` re-exports it with torch.export instead of converting the file.",
        ) from exc
    converted: torch.nn.Module = program.module()
    return converted


def _module(factory: Callable[[], object], name: str) -> torch.nn.Module:
    """The module ``--model`` gives (a factory's module, or a ModelSpec's), in eval mode; ``RefusedError`` where the
    factory raises (the user's code: whatever it raises is theirs to fix)."""
    try:
        built = factory()
    except Exception as exc:
        msg = f"--model's factory raised {type(exc).__name__}: {first_line(exc)}"
        fix = (
            "call it yourself to see the traceback; it must take no arguments and return (torch.nn.Module, example "
            "inputs) or a tritonpt.spec.ModelSpec."
        )
        raise RefusedError(msg, fix) from exc
    return spec.coerce(built, name=name).module.eval()


class _Flat(torch.nn.Module):
    """The model returning its tensors as one flat tuple, in the order its TorchScript file returned them (a dict's
    in config order): the call spec's outputs are then ``OUTPUT__i`` by position, as the TorchScript backend
    picked them."""

    def __init__(self, inner: torch.nn.Module, keys: tuple[str, ...] | None) -> None:
        super().__init__()
        self.inner = inner
        self.keys = keys

    def run(self, arguments: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
        result = self.inner(*arguments)
        if isinstance(result, torch.Tensor):
            return (result,)
        if self.keys is not None:
            return tuple(in_process.keyed_outputs(dict(result), self.keys))
        return tuple(result)


def _flat(inner: torch.nn.Module, count: int, keys: tuple[str, ...] | None) -> torch.nn.Module:
    """:class:`_Flat` with a forward() of ``count`` named parameters (torch.export binds by signature)."""
    names = [f"x{i}" for i in range(count)]
    source = f"def forward(self, {', '.join(names)}):\n    return self.run(({', '.join(names)},))\n"
    namespace: dict[str, Any] = {}
    exec(source, namespace)  # noqa: S102 - generated parameter names x0..xN
    made: torch.nn.Module = type("Migrated", (_Flat,), {"forward": namespace["forward"]})(inner, keys)
    return made


def _exported(  # noqa: PLR0917 - what torch.export needs of the model and its config, in the order it uses them
    flat: torch.nn.Module,
    arguments: tuple[torch.Tensor, ...],
    config: ModelConfig,
    order: Sequence[int],
    device: str,
    name: str,
) -> torch.export.ExportedProgram:
    """torch.export of the flat module, the batch axis and every ``-1`` axis of the config dynamic."""
    dynamic = torch.export.Dim.DYNAMIC
    batching = config.max_batch_size > 1
    shapes = []
    for k in range(len(arguments)):
        tensor = config.input[order[k]]
        model_dims = list(tensor.reshape.shape) if tensor.HasField("reshape") else list(tensor.dims)
        axes: dict[int, Any] = {}
        if batching:
            axes[0] = dynamic
        offset = 1 if config.max_batch_size > 0 else 0
        axes.update({offset + i: dynamic for i, d in enumerate(model_dims) if d == -1})
        shapes.append(axes)
    flat = flat.to(device)
    example = tuple(a.to(device) for a in arguments)
    try:
        with torch.no_grad():
            return torch.export.export(flat, example, dynamic_shapes=tuple(shapes), strict=False)
    except Exception as exc:  # torch.export's own errors: a specialized axis, an op it cannot capture
        msg = (
            f"torch.export could not make one program of it with the config's batch and -1 axes dynamic "
            f"({type(exc).__name__}: {first_line(exc)})."
        )
        raise RefusedError(
            msg,
            f"a traced file can fix a length its trace saw: give the module itself (`--model MODULE:ATTR --name "
            f"{name}`), or fix the config's -1 dims to the lengths the file takes.",
        ) from exc


def _renamed(config: ModelConfig, order: Sequence[int], picks: Sequence[int]) -> list[Renamed]:
    """Every tensor's name before and after: an input ``INPUT__k`` for forward()'s argument ``k`` (the PT2 path takes
    no argument names), an output ``OUTPUT__i`` for the returned tensor ``i``; a name already so stays."""
    found = []
    for position, tensor in enumerate(config.input):
        found.append(Renamed(kind="input", before=tensor.name, after=f"INPUT__{list(order).index(position)}"))
    for tensor, pick in zip(config.output, picks, strict=True):
        found.append(Renamed(kind="output", before=tensor.name, after=f"OUTPUT__{pick}"))
    return found


def _config(
    original: ModelConfig, renamed: Sequence[Renamed], pt2_build: Pt2Build
) -> tuple[ModelConfig, list[str]]:
    """The original config as the PT2 path serves it: platform, file and names; what the chosen build does not
    serve right is left out, each said in a note."""
    config = ModelConfig()
    config.CopyFrom(original)
    config.platform = PT2_PLATFORM
    config.ClearField("backend")
    config.default_model_filename = PT2_FILE
    names = {(r.kind, r.before): r.after for r in renamed}
    for tensor in config.input:
        tensor.name = names["input", tensor.name]
    for tensor in config.output:
        tensor.name = names["output", tensor.name]
    notes = []
    if config.model_warmup:
        config.ClearField("model_warmup")
        notes.append("model_warmup: replaced by one sample of the reference data (its inputs are renamed)")
    if config.HasField("version_policy"):
        config.ClearField("version_policy")
        notes.append(
            "version_policy left out: the migrated folder holds one version, the one Triton served newest"
        )
    if pt2_build == "stock" and config.HasField("dynamic_batching"):
        config.ClearField("dynamic_batching")
        notes.append(
            "dynamic_batching left out: the stock r26.05 PT2 path returns the whole merged batch to every request "
            "(validator A005); Triton 26.07's notes state PT2 batching, and --pt2-build patched serves it"
        )
    if pt2_build == "stock" and config.parameters:
        notes.append(
            f"parameters {', '.join(sorted(config.parameters))} left out: the stock PT2 path never applies them "
            "(validator A007)"
        )
        config.ClearField("parameters")
    return config, notes


def _renamed_reference(original: reference.Reference, renamed: Sequence[Renamed]) -> reference.Reference:
    names = {(r.kind, r.before): r.after for r in renamed}
    return dataclasses.replace(
        original,
        provenance=dataclasses.replace(original.provenance, source=MIGRATED),
        inputs=tuple(dataclasses.replace(i, name=names["input", i.name]) for i in original.inputs),
        outputs=tuple(dataclasses.replace(o, name=names["output", o.name]) for o in original.outputs),
    )


def _held(staged: ModelDir, config: ModelConfig, ref: reference.Reference) -> tuple[Held, ...]:
    """The compiled package in-process on every case against the TorchScript file's outputs; :class:`RefusedError`
    where an output is beyond its tolerance."""
    try:
        own = in_process.OwnFile.load(staged, config)
        runs = [(case, own.run(case.inputs)) for case in ref.cases]
    except Exception as exc:  # the package's own error at load or on a case
        msg = f"the compiled package fails in-process: {type(exc).__name__}: {first_line(exc)}"
        raise RefusedError(
            msg,
            "rerun with --debug; or give the module itself with --model to re-export it.",
        ) from exc
    held = []
    for j, info in enumerate(ref.outputs):
        tolerance = info.cpu_tolerance
        worst_abs, worst_rel, ok, where = 0.0, 0.0, True, ""
        for case, outputs in runs:
            found = compare(info.name, np.asarray(outputs[j]), case.outputs[j], tolerance)
            worst_abs = max(worst_abs, found.max_abs_error)
            worst_rel = max(worst_rel, found.max_rel_error)
            if not found.ok and ok:
                ok, where = False, f"case {case.id}: {found.describe()}"
        held.append(
            Held(
                output=info.name,
                max_abs_error=worst_abs,
                max_rel_error=worst_rel,
                atol=tolerance.atol,
                rtol=tolerance.rtol,
                ok=ok,
            )
        )
        if not ok:
            msg = (
                f"the converted model disagrees with the TorchScript file beyond tolerance on {info.name} ({where}; "
                f"atol {tolerance.atol:g}, rtol {tolerance.rtol:g})."
            )
            raise RefusedError(
                msg,
                "give the module itself with --model MODULE:ATTR --name NAME to re-export it, or keep this model on "
                "pytorch_libtorch.",
            )
    return tuple(held)
