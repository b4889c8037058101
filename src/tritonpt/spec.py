"""What a model is, before it is exported: the module, example inputs and how to serve it.

A user's model is a zero-argument callable returning ``(module, example_inputs)`` or a :class:`ModelSpec` (dynamic
axes, scripting, tolerances, batching, placement); :func:`coerce` turns either into a validated ``ModelSpec``.

Example inputs are a tuple (forward()'s positional arguments) or a mapping of argument names to tensors, as a
Hugging Face tokenizer returns them (``{"input_ids": ..., "attention_mask": ...}``): the model is then called
with those keywords, the inputs are named after them in forward()'s order, and the arguments not given keep
their defaults. A dynamic axis names its input by index or by name.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Literal

import torch
from tritonclient.grpc.model_config_pb2 import ModelConfig

from tritonpt import dtypes
from tritonpt.errors import HINT, SpecError
from tritonpt.options import InstanceKind

Method = Literal["trace", "script"]

# Backend parameters we write unless told otherwise (pytorch_backend r25.10 src/libtorch.cc, ModelState::ParseParameters):
# inference mode on (the backend's default, made explicit), and optimized execution off so that the
# profiling executor's fusion cannot change numbers after the first calls or stall the first requests.
DEFAULT_PARAMETERS: Mapping[str, str] = {
    "INFERENCE_MODE": "true",
    "DISABLE_OPTIMIZED_EXECUTION": "true",
}

# Parameters the pytorch backend reads (pytorch_backend r25.10 src/libtorch.cc, ModelState::ParseParameters):
# booleans through backend's ParseBoolValue (true/on/1, false/off/0, any case), counts through std::stoi.
BOOL_PARAMETERS: frozenset[str] = frozenset(
    {
        "DISABLE_OPTIMIZED_EXECUTION",
        "INFERENCE_MODE",
        "DISABLE_CUDNN",
        "ENABLE_TENSOR_FUSER",
        "ENABLE_JIT_PROFILING",
        "ENABLE_JIT_EXECUTOR",
        "ENABLE_WEIGHT_SHARING",
        "ENABLE_CACHE_CLEANING",
    }
)
INT_PARAMETERS: frozenset[str] = frozenset({"INTRA_OP_THREAD_COUNT", "INTER_OP_THREAD_COUNT"})
KNOWN_PARAMETERS: frozenset[str] = BOOL_PARAMETERS | INT_PARAMETERS
# What the PT2 path reads (pytorch_backend r26.05 src/pt2/model_state.cc, ParseParameters), with the same parsers:
# only in the patched build (the stock one reads none: docs/upstream/pt2-parameters.md).
PT2_PARAMETERS: frozenset[str] = frozenset(
    {
        "DISABLE_OPTIMIZED_EXECUTION",
        "INFERENCE_MODE",
        "DISABLE_CUDNN",
        "ENABLE_WEIGHT_SHARING",
        "ENABLE_CACHE_CLEANING",
        *INT_PARAMETERS,
    }
)
_STOI = re.compile(
    r"^[ \t\n\v\f\r]*([+-]?[0-9]+)"
)  # std::stoi: C blanks, a sign, ASCII digits (as repository._STOLL)


STOI_RANGE = range(-(2**31), 2**31)
"""What ``std::stoi`` returns (a C++ int). Beyond it, it throws ``std::out_of_range``, which the backend's
ParseIntValue does not catch: server 2.51.0 aborts (SIGABRT) loading the model (seen in the differential suite)."""


def backend_count(value: str) -> int | None:
    """A count parameter as the backend reads it (``std::stoi``: " 3x" is 3); ``None`` where it reads no
    number, which makes the backend refuse to load the model."""
    match = _STOI.match(value)
    return int(match.group(1)) if match else None


def backend_flag(value: str) -> bool | None:
    """A boolean parameter as the backend reads it (``ParseBoolValue``: true/on/1 or false/off/0, any case,
    no blanks); ``None`` where the backend refuses to load the model."""
    lowered = value.lower()
    return True if lowered in {"true", "on", "1"} else False if lowered in {"false", "off", "0"} else None


@dataclass(frozen=True, kw_only=True)
class BackendRun:
    """How the pytorch backend runs a model, read from its config's parameters. ``None``: torch's default.

    A value the backend cannot read (the model then fails to load; validate says so) reads as the default.
    """

    intra_op_threads: int | None = None  # at::set_num_threads, only when above 0
    inter_op_threads: int | None = None  # at::set_num_interop_threads (process-wide), only when above 0
    optimized: bool = True  # torch.jit optimized execution: DISABLE_OPTIMIZED_EXECUTION false, the default

    @classmethod
    def of(cls, config: ModelConfig) -> BackendRun:
        def value(key: str) -> str | None:
            return config.parameters[key].string_value if key in config.parameters else None

        def threads(key: str) -> int | None:
            count = backend_count(value(key) or "")
            return count if count is not None and 0 < count < STOI_RANGE.stop else None

        disabled = backend_flag(value("DISABLE_OPTIMIZED_EXECUTION") or "false")
        return cls(
            intra_op_threads=threads("INTRA_OP_THREAD_COUNT"),
            inter_op_threads=threads("INTER_OP_THREAD_COUNT"),
            optimized=not disabled,
        )


_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")


@dataclass(frozen=True, kw_only=True)
class Tolerance:
    """Elementwise bound ``|served - reference| <= atol + rtol * |reference|`` (numpy.allclose)."""

    atol: float
    rtol: float

    @classmethod
    def exact(cls) -> Tolerance:
        return cls(atol=0.0, rtol=0.0)


# Defaults per data type. CPU serving with the same torch build is bit-exact in practice; these bounds
# leave room for another libtorch build (the NGC 2.9.0a0 in the official backend) and thread counts.
DEFAULT_TOLERANCES: Mapping[str, Tolerance] = {
    "TYPE_FP16": Tolerance(atol=1e-2, rtol=1e-2),
    "TYPE_FP32": Tolerance(atol=1e-4, rtol=1e-4),
    "TYPE_FP64": Tolerance(atol=1e-10, rtol=1e-10),
}
# On a GPU, cuDNN picks other algorithms and TF32 is on for convolutions by default
# (torch.backends.cudnn.allow_tf32), so float32 results differ from CPU references by ~1e-3 relative.
GPU_TOLERANCES: Mapping[str, Tolerance] = {
    "TYPE_FP16": Tolerance(atol=5e-2, rtol=5e-2),
    "TYPE_FP32": Tolerance(atol=5e-3, rtol=5e-3),
    "TYPE_FP64": Tolerance(atol=1e-8, rtol=1e-8),
}


def tolerance_for(
    config_dtype: str, *, gpu: bool = False, overrides: Mapping[str, Tolerance] = {}
) -> Tolerance:
    """The tolerance for one output data type; integers and bool are always exact."""
    if dtypes.from_config(config_dtype).exact:
        return Tolerance.exact()
    if config_dtype in overrides:
        return overrides[config_dtype]
    return (GPU_TOLERANCES if gpu else DEFAULT_TOLERANCES)[config_dtype]


@dataclass(frozen=True, kw_only=True)
class ModelSpec:
    """A model ready to export.

    With ``max_batch_size > 0`` axis 0 of every example input (and output) is the batch axis and the
    config's ``dims`` leave it out. ``dynamic_axes`` maps an input (its index, or its name) to the axes
    (full-shape indices) whose length may vary: they become ``-1`` in the config.

    ``example_inputs`` may be a mapping of forward()'s argument names to tensors; :func:`coerce` turns it into
    the tuple, ``input_names`` in forward()'s order and ``keyword_inputs`` (the model is called with keywords).
    """

    name: str
    module: torch.nn.Module
    example_inputs: tuple[torch.Tensor, ...]
    method: Method = "trace"
    input_names: tuple[str, ...] | None = None
    keyword_inputs: bool = False  # forward() is called with input_names as keywords (the rest keep defaults)
    dynamic_axes: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    max_batch_size: int = 8
    dynamic_batching: bool = True
    instance_kind: InstanceKind = "KIND_AUTO"
    instance_count: int = 1
    parameters: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_PARAMETERS))
    tolerances: Mapping[str, Tolerance] = field(default_factory=dict)
    description: str = ""

    @property
    def batching(self) -> bool:
        return self.max_batch_size > 0

    def resolved_input_names(self) -> tuple[str, ...]:
        return self.input_names or tuple(f"INPUT__{i}" for i in range(len(self.example_inputs)))

    def reference_batch_sizes(self) -> tuple[int, ...]:
        """Batch sizes the reference data covers: 1 and the largest, or none without batching."""
        if not self.batching:
            return ()
        return tuple(sorted({1, self.max_batch_size}))


def coerce(
    value: object,
    *,
    name: str,
    method: Method | None = None,
    max_batch_size: int | None = None,
    dynamic_axes: Mapping[int | str, tuple[int, ...]] | None = None,
    instance_kind: InstanceKind | None = None,
    parameters: Mapping[str, str] | None = None,
) -> ModelSpec:
    """Turn what a model factory returned into a checked ``ModelSpec``; keyword options override it."""
    if isinstance(value, ModelSpec):
        spec = replace(value, name=name)
    elif isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], torch.nn.Module):
        module, inputs = value
        if isinstance(inputs, torch.Tensor):
            inputs = (inputs,)
        if isinstance(inputs, Mapping) and all(isinstance(t, torch.Tensor) for t in inputs.values()):
            spec = ModelSpec(name=name, module=module, example_inputs=inputs)  # type: ignore[arg-type]
        elif not isinstance(inputs, tuple | list) or not all(isinstance(t, torch.Tensor) for t in inputs):
            msg = (
                f"Model {name!r}: the factory returned {type(inputs).__name__} as example inputs; expected a "
                "tuple of torch.Tensor, e.g. `return model, (torch.randn(1, 3, 224, 224),)`, or a mapping of "
                'forward()\'s argument names to tensors, e.g. `{"input_ids": ids, "attention_mask": mask}`.'
            )
            raise SpecError(msg)
        else:
            spec = ModelSpec(name=name, module=module, example_inputs=tuple(inputs))
    else:
        msg = (
            f"Model {name!r}: the factory returned {type(value).__name__}; expected "
            "`(torch.nn.Module, tuple_of_example_tensors)` or a tritonpt.spec.ModelSpec."
        )
        raise SpecError(msg)
    overrides: dict[str, object] = {}
    if method is not None:
        overrides["method"] = method
    if max_batch_size is not None:
        overrides["max_batch_size"] = max_batch_size
    if dynamic_axes is not None:
        overrides["dynamic_axes"] = dict(dynamic_axes)
    if instance_kind is not None:
        overrides["instance_kind"] = instance_kind
    if parameters is not None:
        overrides["parameters"] = {**spec.parameters, **parameters}
    spec = named_inputs(replace(spec, **overrides))  # type: ignore[arg-type]
    check(spec)
    return spec


def _parameters(module: torch.nn.Module) -> tuple[list[str], bool]:
    """forward()'s argument names (self excluded), and whether it takes ``**kwargs`` as well."""
    try:
        parameters = list(inspect.signature(module.forward).parameters.values())
    except (TypeError, ValueError):  # a builtin or C++ forward: no signature to read
        return [], True
    named = [p.name for p in parameters if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    return named, any(p.kind is p.VAR_KEYWORD for p in parameters)


def named_inputs(spec: ModelSpec) -> ModelSpec:
    """Example inputs given as a mapping become a tuple in forward()'s order, named and passed as keywords; a
    dynamic axis given by an input's name gets its index. A spec without either comes back as it is."""
    where = f"Model {spec.name!r}"
    given: object = spec.example_inputs
    if isinstance(given, Mapping):
        if not all(isinstance(k, str) for k in given) or not all(
            isinstance(v, torch.Tensor) for v in given.values()
        ):
            msg = (
                f"{where}: example_inputs is a mapping, but not of argument names to tensors ({given!r:.80})."
            )
            raise SpecError(msg)
        named, takes_kwargs = _parameters(spec.module)
        unknown = [k for k in given if k not in named]
        if unknown and not takes_kwargs:
            msg = (
                f"{where}: the example inputs name {', '.join(map(repr, unknown))}, which forward() does not take "
                f"(it takes {', '.join(named)}). {HINT} name the inputs after forward()'s arguments."
            )
            raise SpecError(msg)
        order = sorted(
            given, key=lambda k: (named.index(k) if k in named else len(named), list(given).index(k))
        )
        spec = replace(
            spec,
            example_inputs=tuple(given[k] for k in order),
            input_names=tuple(order),
            keyword_inputs=True,
        )
    axes: object = spec.dynamic_axes
    if not isinstance(axes, Mapping) or not any(isinstance(k, str) for k in axes):
        return spec  # by index already (check() judges the rest)
    names = spec.resolved_input_names()
    by_index: dict[object, object] = {}
    for key, value in axes.items():
        if isinstance(key, str):
            if key not in names:
                msg = (
                    f"{where}: --dynamic-axis names the input {key!r}; the model's inputs are {', '.join(names)}."
                    f" {HINT} give the input's name or its index, e.g. --dynamic-axis {names[0]}:1."
                )
                raise SpecError(msg)
            key = names.index(key)  # noqa: PLW2901 - a name becomes its index
        known = by_index.get(key, ())
        by_index[key] = (
            tuple(sorted({*known, *value}))
            if isinstance(known, tuple) and isinstance(value, tuple)
            else value
        )
    return replace(spec, dynamic_axes=by_index)  # type: ignore[arg-type]


def forward_arguments(spec: ModelSpec) -> list[str]:
    """Which of forward()'s arguments the example inputs give (the rest keep their defaults)."""
    named, _ = _parameters(spec.module)
    given = set(spec.input_names or ()) if spec.keyword_inputs else set(named[: len(spec.example_inputs)])
    return [n for n in named if n not in given]


def _check_types(spec: ModelSpec, where: str) -> None:
    """A ModelSpec a factory built by hand holds what its annotations say, or nothing below can use it."""
    module: object = spec.module  # typed as a Module, but a factory's dataclass is not checked at run time
    if not isinstance(module, torch.nn.Module):
        msg = (
            f"{where}: module is a {type(module).__name__}; expected a torch.nn.Module. {HINT} wrap a plain "
            "function in an nn.Module whose forward() calls it."
        )
        raise SpecError(msg)
    inputs = spec.example_inputs
    if not isinstance(inputs, tuple) or not all(isinstance(t, torch.Tensor) for t in inputs):
        found = type(inputs).__name__ if not isinstance(inputs, tuple) else [type(t).__name__ for t in inputs]
        msg = (
            f"{where}: example_inputs is {found}; expected a tuple of torch.Tensor. {HINT} write e.g. "
            "`example_inputs=(torch.randn(1, 3, 224, 224),)`."
        )
        raise SpecError(msg)
    counts = {"max_batch_size": spec.max_batch_size, "instance_count": spec.instance_count}
    for field_name, value in counts.items():
        if not isinstance(value, int) or isinstance(value, bool):
            msg = f"{where}: {field_name} is {value!r}; expected an integer. {HINT} write e.g. `{field_name}=8`."
            raise SpecError(msg)
    names = spec.input_names
    if names is not None and (not isinstance(names, tuple) or not all(isinstance(n, str) for n in names)):
        msg = f'{where}: input_names is {names!r}; expected a tuple of strings (or None). {HINT} write e.g. `input_names=("x",)`.'
        raise SpecError(msg)
    axes = spec.dynamic_axes
    if not isinstance(axes, Mapping) or not all(
        isinstance(k, int) and isinstance(v, tuple) and all(isinstance(a, int) for a in v)
        for k, v in axes.items()
    ):
        msg = (
            f"{where}: dynamic_axes is {axes!r}; expected a mapping from input index to a tuple of axes. {HINT} "
            "write e.g. `dynamic_axes={0: (1,)}` for axis 1 of the first input."
        )
        raise SpecError(msg)


def _check_devices(module: torch.nn.Module, where: str) -> None:
    """Export runs the model on the CPU; weights elsewhere (a GPU, or the meta device's none) cannot run there."""
    for kind, named in (("parameter", module.named_parameters()), ("buffer", module.named_buffers())):
        for name, value in named:
            if value.device.type != "cpu":
                msg = (
                    f"{where}: the module's {kind} {name!r} is on device {value.device}; export runs the model on "
                    f"the CPU. {HINT} build the module on the CPU or move it with `module.cpu()` (a module on the "
                    "meta device has no weights: `module.to_empty(device='cpu')`, then load a state_dict)."
                )
                raise SpecError(msg)


def check(spec: ModelSpec) -> None:
    """Raise ``SpecError`` for a spec that cannot become a valid Triton model."""
    where = f"Model {spec.name!r}"
    if not _NAME.match(spec.name):
        msg = f"{where}: a model name may hold letters, digits, '_', '.' and '-' only (it names a folder)."
        raise SpecError(msg)
    _check_types(spec, where)
    if not spec.example_inputs:
        msg = f"{where}: no example inputs; give at least one tensor so the model can be traced and checked."
        raise SpecError(msg)
    if spec.method not in ("trace", "script"):
        msg = f"{where}: method must be 'trace' or 'script', not {spec.method!r}."
        raise SpecError(msg)
    if spec.max_batch_size < 0:
        msg = f"{where}: max_batch_size must be 0 (no batching) or positive, not {spec.max_batch_size}."
        raise SpecError(msg)
    for i, tensor in enumerate(spec.example_inputs):
        try:
            dtypes.from_torch(tensor.dtype)
        except ValueError as exc:
            msg = f"{where}, input {i}: {exc}"
            raise SpecError(msg) from None
        if spec.batching and tensor.dim() == 0:
            msg = (
                f"{where}, input {i}: a scalar example input cannot carry a batch axis; give it shape [1] "
                "or export with max_batch_size=0."
            )
            raise SpecError(msg)
        if spec.batching and tensor.dim() == 1:
            msg = (
                f"{where}, input {i}: shape {list(tensor.shape)} is one value a sample once its first axis is the "
                "batch axis, which leaves no dims after it, and Triton refuses a config without them (`must "
                f"specify 'dims'`, rule C022). {HINT} take it as [batch, 1] (an example of "
                f"shape [{tensor.shape[0]}, 1], and `.squeeze(-1)` in forward()), or export with max_batch_size=0."
            )
            raise SpecError(msg)
        if tensor.device.type != "cpu":
            msg = (
                f"{where}, input {i}: the example tensor is on device {tensor.device}; export runs the model on "
                f"the CPU (Triton moves inputs to the model's device itself). {HINT} create the example inputs "
                "on the CPU, or pass `tensor.cpu()`."
            )
            raise SpecError(msg)
        empty = [
            axis for axis, size in enumerate(tensor.shape) if size == 0 and not (spec.batching and axis == 0)
        ]
        if empty:
            msg = (
                f"{where}, input {i}: the example has shape {list(tensor.shape)}, with length 0 on axis "
                f"{empty[0]}; Triton refuses dims of 0. {HINT} give an example with at least one element on every "
                "axis, and mark axes whose length varies with --dynamic-axis."
            )
            raise SpecError(msg)
    _check_devices(spec.module, where)
    if spec.input_names is not None and len(spec.input_names) != len(spec.example_inputs):
        msg = f"{where}: {len(spec.input_names)} input names for {len(spec.example_inputs)} example inputs."
        raise SpecError(msg)
    bad_names = [n for n in spec.input_names or () if not _NAME.match(n)]
    if bad_names or len(set(spec.input_names or ())) != len(spec.input_names or ()):
        msg = (
            f"{where}: input names {list(spec.input_names or ())} must be distinct and hold letters, digits, "
            f"'_', '.' and '-' only (each names a config input and a warmup file). {HINT} use forward()'s "
            "argument names, or leave input_names out for INPUT__0, INPUT__1, ..."
        )
        raise SpecError(msg)
    for index, axes in spec.dynamic_axes.items():
        if not 0 <= index < len(spec.example_inputs):
            msg = f"{where}: dynamic_axes names input {index}, but the model has {len(spec.example_inputs)}."
            raise SpecError(msg)
        rank = spec.example_inputs[index].dim()
        for axis in axes:
            low = 1 if spec.batching else 0
            if not low <= axis < rank:
                msg = (
                    f"{where}: dynamic axis {axis} of input {index} is out of range; valid axes are "
                    f"{low}..{rank - 1} (axis 0 is the batch axis when max_batch_size > 0)."
                )
                raise SpecError(msg)
    unknown = set(spec.parameters) - KNOWN_PARAMETERS
    if unknown:
        msg = (
            f"{where}: unknown backend parameter(s) {', '.join(sorted(unknown))}; the pytorch backend reads "
            f"{', '.join(sorted(KNOWN_PARAMETERS))}."
        )
        raise SpecError(msg)
