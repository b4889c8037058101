"""Triton's ``pytorch`` backend written in Python: a stand-in for ``libtriton_pytorch.so``.

What it is
    A Python-based backend. When ``<backend-directory>/pytorch/model.py`` exists and there is no
    ``libtriton_pytorch.so`` beside it, Triton (seen with 2.51.0) serves unchanged ``platform: "pytorch_libtorch"``
    models with this file through the Python backend's stub, one stub process per model instance. The server then
    reports ``"backend": "pytorch", "runtime": "model.py"`` for the model (the official backend reports
    ``libtriton_pytorch.so``), so a check can always tell which one served.

What it mirrors (pytorch_backend ``src/libtorch.cc``, r24.x; reference/triton.md sections 2.4 and 3)
    - ``torch.jit.load`` of ``<model folder>/<version>/<default_model_filename or model.pt>`` onto the instance's
      device (KIND_GPU -> ``cuda:<device_id>``, KIND_CPU -> ``cpu``, KIND_MODEL -> where the file put it), with
      the same load errors (``unable to find '<path>' for model instance '<m>'``, ``failed to load model ...``).
    - Input naming: all config inputs named after ``forward()`` arguments -> by name; ``<name>__<index>`` -> by
      index; otherwise strict config order (with the backend's warning when a ``__`` suffix is not a number).
      A single ``Dict(str, Tensor)`` argument takes the inputs by name. Outputs: ``__<index>`` or config order.
    - Load-time validation with the backend's own words: ``configuration expects N inputs, model provides M``,
      ``unsupported datatype TYPE_UINT32 for input 'INPUT0' for model '<m>'`` (BF16 and unsigned 16/32/64-bit
      types are refused), 1-D only ``TYPE_STRING`` (``List[str]``) I/O.
    - Batching: with ``max_batch_size > 0`` the requests Triton hands over in one ``execute`` call (the dynamic
      batcher's batch) are concatenated along axis 0, run as one ``forward`` and split back per request.
    - ``parameters``: INFERENCE_MODE (default true: ``torch.inference_mode``; ``torch.no_grad`` always),
      DISABLE_OPTIMIZED_EXECUTION, ENABLE_TENSOR_FUSER, ENABLE_JIT_PROFILING, ENABLE_JIT_EXECUTOR, DISABLE_CUDNN,
      ENABLE_CACHE_CLEANING, INTRA_OP_THREAD_COUNT, INTER_OP_THREAD_COUNT, each through the torch call the C++
      backend makes, with the same log lines (``Optimized execution is disabled for model instance '<m>'``).
    - Execution errors go back as per-request errors (``PyTorch execute failure: ...``,
      ``output '<n>' is a scalar which is not supported.``); the stub keeps serving.

What it cannot do
    - No libtorch ABI checks: it runs the torch of the Python environment that starts the stub, not the libtorch
      an NGC image bundles, so a TorchScript file that only that libtorch would refuse (or read differently)
      loads fine here. Only the official backend in the target image proves that.
    - Each instance is its own process: ENABLE_WEIGHT_SHARING has nothing to share (it is logged, no more), and
      the parameter log lines appear once per instance instead of once per model.
    - No ``batch_input`` / ``batch_output`` (ragged batching) and no sequence-batching implicit ``state``: such
      models fail to load with a message saying so.
    - Not a performance reference: each request crosses a process boundary (shared memory) and outputs are
      copied to host memory, so latency is higher than the C++ backend's.

It imports only the standard library, numpy, torch and ``triton_python_backend_utils``: it is copied as is into
images where tritonpt is not installed.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import torch
import triton_python_backend_utils as pb_utils

# libtorch_utils.cc ModelConfigDataTypeToTorchType: the only types the backend maps.
TORCH_TYPES: dict[str, torch.dtype] = {
    "TYPE_BOOL": torch.bool,
    "TYPE_UINT8": torch.uint8,
    "TYPE_INT8": torch.int8,
    "TYPE_INT16": torch.int16,
    "TYPE_INT32": torch.int32,
    "TYPE_INT64": torch.int64,
    "TYPE_FP16": torch.float16,
    "TYPE_FP32": torch.float32,
    "TYPE_FP64": torch.float64,
}
CONFIG_TYPES: dict[torch.dtype, str] = {dtype: name for name, dtype in TORCH_TYPES.items()}
# Only to name what a model returned in an error message; none of these can be served.
UNSERVED_TYPES: dict[torch.dtype, str] = {
    torch.bfloat16: "TYPE_BF16",
    torch.uint16: "TYPE_UINT16",
    torch.uint32: "TYPE_UINT32",
    torch.uint64: "TYPE_UINT64",
}
STRING = "TYPE_STRING"
DEFAULT_MODEL_FILENAME = "model.pt"
DELIMITER = "__"

FORWARD_ARGUMENT = "FORWARD_ARGUMENT"
NAMED_INDEX = "NAMED_INDEX"
STRICT_CONFIG_ORDERING = "STRICT_CONFIG_ORDERING"

# Sequence-batching controls the backend feeds to the model as inputs (each must be <name>__<index>).
BOOLEAN_CONTROLS = ("CONTROL_SEQUENCE_START", "CONTROL_SEQUENCE_END", "CONTROL_SEQUENCE_READY")
TYPED_CONTROLS = ("CONTROL_SEQUENCE_CORRID",)


class LoadError(Exception):
    """The model cannot be loaded; the message is the backend's own sentence."""


