"""Validation: every rule that Triton or its pytorch backend would otherwise fail on later, checked now.

``config.pbtxt`` is parsed with Triton's own ``model_config.proto``; the model file is loaded with real
torch and run on the reference inputs (or inputs built from the config), so dims, data types and output
count are checked against what the model really does. Each problem names the file, the field, what was
expected and the fix.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import numpy.typing as npt
import torch
from google.protobuf import text_format
from tritonclient.grpc.model_config_pb2 import (
    DataType,
    ModelConfig,
    ModelInput,
    ModelInstanceGroup,
    ModelOutput,
)

from tritonpt import dtypes, reference
from tritonpt.errors import first_line
from tritonpt.repository import CONFIG, MODEL_FILE, PLATFORM, ModelDir, models, parse_config

Severity = Literal["error", "warning"]

_INDEXED = re.compile(r"^.+__(\d+)$")
_FIELD = re.compile(r'has no field named "([^"]+)"')
_SYNTH_LENGTH = 4  # length used for a -1 axis when no reference input says better


@dataclass(frozen=True, kw_only=True)
class Problem:
    """One broken rule, in words a user can act on."""

    severity: Severity
    path: Path
    field: str
    message: str
    fix: str

    def render(self) -> str:
        label = "error" if self.severity == "error" else "warning"
        return f"{label}: {self.path}: {self.field}: {self.message}\n  fix: {self.fix}"


def validate_repository(repository: Path, *, gpu_available: bool | None = None) -> list[Problem]:
    """Validate every model folder in a repository."""
    if not repository.is_dir():
        return [
            Problem(
                severity="error",
                path=repository,
                field="repository",
                message="the model repository folder does not exist.",
                fix="export models into it first: `invoke export` (built-in set) or `invoke export --model MODULE:ATTR --name NAME`.",
            )
        ]
    folders = [p for p in sorted(repository.iterdir()) if p.is_dir() and not p.name.startswith(".")]
    problems: list[Problem] = []
    for folder in folders:
        if not (folder / CONFIG).exists():
            problems.append(
                Problem(
                    severity="error",
                    path=folder / CONFIG,
                    field="config.pbtxt",
                    message="this model folder has no config.pbtxt; the pytorch backend cannot auto-complete configs.",
                    fix="re-export the model (`invoke export`), or write a full config.pbtxt with inputs, outputs and max_batch_size.",
                )
            )
    if not folders:
        problems.append(
            Problem(
                severity="error",
                path=repository,
                field="repository",
                message="the model repository holds no models.",
                fix="export models into it first: `invoke export`.",
            )
        )
    for model in models(repository):
        problems += validate_model(model, gpu_available=gpu_available)
    return problems


class _Problems(list[Problem]):
    """The problems found so far in one model folder."""

    def add(self, severity: Severity, path: Path, field: str, message: str, fix: str) -> None:
        self.append(Problem(severity=severity, path=path, field=field, message=message, fix=fix))

    @property
    def failed(self) -> bool:
        return any(p.severity == "error" for p in self)


def validate_model(model: ModelDir, *, gpu_available: bool | None = None) -> list[Problem]:
    """Validate one model folder; returns its problems (empty when it is sound)."""
    problems = _Problems()
    add = problems.add

    config_path = model.config
    try:
        config = parse_config(config_path.read_text(encoding="utf-8"))
    except text_format.ParseError as exc:
        add(
            "error",
            config_path,
            _field_of(exc),
            f"Triton's model_config.proto rejects it: {exc}.",
            _parse_fix(exc),
        )
        return list(problems)

    _check_config(model, config, problems)
    if gpu_available is None:
        gpu_available = torch.cuda.is_available()
    for group in config.instance_group:
        if group.kind == ModelInstanceGroup.KIND_GPU and not gpu_available:
            add(
                "warning",
                config_path,
                "instance_group.kind",
                "KIND_GPU on a host without a usable GPU: Triton will refuse to load the model here "
                "(`has kind KIND_GPU but no GPUs are available`).",
                "use KIND_AUTO (GPU where there is one, CPU otherwise), or run on a GPU host.",
            )
    if problems.failed:
        return list(problems)

    versions = model.versions()
    if not versions:
        add(
            "error",
            model.root,
            "version folder",
            "no numeric version folder (e.g. 1/) inside the model folder; Triton finds no version to load.",
            f"put the TorchScript file at {model.root / '1' / MODEL_FILE} (re-export with `invoke export`).",
        )
        return list(problems)
    filename = config.default_model_filename or MODEL_FILE
    for version in versions:
        model_file = model.root / version / filename
        if not model_file.is_file():
            add(
                "error",
                model_file,
                "model file",
                f"version {version} has no {filename}; the pytorch backend fails with "
                f"`unable to find '{model_file}' for model instance`.",
                "re-export the model, or remove the empty version folder.",
            )
            continue
        _check_model_file(model, config, model_file, problems)
    if not reference.exists(model):
        add(
            "warning",
            model.reference_json,
            "reference data",
            "no reference.json/reference.npz: the parity checks have nothing to compare the served outputs with.",
            "re-export the model with `invoke export` to record eager PyTorch reference outputs.",
        )
    return problems


def _field_of(exc: text_format.ParseError) -> str:
    match = _FIELD.search(str(exc))
    return match.group(1) if match else "syntax"


def _parse_fix(exc: text_format.ParseError) -> str:
    match = _FIELD.search(str(exc))
    if not match:
        return "fix the text-format syntax at the line and column given (text format is `field: value`, blocks in `{}` or `[]`)."
    known = [f.name for f in ModelConfig.DESCRIPTOR.fields]
    close = difflib.get_close_matches(match.group(1), known, n=1)
    if close:
        return f"did you mean `{close[0]}`? Field names are those of model_config.proto's ModelConfig."
    return f"remove it; ModelConfig's fields are: {', '.join(sorted(known))}."


def _check_config(model: ModelDir, config: ModelConfig, problems: _Problems) -> None:
    add = problems.add
    path = model.config
    if config.name and config.name != model.name:
        add(
            "error",
            path,
            "name",
            f'"{config.name}" differs from the folder name "{model.name}"; Triton refuses to load the model.',
            f'set `name: "{model.name}"` or rename the folder to {config.name}.',
        )
    platform, backend = config.platform, config.backend
    if platform == "pytorch":
        add(
            "error",
            path,
            "platform",
            '"pytorch" is not a platform Triton knows; TorchScript models use "pytorch_libtorch".',
            'write `platform: "pytorch_libtorch"` (or `backend: "pytorch"`).',
        )
    elif platform not in ("", PLATFORM, "libtorch") or backend not in ("", "pytorch"):
        add(
            "error",
            path,
            "platform" if platform not in ("", PLATFORM, "libtorch") else "backend",
            f'platform "{platform}" / backend "{backend}" does not select the pytorch backend for a model.pt.',
            f'write `platform: "{PLATFORM}"`.',
        )
    elif not platform and not backend:
        add(
            "error",
            path,
            "platform",
            "neither platform nor backend is set; Triton has to guess from the file name.",
            f'write `platform: "{PLATFORM}"`.',
        )
    if config.max_batch_size < 0:
        add(
            "error",
            path,
            "max_batch_size",
            f"{config.max_batch_size} is negative.",
            "use 0 (no batching) or a positive size.",
        )
    if config.HasField("dynamic_batching") and config.max_batch_size == 0:
        add(
            "error",
            path,
            "dynamic_batching",
            "dynamic_batching with max_batch_size 0: without a batch axis there is nothing to batch, and Triton "
            "rejects the config.",
            "set max_batch_size to the largest batch the model accepts, or remove the dynamic_batching block.",
        )
    for kind, tensors in (("input", config.input), ("output", config.output)):
        if not tensors:
            add(
                "error",
                path,
                kind,
                f"no {kind}s are declared; the pytorch backend does not auto-complete configs.",
                f"declare every {kind} with name, data_type and dims (re-export to generate them).",
            )
        for tensor in tensors:
            type_name = _config_type(tensor)
            if type_name in dtypes.REJECTED_BY_BACKEND:
                add(
                    "error",
                    path,
                    f"{kind} {tensor.name!r} data_type",
                    f"{type_name} is rejected by the pytorch backend "
                    f"(`unsupported datatype {type_name} for {kind} '{tensor.name}'`).",
                    "cast in the model and declare TYPE_FP16/TYPE_FP32 (for BF16) or a signed integer type "
                    "(for UINT16/32/64).",
                )
            elif type_name != "TYPE_STRING":
                try:
                    dtypes.from_config(type_name)
                except ValueError:
                    add(
                        "error",
                        path,
                        f"{kind} {tensor.name!r} data_type",
                        f"{type_name} is not a tensor type the backend serves.",
                        "declare one of TYPE_BOOL, TYPE_UINT8, TYPE_INT8..TYPE_INT64, TYPE_FP16, TYPE_FP32, TYPE_FP64.",
                    )
            if any(d == 0 or d < -1 for d in tensor.dims):
                add(
                    "error",
                    path,
                    f"{kind} {tensor.name!r} dims",
                    f"{list(tensor.dims)} has a 0 or a negative size other than -1.",
                    "use positive sizes, and -1 for variable-length axes.",
                )
    outputs = [t.name for t in config.output]
    if outputs and not all(_INDEXED.match(n) for n in outputs):
        add(
            "error",
            path,
            "output names",
            f"{outputs} do not all follow the <name>__<index> rule; the backend then maps outputs by config order, "
            "which silently swaps them if the order is wrong.",
            "name outputs OUTPUT__0, OUTPUT__1, ... in the order forward() returns them.",
        )


def _config_type(tensor: ModelInput | ModelOutput) -> str:
    """The data type's enum name, e.g. ``TYPE_FP32``."""
    return str(DataType.Name(tensor.data_type))


