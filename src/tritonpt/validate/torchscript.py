"""Family M: the TorchScript file against its config, as pytorch_backend r25.10 (src/libtorch.cc) runs it.

The file is loaded with real torch and run on inputs shaped and typed as the config declares (another length on
every -1 axis) and on the reference inputs that fit the config; what it returns is held to what the backend
serves and to the outputs the config declares, mapped the way the backend maps them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from tritonclient.grpc.model_config_pb2 import ModelConfig

from tritonpt import dtypes, jit
from tritonpt.errors import first_line
from tritonpt.repository import ModelDir
from tritonpt.validate import feeds
from tritonpt.validate.rules import (
    Findings,
    all_indexed,
    check_output_shape,
    config_type,
    named_index,
    rule,
)

UNLOADABLE = rule(
    "M001",
    "a file torch.jit.load cannot read",
    why="Error: Triton refuses the model.",
    example="a 1/model.pt cut short in a copy, so torch.jit.load cannot read it",
)
INPUT_COUNT = rule(
    "M002",
    "fewer or more inputs than forward() takes",
    why="Error: Triton refuses the model (`configuration expects N inputs, model provides M`).",
    example="two inputs declared for a model whose forward(self, x) takes one",
)
INDEX_GAP = rule(
    "M003",
    "input indices with a gap (INPUT__0, INPUT__2)",
    why="Error: every inference fails; server 2.51.0 was seen to crash on it.",
    example=(
        "input [\n"
        '  { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 4 ] },\n'
        '  { name: "INPUT__2" data_type: TYPE_FP32 dims: [ 4 ] }\n'
        "]"
    ),
)
INPUT_NAMES = rule(
    "M004",
    "input names neither forward()'s arguments nor <name>__<index>",
    why="Warning: Triton serves the inputs by config order (silently swapped if the order is wrong).",
    example='input [ { name: "image" data_type: TYPE_FP32 dims: [ 4 ] } ]  # forward(self, x)',
)
STRING_INPUTS = rule(
    "M005",
    "TYPE_STRING inputs (the model is not run)",
    why="Warning: the model is not run here, so dims and outputs are unchecked.",
    example='input [ { name: "INPUT__0" data_type: TYPE_STRING dims: [ 1 ] } ]',
)
FAILS = rule(
    "M006",
    "dims or data types the model does not accept",
    why="Error: every inference fails. A -1 axis is checked too: the check sends another length on it.",
    example='input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 3 ] } ]  # the model takes 4 features',
)
CONTAINER = rule(
    "M007",
    "forward() returns what the backend does not serve (a list of tensors, a dict)",
    why=(
        "Error: every inference fails (`output must be of type Tensor or List[str], received "
        "List[Tensor]`); `invoke export` wraps such outputs into a tuple."
    ),
    example="a model whose forward() returns a list of tensors, a dict or a scalar",
)
OUTPUT_BEYOND = rule(
    "M008",
    "an output index beyond what forward() returns",
    why="Error: every inference fails.",
    example="OUTPUT__2 declared for a model whose forward() returns two tensors",
)
FEWER_OUTPUTS = rule(
    "M009",
    "fewer outputs declared than forward() returns",
    why="Warning: Triton serves the declared ones.",
    example="only OUTPUT__0 declared for a model whose forward() returns (logits, probs)",
)
OUTPUT_TYPE = rule(
    "M010",
    "an output data type other than the model's",
    why="Error: inference fails (`configuration expects datatype`).",
    example=(
        'output [ { name: "OUTPUT__0" data_type: TYPE_FP16 dims: [ 10 ] } ]  # the model returns float32'
    ),
)
OUTPUT_DIMS = rule(
    "M011",
    "output dims other than the model's",
    why="Error: Triton serves the model's shape, not the declared one.",
    example=(
        'output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 10 ] } ]  # the model returns 1000 per row'
    ),
)

SERVED = "a Tensor, a tuple of Tensors (or of List[str]), or a List[str]"


def check(model: ModelDir, config: ModelConfig, model_file: Path, findings: Findings) -> None:
    """Load the file and run it the way the backend would; every finding goes to ``findings``."""
    path = model.config
    try:
        module = jit.load(str(model_file))
    except jit.TorchScriptRefusedError:
        raise  # this torch reads no TorchScript at all: the file is not what is wrong
    except Exception as exc:  # torch raises RuntimeError, ValueError, zipfile errors, ... for a bad file
        findings.add(
            UNLOADABLE,
            "error",
            model_file,
            "model file",
            f"torch.jit.load cannot load it ({first_line(exc)}); the pytorch backend would fail the same way.",
            "re-export it with torch.jit.trace/script and torch.jit.save (`invoke export`); a state_dict or a "
            "torch.export file is not a TorchScript model (a PT2 package is model.pt2 with platform torch_aoti).",
        )
        return
    arguments = [a.name for a in module.forward.schema.arguments[1:]]
    names = [t.name for t in config.input]
    if len(names) != len(arguments):
        findings.add(
            INPUT_COUNT,
            "error",
            path,
            "input",
            f"{len(names)} input(s) declared, forward() takes {len(arguments)} ({', '.join(arguments)}); the "
            f"backend refuses to load it (`configuration expects {len(names)} inputs, model provides "
            f"{len(arguments)}`).",
            "declare one input per forward() argument.",
        )
        return
    order = _input_order(names, arguments, path, findings)
    if order is None:
        return
    if any(config_type(t) == "TYPE_STRING" for t in config.input):
        findings.add(
            STRING_INPUTS,
            "warning",
            path,
            "input",
            "TYPE_STRING inputs: the model was not run, so dims, data types and the output count are unchecked.",
            "check it by serving it (`nox -s integration -- --repository ...`).",
        )
        return
    for feed in feeds.feeds(model, config, findings):
        ordered = [torch.from_numpy(np.array(feed.arrays[i])) for i in order]
        try:
            with torch.inference_mode():
                result = module(*ordered)
        except Exception as exc:  # whatever the model raises is what the backend would report
            if not feed.synthesized:
                feeds.fails_on_reference(model, config, feed, first_line(exc), findings)
                continue
            findings.add(
                FAILS,
                "error",
                path,
                "input",
                f"the model fails on {feed.what} ({feed.shapes(config)}): {first_line(exc)}; Triton's inference "
                "would fail the same way.",
                "make input dims (-1 only where any length works) and data_type match what forward() expects "
                "(re-export to generate them).",
            )
            return
        if not check_outputs(model_file, path, config, result, findings):
            return


def _input_order(names: list[str], arguments: list[str], path: Path, findings: Findings) -> list[int] | None:
    """Which config input feeds each forward() argument, as the backend maps them; None after an error."""
    if all(n in arguments for n in names):
        return sorted(range(len(names)), key=lambda i: arguments.index(names[i]))
    if all_indexed(names):
        positions = [named_index(n) or 0 for n in names]
        if sorted(positions) != list(range(len(names))):
            findings.add(
                INDEX_GAP,
                "error",
                path,
                "input names",
                f"indices {sorted(positions)} are not 0..{len(names) - 1}; the backend indexes its input table by "
                "them, past its end: every inference fails (`Expected a value of type 'Tensor' ... found type "
                "'NoneType'`), and server 2.51.0 was seen to crash on it or on the next request.",
                "number inputs INPUT__0, INPUT__1, ... without gaps.",
            )
            return None
        return sorted(range(len(names)), key=lambda i: positions[i])
    findings.add(
        INPUT_NAMES,
        "warning",
        path,
        "input names",
        f"{names} follow neither forward()'s argument names {arguments} nor the <name>__<index> rule; the backend "
        "then feeds them to forward() in config order, which silently swaps inputs if that order is wrong.",
        f"name inputs {', '.join(f'INPUT__{i}' for i in range(len(arguments)))} or {', '.join(arguments)}.",
    )
    return list(range(len(names)))


def _served(result: object) -> tuple[object, ...] | str:
    """What forward() returned as the backend takes it apart, or the reason it refuses (its own words)."""
    if isinstance(result, torch.Tensor):
        return (result,)
    if isinstance(result, list) and all(isinstance(s, str) for s in result):
        return (result,)
    if isinstance(result, list):
        kinds = sorted({type(item).__name__ for item in result}) or ["nothing"]
        return f"output must be of type Tensor or List[str], received List[{'/'.join(kinds)}]"
    if isinstance(result, tuple):
        for index, item in enumerate(result):
            if not isinstance(item, torch.Tensor) and not (
                isinstance(item, list) and all(isinstance(s, str) for s in item)
            ):
                return f"output at index {index} must be of type Tensor or List[str], received {type(item).__name__}"
        return result
    return (
        "output must be of type Tensor, List[str] or Tuple containing one of these two types. It should not be a "
        f"List / Dictionary of Tensors or a Scalar (received {type(result).__name__})"
    )


def check_outputs(
    model_file: Path, path: Path, config: ModelConfig, result: object, findings: Findings
) -> bool:
    """Outputs as the backend maps them (by <name>__<index>, else by config order); False after an error."""
    outputs = _served(result)
    if isinstance(outputs, str):
        findings.add(
            CONTAINER,
            "error",
            model_file,
            "outputs",
            f"forward() returns {type(result).__name__}; the backend serves {SERVED} and fails every inference "
            f"on this one (`PyTorch execute failure: {outputs}`).",
            "return a tuple of tensors from forward() (`invoke export` wraps dicts, lists and ModelOutputs into one).",
        )
        return False
    declared = list(config.output)
    indexed = all_indexed(t.name for t in declared)
    positions = [(named_index(t.name) or 0) if indexed else j for j, t in enumerate(declared)]
    beyond = [t.name for t, k in zip(declared, positions, strict=True) if k >= len(outputs)]
    if beyond:
        findings.add(
            OUTPUT_BEYOND,
            "error",
            path,
            "output",
            f"{', '.join(beyond)} refer(s) to an output forward() does not return (it returns {len(outputs)}); "
            "every inference fails (`refers to an output index which doesn't exist`).",
            "declare one output per returned tensor, OUTPUT__0 ... in order.",
        )
        return False
    if len(declared) < len(outputs):
        findings.add(
            FEWER_OUTPUTS,
            "warning",
            path,
            "output",
            f"{len(declared)} output(s) declared, forward() returns {len(outputs)}; Triton serves the declared ones only.",
            "declare every returned tensor if clients need them (OUTPUT__0 ... in order).",
        )
    found = len(findings)
    batch = config.max_batch_size > 0
    for tensor, position in zip(declared, positions, strict=True):
        value = outputs[position]
        if not isinstance(value, torch.Tensor):
            continue  # a List[str]: TYPE_STRING, which the backend checks itself
        try:
            actual = dtypes.from_torch(value.dtype).config
        except ValueError:
            actual = str(value.dtype)
        if actual != config_type(tensor):
            findings.add(
                OUTPUT_TYPE,
                "error",
                path,
                f"output {tensor.name!r} data_type",
                f"{config_type(tensor)} is declared, the model returns {actual}; every inference fails "
                f"(`configuration expects datatype {config_type(tensor)} for output '{tensor.name}'`).",
                f"declare {actual}.",
            )
        shape = tuple(value.shape[1:]) if batch else tuple(value.shape)
        check_output_shape(findings, OUTPUT_DIMS, path, tensor, shape, batch=batch, what="the model")
    return not findings.errors_since(found)