class RequestError(Exception):
    """One request (or one batch of requests) cannot be served; the message goes back to the client."""


# --- parameters (ModelState::ParseParameters and backend_common.cc ParseBoolValue / ParseIntValue) ---------------


def parse_bool(parameters: dict[str, Any], key: str) -> bool | None:
    """A boolean parameter, or ``None`` when absent; the spellings Triton's backend utilities accept."""
    if key not in parameters:
        return None
    value = str(parameters[key].get("string_value", ""))
    lowered = value.lower()
    if lowered in ("true", "on", "1"):
        return True
    if lowered in ("false", "off", "0"):
        return False
    msg = f"failed to convert '{value}' to boolean"
    raise LoadError(msg)


def parse_int(parameters: dict[str, Any], key: str) -> int | None:
    """An integer parameter, or ``None`` when absent; leading digits count, like ``std::stoi``."""
    if key not in parameters:
        return None
    value = str(parameters[key].get("string_value", ""))
    text = value.lstrip()
    sign = ""
    if text[:1] in ("+", "-"):
        sign, text = text[:1], text[1:]
    digits = ""
    for char in text:
        if not "0" <= char <= "9":
            break
        digits += char
    if not digits:
        msg = f"failed to convert '{value}' to integral number"
        raise LoadError(msg)
    return int(sign + digits)


class Settings:
    """The backend parameters of one model, parsed and logged the way the C++ backend does."""

    def __init__(self, config: dict[str, Any], model: str) -> None:
        self.optimized_execution = True
        self.inference_mode = True
        self.cudnn = True
        self.cache_cleaning = False
        self.weight_sharing = False
        self.tensor_fuser: bool | None = None
        self.jit_profiling: bool | None = None
        self.jit_executor: bool | None = None
        if "parameters" not in config:
            return
        params = config["parameters"] or {}
        where = f" for model instance '{model}'"

        def said(flag: bool) -> str:
            return "enabled" if flag else "disabled"

        self.optimized_execution = not parse_bool(params, "DISABLE_OPTIMIZED_EXECUTION")
        log_info(f"Optimized execution is {said(self.optimized_execution)}{where}")
        self.cache_cleaning = bool(parse_bool(params, "ENABLE_CACHE_CLEANING"))
        log_info(f"Cache Cleaning is {said(self.cache_cleaning)}{where}")
        inference_mode = parse_bool(params, "INFERENCE_MODE")
        self.inference_mode = True if inference_mode is None else inference_mode
        log_info(f"Inference Mode is {said(self.inference_mode)}{where}")
        self.cudnn = not parse_bool(params, "DISABLE_CUDNN")
        log_info(f"cuDNN is {said(self.cudnn)}{where}")
        self.tensor_fuser = parse_bool(params, "ENABLE_TENSOR_FUSER")
        if self.tensor_fuser is not None:
            log_info(f"Tensor fuser is {said(self.tensor_fuser)}{where}")
        weight_sharing = parse_bool(params, "ENABLE_WEIGHT_SHARING")
        if weight_sharing is not None:
            self.weight_sharing = weight_sharing
            log_info(f"Weight sharing is {said(weight_sharing)}{where}")
        self.jit_profiling = parse_bool(params, "ENABLE_JIT_PROFILING")
        if self.jit_profiling is not None:
            log_info(f"Jit profiling is {said(self.jit_profiling)}{where}")
        self.jit_executor = parse_bool(params, "ENABLE_JIT_EXECUTOR")
        if self.jit_executor is not None:
            log_info(f"Jit executor is {said(self.jit_executor)}{where}")
        # Thread counts are process-wide; each instance runs in its own stub process, so set them here.
        intra = parse_int(params, "INTRA_OP_THREAD_COUNT")
        if intra is not None and intra > 0:
            torch.set_num_threads(intra)
            log_info(f"Intra op thread count is set to {torch.get_num_threads()}{where}")
        inter = parse_int(params, "INTER_OP_THREAD_COUNT")
        if inter is not None and inter > 0:
            # Like the C++ backend: only the first call in a process can set it, later ones are ignored.
            with contextlib.suppress(RuntimeError):
                torch.set_num_interop_threads(inter)
            log_info(f"Inter op thread count is set to {torch.get_num_interop_threads()}{where}")

    def apply(self) -> None:
        """The process- and thread-wide torch switches the C++ backend sets before every forward."""
        torch._C._set_graph_executor_optimize(self.optimized_execution)
        if self.jit_profiling is not None:
            torch._C._jit_set_profiling_mode(self.jit_profiling)
        if self.jit_executor is not None:
            torch._C._jit_set_profiling_executor(self.jit_executor)
        if self.tensor_fuser is not None:
            torch._C._jit_set_texpr_fuser_enabled(self.tensor_fuser)
        torch.backends.cudnn.enabled = self.cudnn