def _check_model_file(model: ModelDir, config: ModelConfig, model_file: Path, problems: _Problems) -> None:
    add = problems.add
    path = model.config
    try:
        module = torch.jit.load(str(model_file), map_location="cpu").eval()
    except Exception as exc:
        first = first_line(exc)
        add(
            "error",
            model_file,
            "model file",
            f"torch.jit.load cannot load it ({first}); the pytorch backend would fail the same way.",
            "re-export it with torch.jit.trace/script and torch.jit.save (`invoke export`); a state_dict or a "
            "torch.export file is not a TorchScript model.",
        )
        return

    # Input names: all forward() arguments, or all <name>__<index>.
    arguments = [a.name for a in module.forward.schema.arguments[1:]]
    names = [t.name for t in config.input]
    by_argument = bool(names) and all(n in arguments for n in names)
    indexed = [_INDEXED.match(n) for n in names]
    if names and not by_argument and not all(indexed):
        add(
            "error",
            path,
            "input names",
            f"{names} follow neither forward()'s argument names {arguments} nor the <name>__<index> rule; the "
            "backend then falls back to config order, which silently swaps inputs if the order is wrong.",
            f"name inputs {', '.join(f'INPUT__{i}' for i in range(len(arguments)))} or {', '.join(arguments)}.",
        )
        return
    if len(names) != len(arguments):
        add(
            "error",
            path,
            "input",
            f"{len(names)} input(s) declared, forward() takes {len(arguments)} ({', '.join(arguments)}); the backend "
            f"fails with `configuration expects {len(names)} inputs, model provides {len(arguments)}`.",
            "declare one input per forward() argument.",
        )
        return
    if all(indexed) and not by_argument:
        order = sorted(range(len(names)), key=lambda i: int(indexed[i].group(1)))  # type: ignore[union-attr]
        positions = [int(indexed[i].group(1)) for i in order]  # type: ignore[union-attr]
        if positions != list(range(len(names))):
            add(
                "error",
                path,
                "input names",
                f"indices {positions} are not 0..{len(names) - 1}.",
                "number inputs INPUT__0, INPUT__1, ... without gaps.",
            )
            return
    else:
        order = sorted(range(len(names)), key=lambda i: arguments.index(names[i]))

    batch = config.max_batch_size > 0
    ref = reference.load(model) if reference.exists(model) else None
    if ref is not None:
        declared = {t.name: _config_type(t) for t in config.input}
        for info in ref.inputs:
            if info.name in declared and declared[info.name] != info.data_type:
                add(
                    "error",
                    path,
                    f"input {info.name!r} data_type",
                    f"{declared[info.name]} is declared, the model was exported with {info.data_type} inputs.",
                    f"declare {info.data_type}.",
                )
                return
        feeds = [[case.inputs[[i.name for i in ref.inputs].index(n)] for n in names] for case in ref.cases]
    elif any(_config_type(t) == "TYPE_STRING" for t in config.input):
        add(
            "warning",
            path,
            "input",
            "TYPE_STRING inputs and no reference data: the model was not run, so dims, data types and the output "
            "count are unchecked against it.",
            "export the model with `invoke export` so reference inputs exist, or check it by serving it.",
        )
        return
    else:
        feeds = [[_synthesize(t, batch) for t in config.input]]

    for feed in feeds:
        for tensor, array in zip(config.input, feed, strict=True):
            expected = _config_type(tensor)
            actual = dtypes.from_numpy(array.dtype).config
            if actual != expected:
                add(
                    "error",
                    path,
                    f"input {tensor.name!r} data_type",
                    f"{expected} is declared but the reference input is {actual}.",
                    f"declare {actual}, or re-export.",
                )
                return
            shape = array.shape[1:] if batch else array.shape
            if not _dims_match(tensor.dims, shape):
                add(
                    "error",
                    path,
                    f"input {tensor.name!r} dims",
                    f"{list(tensor.dims)} does not fit the model's input shape {list(shape)}"
                    f"{' (after the batch axis)' if batch else ''}.",
                    f"declare dims {list(shape)} (with -1 on variable-length axes).",
                )
                return
        ordered = [torch.from_numpy(np.array(feed[i])) for i in order]
        try:
            with torch.inference_mode():
                result = module(*ordered)
        except Exception as exc:
            first = first_line(exc)
            add(
                "error",
                path,
                "input",
                f"the model fails on inputs shaped and typed as the config declares: {first}",
                "make input dims and data_type match what forward() expects (re-export to generate them).",
            )
            return
        outputs = (
            (result,)
            if isinstance(result, torch.Tensor)
            else tuple(result)
            if isinstance(result, tuple | list)
            else None
        )
        if outputs is None or not all(isinstance(o, torch.Tensor) for o in outputs):
            add(
                "error",
                model_file,
                "outputs",
                f"forward() returns {type(result).__name__}; the backend serves a Tensor or a tuple of Tensors.",
                "return a tuple of tensors from forward().",
            )
            return
        if len(outputs) != len(config.output):
            add(
                "error",
                path,
                "output",
                f"{len(config.output)} output(s) declared, the model returns {len(outputs)}.",
                "declare one output per returned tensor, OUTPUT__0 ... in order.",
            )
            return
        found = len(problems)
        output_order = sorted(range(len(config.output)), key=lambda j: _index_of(config.output[j].name))
        for position, j in enumerate(output_order):
            tensor, value = config.output[j], outputs[position]
            try:
                actual = dtypes.from_torch(value.dtype).config
            except ValueError:
                actual = str(value.dtype)
            if actual != _config_type(tensor):
                add(
                    "error",
                    path,
                    f"output {tensor.name!r} data_type",
                    f"{_config_type(tensor)} is declared, the model returns {actual}.",
                    f"declare {actual}.",
                )
            shape = tuple(value.shape[1:]) if batch else tuple(value.shape)
            if not _dims_match(tensor.dims, shape):
                add(
                    "error",
                    path,
                    f"output {tensor.name!r} dims",
                    f"{list(tensor.dims)} is declared, the model returns shape {list(shape)}"
                    f"{' after the batch axis' if batch else ''}.",
                    f"declare dims {list(shape)} (with -1 on variable-length axes).",
                )
        if len(problems) > found:
            return  # one report per rule, not one per reference case


def _index_of(name: str) -> int:
    """The <index> of a ``<name>__<index>`` tensor name (checked to match before this is called)."""
    match = _INDEXED.match(name)
    return int(match.group(1)) if match else 0


def _dims_match(declared: Iterable[int], shape: tuple[int, ...]) -> bool:
    dims = list(declared)
    return len(dims) == len(shape) and all(d in (-1, s) for d, s in zip(dims, shape, strict=True))


def _synthesize(tensor: ModelInput, batch: bool) -> npt.NDArray[np.generic]:
    shape = [(_SYNTH_LENGTH if d == -1 else d) for d in tensor.dims]
    if batch:
        shape = [2, *shape]
    dtype = dtypes.from_config(_config_type(tensor))
    return np.zeros(shape, dtype=dtype.numpy)
