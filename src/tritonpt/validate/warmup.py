"""Family W: ``model_warmup``. Triton runs each warmup sample before it calls the model ready; a sample it
cannot build fails the model's load."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from tritonclient.grpc.model_config_pb2 import ModelConfig, ModelInput, ModelWarmup

from tritonpt import dtypes
from tritonpt.repository import WARMUP, ModelDir
from tritonpt.validate.rules import Findings, config_type, dims_match, rule

MISSING_INPUT = rule(
    "W001",
    "a warmup that lacks an input the config declares",
    why="Error: Triton fails the warmup at load.",
    example=(
        'input [ { name: "INPUT__0" ... }, { name: "INPUT__1" ... } ]\n'
        'model_warmup [ { name: "w" batch_size: 1 inputs { key: "INPUT__0" value: { ... } } } ]'
    ),
)
UNKNOWN_INPUT = rule(
    "W002",
    "a warmup input the config does not declare",
    why="Error: Triton fails the warmup at load.",
    example=(
        'model_warmup [ { name: "w" batch_size: 1 inputs { key: "IMAGE" value: { ... } } } ]\n'
        "# the config declares no input IMAGE"
    ),
)
UNSIZED = rule(
    "W003",
    "a warmup input with -1 (or no) dims",
    why="Error: Triton fails the warmup at load.",
    example='inputs { key: "INPUT__0" value: { data_type: TYPE_FP32 dims: [ -1 ] zero_data: true } }',
)
OTHER_DIMS = rule(
    "W004",
    "a warmup input whose dims do not fit the input's",
    why="Error: Triton fails the warmup at load.",
    example=(
        'inputs { key: "INPUT__0" value: { data_type: TYPE_FP32 dims: [ 8 ] zero_data: true } }\n'
        "# the input declares dims: [ 4 ]"
    ),
)
OTHER_TYPE = rule(
    "W005",
    "a warmup input of another data type than the input's",
    why="Error: Triton fails the warmup at load.",
    example=(
        'inputs { key: "INPUT__0" value: { data_type: TYPE_INT64 dims: [ 4 ] zero_data: true } }\n'
        "# the input declares TYPE_FP32"
    ),
)
NO_SOURCE = rule(
    "W006",
    "a warmup input with no data source",
    why="Error: Triton fails the warmup at load.",
    example=(
        'inputs { key: "INPUT__0" value: { data_type: TYPE_FP32 dims: [ 4 ] } }\n'
        "# neither zero_data, random_data nor input_data_file"
    ),
)
NO_FILE = rule(
    "W007",
    "a warmup input_data_file that does not exist",
    why="Error: Triton fails the warmup at load.",
    example=(
        'inputs { key: "INPUT__0" value: { data_type: TYPE_FP32 dims: [ 4 ] input_data_file: '
        '"input0" } }\n'
        "# no warmup/input0 in the model folder"
    ),
)
SHORT_FILE = rule(
    "W008",
    "a warmup input_data_file shorter than its dims need",
    why="Error: Triton fails the warmup at load.",
    example=(
        'inputs { key: "INPUT__0" value: { data_type: TYPE_FP32 dims: [ 4 ] input_data_file: '
        '"input0" } }\n'
        "# warmup/input0 holds 8 bytes; 4 FP32 values need 16"
    ),
)
LONG_FILE = rule(
    "W009",
    "a warmup input_data_file longer than its dims need",
    why="Warning: Triton serves it (it reads the first bytes).",
    example=(
        'inputs { key: "INPUT__0" value: { data_type: TYPE_FP32 dims: [ 4 ] input_data_file: '
        '"input0" } }\n'
        "# warmup/input0 holds 32 bytes; 4 FP32 values need 16"
    ),
)

_REEXPORT = "re-export the model with `invoke export`"


def check(model: ModelDir, config: ModelConfig, findings: Findings) -> None:
    inputs = {t.name: t for t in config.input}
    for warmup in config.model_warmup:
        where = f"model_warmup {warmup.name!r}"
        missing = sorted(n for n, t in inputs.items() if n not in warmup.inputs and not t.optional)
        if missing:
            findings.add(
                MISSING_INPUT,
                "error",
                model.config,
                f"{where} inputs",
                f"lacks the input(s) {', '.join(missing)} the model requires; Triton fails the model's load at warmup.",
                f"give the warmup every input of the config, or {_REEXPORT}.",
            )
        for name in sorted(warmup.inputs):
            if name not in inputs:
                findings.add(
                    UNKNOWN_INPUT,
                    "error",
                    model.config,
                    f"{where} inputs {name!r}",
                    f"the config has no input {name!r}; Triton fails the model's load at warmup.",
                    f"name one of the config's inputs: {', '.join(sorted(inputs))}.",
                )
                continue
            _sample(
                model,
                config,
                inputs[name],
                warmup.inputs[name],
                where=f"{where} inputs {name!r}",
                findings=findings,
            )


def _sample(
    model: ModelDir,
    config: ModelConfig,
    declared: ModelInput,
    entry: ModelWarmup.Input,
    *,
    where: str,
    findings: Findings,
) -> None:
    """One input of one warmup sample: its dims, its data type, where its data comes from."""
    path = model.config
    if any(d < 1 for d in entry.dims):
        findings.add(
            UNSIZED,
            "error",
            path,
            f"{where} dims",
            f"{list(entry.dims)}: a warmup needs every size given; Triton fails the model's load at warmup.",
            f"give the sample's real sizes (no -1), or {_REEXPORT}.",
        )
        return
    if not dims_match(declared.dims, tuple(entry.dims)):
        findings.add(
            OTHER_DIMS,
            "error",
            path,
            f"{where} dims",
            f"{list(entry.dims)} does not fit the input's dims {list(declared.dims)}"
            + (" (without the batch axis)" if config.max_batch_size > 0 else "")
            + "; Triton fails the model's load at warmup (`unexpected shape`).",
            f"give the warmup the input's dims, or {_REEXPORT}.",
        )
    if entry.data_type != declared.data_type:
        findings.add(
            OTHER_TYPE,
            "error",
            path,
            f"{where} data_type",
            f"{config_type(entry)} differs from the input's {config_type(declared)}; Triton fails the model's "
            "load at warmup.",
            f"give the warmup the input's data type, or {_REEXPORT}.",
        )
    source = entry.WhichOneof("input_data_type")
    if source is None:
        findings.add(
            NO_SOURCE,
            "error",
            path,
            where,
            "says nowhere what data to send (zero_data, random_data or input_data_file); Triton fails the "
            "model's load at warmup.",
            f"name the file of the sample's raw bytes (input_data_file), or {_REEXPORT}.",
        )
    elif source == "input_data_file":
        _data_file(model.root / WARMUP / entry.input_data_file, entry, f"{where} input_data_file", findings)


def _data_file(data: Path, entry: ModelWarmup.Input, where: str, findings: Findings) -> None:
    if not data.is_file():
        findings.add(
            NO_FILE,
            "error",
            data,
            where,
            f"{data} does not exist; Triton fails the model's load at warmup.",
            f"put the raw input bytes there (row-major), or {_REEXPORT}.",
        )
        return
    if not dtypes.is_served(config_type(entry)):
        return  # the input's own data type check reports it
    wanted = math.prod(entry.dims) * np.dtype(dtypes.from_config(config_type(entry)).numpy).itemsize
    size = data.stat().st_size
    if size < wanted:
        findings.add(
            SHORT_FILE,
            "error",
            data,
            where,
            f"holds {size} bytes; dims {list(entry.dims)} of {config_type(entry)} need {wanted}; Triton fails "
            "the model's load at warmup.",
            f"write exactly the sample's raw bytes, or {_REEXPORT}.",
        )
    elif size > wanted:
        findings.add(
            LONG_FILE,
            "warning",
            data,
            where,
            f"holds {size} bytes; dims {list(entry.dims)} of {config_type(entry)} need {wanted}; Triton reads "
            "the first ones.",
            f"write exactly the sample's raw bytes, or {_REEXPORT}.",
        )