def log_info(message: str) -> None:
    pb_utils.Logger.log_info(message)


def log_warn(message: str) -> None:
    pb_utils.Logger.log_warn(message)


# --- I/O naming (ModelInstanceState::GetNamingConvention / AddInputToMap / ValidateOutputs) --------------------


def all_digits(text: str) -> bool:
    """``std::isdigit`` over every character; an empty suffix passes, as in the C++ loop (``atoi("")`` is 0)."""
    return all("0" <= char <= "9" for char in text)


def suffix_index(name: str) -> int:
    suffix = name[name.find(DELIMITER) + len(DELIMITER) :]
    return int(suffix) if suffix else 0


def naming_convention(names: list[str], allowed: list[str], kind: str, model: str) -> str:
    """Which convention maps config names to forward positions; ``allowed`` is empty for outputs."""
    convention = NAMED_INDEX if kind == "output" else FORWARD_ARGUMENT
    if kind == "input" and any(name not in allowed for name in names):
        convention = NAMED_INDEX
    if convention != NAMED_INDEX:
        return convention
    for name in names:
        position = name.find(DELIMITER)
        if position == -1:
            return STRICT_CONFIG_ORDERING
        if not all_digits(name[position + len(DELIMITER) :]):
            if kind == "input":
                log_warn(
                    f"input '{name}' or previous input(s) are neither an input argument to the model '{model}' "
                    "nor do they follow the <name>__<index> naming convention. Falling back to enforcing "
                    "strict ordering from model configuration."
                )
            else:
                log_warn(
                    f"output '{name}' or previous output(s) of the model '{model}' do not follow the "
                    "<name>__<index> naming convention. Falling back to enforcing strict ordering from model "
                    "configuration."
                )
            return STRICT_CONFIG_ORDERING
    return NAMED_INDEX


def config_dims(io: dict[str, Any]) -> list[int]:
    reshape = io.get("reshape")
    if reshape and "shape" in reshape:
        return [int(d) for d in reshape["shape"]]
    return [int(d) for d in io.get("dims", [])]


class Io:
    """One configured input or output: its name, config data type and position in ``forward``."""

    def __init__(self, name: str, data_type: str, index: int | str) -> None:
        self.name = name
        self.data_type = data_type
        self.index = index  # a position, or the dict key for a Dict(str, Tensor) forward argument

    @property
    def is_string(self) -> bool:
        return self.data_type == STRING


def sequence_controls(config: dict[str, Any], model: str) -> list[tuple[str, str]]:
    """Sequence-batching control tensors (name, data type) that reach the model as extra inputs."""
    batching = config.get("sequence_batching")
    if not batching:
        return []
    if batching.get("state"):
        msg = (
            f"model '{model}' uses sequence batching with implicit state, which tritonpt's Python stand-in for "
            "the pytorch backend does not support; serve it with the official libtriton_pytorch.so."
        )
        raise LoadError(msg)
    controls: list[tuple[str, str]] = []
    for control_input in batching.get("control_input", []):
        name = control_input.get("name", "")
        for control in control_input.get("control", []):
            kind = control.get("kind", "")
            if kind in BOOLEAN_CONTROLS:
                if control.get("int32_false_true"):
                    data_type = "TYPE_INT32"
                elif control.get("fp32_false_true"):
                    data_type = "TYPE_FP32"
                else:
                    data_type = "TYPE_BOOL"
            elif kind in TYPED_CONTROLS:
                data_type = control.get("data_type", "")
            else:
                continue
            position = name.find(DELIMITER)
            if position == -1 or not all_digits(name[position + len(DELIMITER) :]):
                msg = f"input '{name}' does not follow <name>__<index> naming convention."
                raise LoadError(msg)
            if kind in TYPED_CONTROLS and data_type not in TORCH_TYPES:
                msg = f"input '{name}' type '{data_type}' is not supported by PyTorch."
                raise LoadError(msg)
            controls.append((name, data_type))
    return controls


def forward_arguments(module: torch.jit.ScriptModule) -> list[torch._C.Argument]:
    """The ``forward`` schema's arguments without ``self`` (a ClassType first argument)."""
    arguments = list(module._c._get_method("forward").schema.arguments)
    if arguments and arguments[0].type.kind() == "ClassType":
        arguments = arguments[1:]
    return arguments


def validate_inputs(
    config: dict[str, Any], module: torch.jit.ScriptModule, model: str, batching: bool
) -> tuple[list[Io], bool]:
    """The configured inputs mapped to forward positions, and whether forward takes one Dict(str, Tensor)."""
    inputs = config.get("input", [])
    if config.get("batch_input"):
        msg = (
            f"model '{model}' declares batch_input, which tritonpt's Python stand-in for the pytorch backend "
            "does not support; serve it with the official libtriton_pytorch.so."
        )
        raise LoadError(msg)
    controls = sequence_controls(config, model)
    expected = len(inputs) + len(controls)
    arguments = forward_arguments(module)
    is_dict = len(arguments) == 1 and arguments[0].type.kind() == "DictType"
    allowed: list[str] = []
    if not is_dict and arguments:
        if any(argument.type.kind() == "DictType" for argument in arguments[1:]):
            msg = (
                "Multiple inputs of kind DictType were detected. Only a single input of type Dict(str, Tensor) "
                "is supported."
            )
            raise LoadError(msg)
        for argument in arguments:
            if argument.type.kind() not in ("TensorType", "ListType"):
                msg = (
                    f"An input of type '{argument.type}' was detected in the model. Only a single input of type "
                    "Dict(str, Tensor) or input(s) of type Tensor are supported."
                )
                raise LoadError(msg)
            allowed.append(argument.name)
        if len(arguments) != expected:
            msg = (
                f"unable to load model '{model}', configuration expects {expected} inputs, model provides "
                f"{len(arguments)}"
            )
            raise LoadError(msg)
    if not inputs:
        msg = "model configuration must contain at least one input, none were specified."
        raise LoadError(msg)
    names = [str(io["name"]) for io in inputs]
    convention = STRICT_CONFIG_ORDERING if is_dict else naming_convention(names, allowed, "input", model)
    mapped: list[Io] = []
    for position, io in enumerate(inputs):
        name = str(io["name"])
        data_type = str(io.get("data_type", ""))
        index: int | str
        if is_dict:
            index = name
        elif convention == FORWARD_ARGUMENT:
            index = allowed.index(name)
        elif convention == NAMED_INDEX:
            index = suffix_index(name)
        else:
            index = position
        if data_type not in TORCH_TYPES and data_type != STRING:
            msg = f"unsupported datatype {data_type} for input '{name}' for model '{model}'"
            raise LoadError(msg)
        if data_type == STRING and len(config_dims(io)) + (1 if batching else 0) > 1:
            msg = (
                f"Triton only supports 1 dimensional List of String as input for '{name}' for model '{model}'"
            )
            raise LoadError(msg)
        mapped.append(Io(name, data_type, index))
    for name, data_type in controls:
        mapped.append(Io(name, data_type, name if is_dict else suffix_index(name)))
    return mapped, is_dict


def validate_outputs(config: dict[str, Any], model: str, batching: bool) -> list[Io]:
    """The configured outputs mapped to positions in what forward returns."""
    outputs = config.get("output", [])
    if config.get("batch_output"):
        msg = (
            f"model '{model}' declares batch_output, which tritonpt's Python stand-in for the pytorch backend "
            "does not support; serve it with the official libtriton_pytorch.so."
        )
        raise LoadError(msg)
    if not outputs:
        msg = "model configuration must contain at least one output, none were specified."
        raise LoadError(msg)
    names = [str(io["name"]) for io in outputs]
    convention = naming_convention(names, [], "output", model)
    mapped: list[Io] = []
    for position, io in enumerate(outputs):
        name = str(io["name"])
        data_type = str(io.get("data_type", ""))
        index = suffix_index(name) if convention == NAMED_INDEX else position
        if data_type not in TORCH_TYPES and data_type != STRING:
            msg = f"unsupported datatype {data_type} for output '{name}' for model '{model}'"
            raise LoadError(msg)
        if data_type == STRING and len(config_dims(io)) + (1 if batching else 0) > 1:
            msg = f"Triton only supports 1 dimensional List of String as output for '{name}' for model '{model}'"
            raise LoadError(msg)
        mapped.append(Io(name, data_type, index))
    return mapped


# --- tensors between Triton and torch ---------------------------------------------------------------------------


def to_torch(tensor: object, io: Io) -> torch.Tensor | list[str]:
    """A request's input as torch sees it: a CPU tensor, or a ``List[str]`` for TYPE_STRING."""
    if io.is_string:
        return [
            item.decode("utf-8") if isinstance(item, bytes) else str(item)
            for item in tensor.as_numpy().reshape(-1)
        ]
    if not tensor.is_cpu():
        return torch.utils.dlpack.from_dlpack(tensor.to_dlpack())
    array = tensor.as_numpy()
    return torch.from_numpy(array if array.flags.writeable else array.copy())


def to_numpy(value: torch.Tensor | list[str]) -> np.ndarray:
    if isinstance(value, list):
        return np.array([item.encode("utf-8") for item in value], dtype=np.object_)
    return value.detach().cpu().contiguous().numpy()


def type_name(value: object) -> str:
    if isinstance(value, torch.Tensor):
        return "Tensor"
    return type(value).__name__


def flatten_outputs(result: object) -> list[torch.Tensor | list[str]]:
    """Forward's result as the C++ backend accepts it: a Tensor, a List[str], or a tuple of those."""
    if isinstance(result, torch.Tensor):
        return [result]
    if isinstance(result, list):
        if not all(isinstance(item, str) for item in result):
            kinds = {type_name(item) for item in result if not isinstance(item, str)}
            msg = (
                f"PyTorch execute failure: output must be of type Tensor or List[str], received "
                f"List[{', '.join(sorted(kinds))}]"
            )
            raise RequestError(msg)
        return [result]
    if isinstance(result, tuple):
        flat: list[torch.Tensor | list[str]] = []
        for index, item in enumerate(result):
            if isinstance(item, list) and not all(isinstance(element, str) for element in item):
                kinds = {type_name(element) for element in item if not isinstance(element, str)}
                msg = (
                    f"PyTorch execute failure: output at index {index} must be of type Tensor or List[str], "
                    f"received List[{', '.join(sorted(kinds))}]"
                )
                raise RequestError(msg)
            if not isinstance(item, torch.Tensor | list):
                msg = f"PyTorch execute failure: expected Tensor but got {type_name(item)}"
                raise RequestError(msg)
            flat.append(item)
        return flat
    msg = (
        "PyTorch execute failure: output must be of type Tensor, List[str] or Tuple containing one of these two "
        "types. It should not be a List / Dictionary of Tensors or a Scalar"
    )
    raise RequestError(msg)


class Pending:
    """One request on its way through ``execute``: its inputs and its share of the batch."""

    def __init__(
        self, position: int, request: object, inputs: dict[str, torch.Tensor | list[str]], batch: int
    ) -> None:
        self.position = position
        self.request = request
        self.inputs = inputs
        self.batch = batch


# --- the model ----------------------------------------------------------------------------------------------------


class TritonPythonModel:
    """One instance of a TorchScript model, served the way ``libtriton_pytorch.so`` serves it."""

    @staticmethod
    def auto_complete_config(auto_complete_model_config: object) -> object:
        """The backend cannot auto-complete (TorchScript has no I/O metadata): say so and change nothing."""
        name = auto_complete_model_config.as_dict().get("name", "")
        log_warn(
            f"skipping model configuration auto-complete for '{name}': not supported for pytorch backend"
        )
        return auto_complete_model_config

    def initialize(self, args: dict[str, str]) -> None:
        try:
            self._initialize(args)
        except LoadError as exc:
            raise pb_utils.TritonModelException(str(exc)) from None

    def _initialize(self, args: dict[str, str]) -> None:
        config = json.loads(args["model_config"])
        self.model = args["model_name"]
        self.instance = args["model_instance_name"]
        self.kind = args["model_instance_kind"]
        self.max_batch_size = int(config.get("max_batch_size", 0))
        self.batching = self.max_batch_size > 0
        if self.kind == "GPU":
            self.device: torch.device | None = torch.device("cuda", int(args["model_instance_device_id"]))
        elif self.kind == "MODEL":
            self.device = None  # the model's own devices; inputs stay on the CPU
        else:
            self.device = torch.device("cpu")
        self.settings = Settings(config, self.model)
        path = Path(args["model_repository"]) / args["model_version"] / self._artifact(config)
        if not path.is_file():
            msg = f"unable to find '{path}' for model instance '{self.model}'"
            raise LoadError(msg)
        try:
            with torch.inference_mode(self.settings.inference_mode):
                self.module = torch.jit.load(str(path), map_location=self.device)
        except Exception as exc:  # any failure of torch.jit.load is the model's load error
            msg = f"failed to load model '{self.model}': {exc}"
            raise LoadError(msg) from None
        self.inputs, self.is_dict_input = validate_inputs(config, self.module, self.model, self.batching)
        self.outputs = validate_outputs(config, self.model, self.batching)
        self.input_device = self.device if self.device is not None else torch.device("cpu")

    def _artifact(self, config: dict[str, Any]) -> str:
        """``default_model_filename``, or the ``cc_model_filenames`` entry for this GPU's compute capability."""
        if self.device is not None and self.device.type == "cuda" and config.get("cc_model_filenames"):
            major, minor = torch.cuda.get_device_capability(self.device)
            chosen = config["cc_model_filenames"].get(f"{major}.{minor}")
            if chosen:
                return str(chosen)
        return str(config.get("default_model_filename") or DEFAULT_MODEL_FILENAME)

    def execute(self, requests: list[object]) -> list[object]:
        pb_utils.Logger.log_verbose(
            f"TRITONBACKEND_ModelExecute: Running {self.instance} with {len(requests)} requests"
        )
        responses: list[object] = [None] * len(requests)
        groups: dict[object, list[Pending]] = {}
        for position, request in enumerate(requests):
            try:
                pending = self._read(position, request)
            except Exception as exc:  # one bad request never takes the others, or the stub, down
                responses[position] = error_response(describe(exc))
                continue
            key: object = self._batch_key(pending) if self.batching else position
            groups.setdefault(key, []).append(pending)
        for members in groups.values():
            try:
                outputs = self._run(members)
            except Exception as exc:  # the batch's requests get the error; the stub keeps serving
                for member in members:
                    responses[member.position] = error_response(describe(exc))
                continue
            for member, tensors in zip(members, outputs, strict=True):
                responses[member.position] = pb_utils.InferenceResponse(output_tensors=tensors)
        if self.settings.cache_cleaning and self.input_device.type == "cuda":
            torch.cuda.empty_cache()
        return responses

    def _read(self, position: int, request: object) -> Pending:
        inputs: dict[str, torch.Tensor | list[str]] = {}
        for io in self.inputs:
            tensor = pb_utils.get_input_tensor_by_name(request, io.name)
            if tensor is None:
                msg = f"expected input '{io.name}' for model '{self.model}', the request lacks it"
                raise RequestError(msg)
            inputs[io.name] = to_torch(tensor, io)
        batch = 1
        if self.batching:
            first = inputs[self.inputs[0].name]
            batch = len(first) if isinstance(first, list) else int(first.shape[0]) if first.dim() else 1
        return Pending(position, request, inputs, batch)

    def _batch_key(self, pending: Pending) -> object:
        """Requests whose inputs agree except along axis 0 can share one forward."""
        key = []
        for io in self.inputs:
            value = pending.inputs[io.name]
            if isinstance(value, list):
                key.append((io.name, "list"))
            else:
                key.append((io.name, str(value.dtype), tuple(value.shape[1:])))
        return tuple(key)

    def _run(self, members: list[Pending]) -> list[list[Any]]:
        total = sum(member.batch for member in members)
        if self.batching and total != 1 and total > self.max_batch_size:
            msg = f"batch size {total} for '{self.instance}', max allowed is {self.max_batch_size}"
            raise RequestError(msg)
        feed: dict[str, torch.Tensor | list[str]] = {}
        for io in self.inputs:
            parts = [member.inputs[io.name] for member in members]
            if len(parts) == 1:
                joined = parts[0]
            elif io.is_string:
                joined = [item for part in parts for item in part]
            else:
                joined = torch.cat(parts)
            if isinstance(joined, torch.Tensor):
                joined = joined.to(self.input_device)
            feed[io.name] = joined
        results = self._forward(feed)
        for io in self.outputs:
            if not 0 <= int(io.index) < len(results):
                msg = (
                    f"The output {io.name} in the model configuration refers to an output index which doesn't "
                    f"exist. This model has {len(results)} outputs"
                )
                raise RequestError(msg)
        per_request: list[list[Any]] = [[] for _ in members]
        for io in self.outputs:
            value = results[int(io.index)]
            if isinstance(value, torch.Tensor):
                provided = CONFIG_TYPES.get(value.dtype) or UNSERVED_TYPES.get(value.dtype, "TYPE_INVALID")
                if provided != io.data_type:
                    msg = (
                        f"configuration expects datatype {io.data_type} for output '{io.name}', model provides "
                        f"{provided}"
                    )
                    raise RequestError(msg)
                if value.dim() == 0:
                    msg = f"output '{io.name}' is a scalar which is not supported."
                    raise RequestError(msg)
            for slot, piece in enumerate(self._split(io, value, members, total)):
                wanted = members[slot].request.requested_output_names()
                if not wanted or io.name in wanted:
                    per_request[slot].append(pb_utils.Tensor(io.name, to_numpy(piece)))
        return per_request

    def _forward(self, feed: dict[str, torch.Tensor | list[str]]) -> list[torch.Tensor | list[str]]:
        arguments: list[torch.Tensor | list[str] | None] = [None] * len(self.inputs)
        if not self.is_dict_input:
            for io in self.inputs:
                position = int(io.index)
                if not 0 <= position < len(arguments):
                    msg = (
                        f"PyTorch execute failure: input '{io.name}' maps to forward argument {position}, but "
                        f"the model takes {len(arguments)}"
                    )
                    raise RequestError(msg)
                arguments[position] = feed[io.name]
        try:
            self.settings.apply()
            with torch.inference_mode(self.settings.inference_mode), torch.no_grad():
                result = self.module(feed) if self.is_dict_input else self.module(*arguments)
        except Exception as exc:  # a failing forward is the request's error, never the stub's
            msg = f"PyTorch execute failure: {exc}"
            raise RequestError(msg) from None
        return flatten_outputs(result)

    def _split(
        self, io: Io, value: torch.Tensor | list[str], members: list[Pending], total: int
    ) -> list[torch.Tensor | list[str]]:
        """Each request's rows of a batched output (the whole output when there is one request)."""
        if len(members) == 1:
            return [value]
        rows = len(value) if isinstance(value, list) else int(value.shape[0])
        if rows != total:
            msg = (
                f"output '{io.name}' has {rows} entries along axis 0 for a batch of {total} requests' rows; with "
                "max_batch_size > 0 the model must keep axis 0 as the batch axis"
            )
            raise RequestError(msg)
        pieces: list[torch.Tensor | list[str]] = []
        start = 0
        for member in members:
            pieces.append(value[start : start + member.batch])
            start += member.batch
        return pieces

    def finalize(self) -> None:
        on_gpu = getattr(self, "input_device", torch.device("cpu")).type == "cuda"
        self.module = None
        if on_gpu:
            torch.cuda.empty_cache()


def describe(exc: Exception) -> str:
    """A request error's text: the backend's own sentence, or what went wrong unexpectedly here."""
    if isinstance(exc, RequestError):
        return str(exc)
    return f"PyTorch execute failure: {type(exc).__name__}: {exc}"


def error_response(message: str) -> object:
    return pb_utils.InferenceResponse(output_tensors=[], error=pb_utils.TritonError(message))
