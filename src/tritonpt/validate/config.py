"""Family C: a parsed config against what Triton's core and the pytorch backend accept and how they serve it.

Each rule was read in the upstream sources (core r25.10, pytorch_backend r25.10) and is held against server
2.51.0 by the differential suite: an error where the server refuses or serves wrongly, at most a warning where
it serves correctly.
"""

from __future__ import annotations

import difflib
from pathlib import Path

from tritonclient.grpc.model_config_pb2 import ModelConfig, ModelInstanceGroup

from tritonpt import dtypes, spec
from tritonpt.options import Pt2Build
from tritonpt.repository import ENSEMBLE_PLATFORM, PLATFORM, PT2_PLATFORM, ModelDir, default_model_file
from tritonpt.validate.rules import Findings, all_indexed, config_type, named_index, reshape_refusal, rule

NAME = rule(
    "C001",
    "name differs from the model folder",
    why="Error: Triton refuses the model.",
    example='name: "classifier_v2"  # in model_repository/classifier/config.pbtxt',
)
PLATFORM_PYTORCH = rule(
    "C002",
    'platform "pytorch"',
    why="Error: Triton refuses the model.",
    example='platform: "pytorch"',
)
OTHER_BACKEND = rule(
    "C003",
    "a platform or backend that is not the pytorch backend's",
    why="Error: Triton refuses the model.",
    example='platform: "onnxruntime_onnx"  # beside 1/model.pt',
)
NO_PLATFORM = rule(
    "C004",
    "neither platform nor backend",
    why="Warning: Triton picks the pytorch backend from the file name `model.pt`.",
    example="a config.pbtxt with neither platform: nor backend:",
)
NEGATIVE_BATCH = rule(
    "C005",
    "max_batch_size negative",
    why="Error: Triton refuses the model.",
    example="max_batch_size: -1",
)
BATCHER_WITHOUT_BATCH = rule(
    "C006",
    "dynamic_batching with max_batch_size 0",
    why="Warning: Triton serves it; the batcher has nothing to combine.",
    example="max_batch_size: 0\ndynamic_batching { }",
)
PREFERRED_TOO_LARGE = rule(
    "C007",
    "preferred_batch_size above max_batch_size",
    why="Error: Triton refuses the model.",
    example="max_batch_size: 8\ndynamic_batching { preferred_batch_size: [ 4, 16 ] }",
)
NO_TENSORS = rule(
    "C008",
    "no inputs or no outputs declared",
    why="Error: Triton refuses the model (`must contain at least one output`).",
    example='input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 4 ] } ]\n# no output [ ... ]',
)
REJECTED_TYPE = rule(
    "C009",
    "TYPE_BF16 (TorchScript; torch_aoti: A013), TYPE_UINT16/32/64",
    why="Error: Triton refuses the model (`unsupported datatype`).",
    example='output [ { name: "OUTPUT__0" data_type: TYPE_BF16 dims: [ 4 ] } ]',
)
NOT_A_TENSOR_TYPE = rule(
    "C010",
    "a data type that is no tensor type the backend serves",
    why="Error: Triton refuses the model.",
    example=(
        'input [ { name: "INPUT__0" data_type: 99 dims: [ 4 ] } ]  # a number model_config.proto '
        "does not name"
    ),
)
BAD_DIMS = rule(
    "C011",
    "a dim of 0 or below -1",
    why="Error: Triton refuses the model.",
    example='input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 0, 4 ] } ]',
)
OUTPUT_NAMES = rule(
    "C012",
    "output names not <name>__<index>",
    why="Warning: Triton serves the outputs by config order (silently swapped if the order is wrong).",
    example=(
        "output [\n"
        '  { name: "logits" data_type: TYPE_FP32 dims: [ 10 ] },\n'
        '  { name: "probs" data_type: TYPE_FP32 dims: [ 10 ] }\n'
        "]"
    ),
)
OPTIONAL_INPUT = rule(
    "C013",
    "an input with optional: true",
    why="Error: Triton refuses the model (`the backend model doesn't support optional input`).",
    example='input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 4 ] optional: true } ]',
)
NO_LABELS = rule(
    "C014",
    "an output label_filename that is not a file",
    why="Error: Triton refuses the model (`failed to open text file`).",
    example=(
        'output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 10 ] label_filename: '
        '"labels.txt" } ]\n'
        "# no labels.txt beside config.pbtxt"
    ),
)
DECOUPLED = rule(
    "C015",
    "model_transaction_policy decoupled",
    why=(
        "Warning: Triton serves it over a gRPC stream only and refuses plain requests "
        "(`ModelInfer RPC doesn't support models with decoupled transaction policy`), so the "
        "parity checks cannot run."
    ),
    example="model_transaction_policy { decoupled: true }",
)
SEQUENCE_NAMES = rule(
    "C016",
    "sequence_batching with names not <name>__<index>",
    why=(
        "Error: Triton refuses the model (the backend's state check); with `<name>__<index>` "
        "names it serves a sequence request."
    ),
    example='sequence_batching { }\ninput [ { name: "features" data_type: TYPE_FP32 dims: [ 4 ] } ]',
)
BAD_BOOL = rule(
    "C017",
    "a boolean backend parameter that does not parse",
    why="Error: Triton refuses the model (`TRUE` and `1` parse, and are served).",
    example='parameters: { key: "INFERENCE_MODE" value: { string_value: "maybe" } }',
)
BAD_COUNT = rule(
    "C018",
    "a thread count that does not parse",
    why='Error: Triton refuses the model (`"1x"` and `"-1"` parse, and are served).',
    example='parameters: { key: "INTRA_OP_THREAD_COUNT" value: { string_value: "many" } }',
)
COUNT_BEYOND_INT = rule(
    "C019",
    "a thread count beyond a C++ int",
    why=(
        "Error: the server aborts at load (SIGABRT: `std::stoi` throws `out_of_range`, which the "
        "backend does not catch)."
    ),
    example='parameters: { key: "INTRA_OP_THREAD_COUNT" value: { string_value: "99999999999" } }',
)
UNKNOWN_PARAMETER = rule(
    "C020",
    "a parameter the backend does not read",
    why="Warning: the backend ignores it.",
    example='parameters: { key: "DISABLE_OPTIMIZED_EXECUTON" value: { string_value: "true" } }  # misspelt',
)
GPU_WITHOUT_GPU = rule(
    "C021",
    "KIND_GPU on a host without a GPU",
    why=(
        "Error: Triton refuses the model on this host (`invoke export` checks the model as for a GPU host)."
    ),
    example="instance_group [ { kind: KIND_GPU } ]  # on a host without a GPU",
)
NO_DIMS = rule(
    "C022",
    "an input or output without dims",
    why="Error: Triton refuses the model (`must specify 'dims'`), also for one value a sample.",
    example='max_batch_size: 8\noutput [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ ] } ]',
)
BAD_RESHAPE = rule(
    "C023",
    "a reshape that does not fit its dims",
    why="Error: Triton refuses the model (`has different size for dims and reshape`, and the like).",
    example='input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 4, 4 ] reshape: { shape: [ 15 ] } } ]',
)

PLATFORMS = frozenset({PLATFORM, "libtorch", PT2_PLATFORM})
"""What selects the pytorch backend: TorchScript's names, and torch_aoti for a PT2 package (r26.03 and later)."""


def check(
    model: ModelDir,
    config: ModelConfig,
    findings: Findings,
    *,
    gpu_available: bool,
    pt2_build: Pt2Build = "stock",
) -> None:
    """Every rule of this family, in the order the config is read; for an ensemble, those of Triton's core."""
    _identity(model, config, findings)
    _batching(model.config, config, findings)
    _tensors(model.config, config, findings)
    if config.platform == ENSEMBLE_PLATFORM:
        return
    _serving_fields(model, config, findings)
    if config.platform != PT2_PLATFORM:
        _parameters(model.config, config, findings, spec.KNOWN_PARAMETERS)
    elif pt2_build == "patched":  # the stock PT2 path never reads them (validate.pt2, A007)
        _parameters(model.config, config, findings, spec.PT2_PARAMETERS, path_name="the PT2 path")
    for group in config.instance_group:
        if group.kind == ModelInstanceGroup.KIND_GPU and not gpu_available:
            findings.add(
                GPU_WITHOUT_GPU,
                "error",
                model.config,
                "instance_group.kind",
                "KIND_GPU, and this host has no usable GPU: Triton refuses to load the model here "
                "(`has kind KIND_GPU but no GPUs are available`).",
                "use KIND_AUTO (GPU where there is one, CPU otherwise), or validate on the GPU host that serves it.",
            )


def _identity(model: ModelDir, config: ModelConfig, findings: Findings) -> None:
    path = model.config
    if config.name and config.name != model.name:
        findings.add(
            NAME,
            "error",
            path,
            "name",
            f'"{config.name}" differs from the folder name "{model.name}"; Triton refuses to load the model.',
            f'set `name: "{model.name}"` or rename the folder to {config.name}.',
        )
    platform, backend = config.platform, config.backend
    if platform == ENSEMBLE_PLATFORM:
        return  # core schedules it (validate.ensemble holds its steps)
    if platform == "pytorch":
        findings.add(
            PLATFORM_PYTORCH,
            "error",
            path,
            "platform",
            '"pytorch" is not a platform Triton knows; TorchScript models use "pytorch_libtorch".',
            'write `platform: "pytorch_libtorch"` (or `backend: "pytorch"`).',
        )
    elif platform not in ("", *PLATFORMS) or backend not in ("", "pytorch"):
        findings.add(
            OTHER_BACKEND,
            "error",
            path,
            "platform" if platform not in ("", *PLATFORMS) else "backend",
            f'platform "{platform}" / backend "{backend}" does not select the pytorch backend for a '
            f"{default_model_file(config)}.",
            f'write `platform: "{PLATFORM}"` (TorchScript) or `platform: "{PT2_PLATFORM}"` (a PT2 package).',
        )
    elif not platform and not backend:
        findings.add(
            NO_PLATFORM,
            "warning",
            path,
            "platform",
            "neither platform nor backend is set; Triton picks the pytorch backend from the file name "
            f"{default_model_file(config)} (seen with server 2.51.0), which a renamed file would break.",
            f'write `platform: "{PLATFORM}"` to make it explicit.',
        )


def _batching(path: Path, config: ModelConfig, findings: Findings) -> None:
    if config.max_batch_size < 0:
        findings.add(
            NEGATIVE_BATCH,
            "error",
            path,
            "max_batch_size",
            f"{config.max_batch_size} is negative; Triton refuses to load the model.",
            "use 0 (no batching) or a positive size.",
        )
    if config.HasField("dynamic_batching") and config.max_batch_size == 0:
        findings.add(
            BATCHER_WITHOUT_BATCH,
            "warning",
            path,
            "dynamic_batching",
            "dynamic_batching with max_batch_size 0 does nothing: without a batch axis there is nothing to combine "
            "(Triton 2.51.0 loads and serves the model regardless).",
            "set max_batch_size to the largest batch the model accepts, or remove the dynamic_batching block.",
        )
    too_large = [s for s in config.dynamic_batching.preferred_batch_size if s > config.max_batch_size > 0]
    if too_large:
        findings.add(
            PREFERRED_TOO_LARGE,
            "error",
            path,
            "dynamic_batching.preferred_batch_size",
            f"{too_large} exceed max_batch_size {config.max_batch_size}; Triton refuses to load the model.",
            f"keep every preferred_batch_size at or below {config.max_batch_size}.",
        )


def _tensors(path: Path, config: ModelConfig, findings: Findings) -> None:
    for kind, tensors in (("input", config.input), ("output", config.output)):
        if not tensors:
            findings.add(
                NO_TENSORS,
                "error",
                path,
                kind,
                f"no {kind}s are declared; the pytorch backend does not auto-complete configs.",
                f"declare every {kind} with name, data_type and dims (re-export to generate them).",
            )
        for tensor in tensors:
            type_name = config_type(tensor)
            if config.platform == ENSEMBLE_PLATFORM:
                pass  # its tensors' types are its steps' models' (their own configs are held to the backend)
            elif type_name in dtypes.rejected_by_backend(config.platform):
                findings.add(
                    REJECTED_TYPE,
                    "error",
                    path,
                    f"{kind} {tensor.name!r} data_type",
                    f"{type_name} is rejected by the pytorch backend "
                    f"(`unsupported datatype {type_name} for {kind} '{tensor.name}'`).",
                    "cast in the model and declare TYPE_FP16/TYPE_FP32 (for BF16) or a signed integer type "
                    "(for UINT16/32/64).",
                )
            elif type_name != "TYPE_STRING" and not dtypes.is_known(type_name):
                findings.add(
                    NOT_A_TENSOR_TYPE,
                    "error",
                    path,
                    f"{kind} {tensor.name!r} data_type",
                    f"{type_name} is not a tensor type the backend serves.",
                    "declare one of TYPE_BOOL, TYPE_UINT8, TYPE_INT8..TYPE_INT64, TYPE_FP16, TYPE_FP32, TYPE_FP64.",
                )
            if not tensor.dims:
                findings.add(
                    NO_DIMS,
                    "error",
                    path,
                    f"{kind} {tensor.name!r} dims",
                    "none are given; Triton refuses to load the model (`must specify 'dims'`), with max_batch_size "
                    "above 0 too, where the batch axis is not among them.",
                    "declare the axes after the batch axis; for one value a sample, dims: [ 1 ], with "
                    "reshape: { shape: [ ] } where the model's tensor is [batch] (the client sends and receives "
                    "[batch, 1]), or return it from the model as [batch, 1] (`.unsqueeze(-1)`).",
                )
            refusal = reshape_refusal(tensor, batching=config.max_batch_size > 0)
            if refusal:
                findings.add(
                    BAD_RESHAPE,
                    "error",
                    path,
                    f"{kind} {tensor.name!r} reshape",
                    f"shape {list(tensor.reshape.shape)} against dims {list(tensor.dims)}: Triton refuses to load the "
                    f"model (`{kind} '{tensor.name}' {refusal}`).",
                    "give reshape the shape the model takes or returns, with as many elements as dims (the same "
                    "elements between -1 axes, and a -1 for each -1 of dims); an empty shape only for dims [ 1 ] "
                    "and max_batch_size above 0.",
                )
            if any(d == 0 or d < -1 for d in tensor.dims):
                findings.add(
                    BAD_DIMS,
                    "error",
                    path,
                    f"{kind} {tensor.name!r} dims",
                    f"{list(tensor.dims)} has a 0 or a negative size other than -1; Triton refuses to load the model.",
                    "use positive sizes, and -1 for variable-length axes.",
                )
    outputs = [t.name for t in config.output]
    if outputs and config.platform not in (PT2_PLATFORM, ENSEMBLE_PLATFORM) and not all_indexed(outputs):
        findings.add(
            OUTPUT_NAMES,
            "warning",
            path,
            "output names",
            f"{outputs} do not all follow the <name>__<index> rule; the backend then maps outputs to what forward() "
            "returns by their order in the config, which silently swaps them if that order is wrong.",
            "name outputs OUTPUT__0, OUTPUT__1, ... in the order forward() returns them.",
        )


def _serving_fields(model: ModelDir, config: ModelConfig, findings: Findings) -> None:
    """Fields outside the tensors that server 2.51.0 and the pytorch backend refuse, or serve without answering."""
    path = model.config
    for tensor in config.input:
        if tensor.optional:
            findings.add(
                OPTIONAL_INPUT,
                "error",
                path,
                f"input {tensor.name!r} optional",
                "the pytorch backend does not support optional inputs; Triton refuses to load the model "
                f"(`'optional' is set to true for input '{tensor.name}' while the backend model doesn't support "
                "optional input`).",
                "remove `optional: true`: every input is sent with every request.",
            )
    for tensor in config.output:
        labels = model.root / tensor.label_filename.lstrip(
            "/"
        )  # Triton's JoinPath appends even an absolute name
        if tensor.label_filename and not labels.is_file():
            findings.add(
                NO_LABELS,
                "error",
                path,
                f"output {tensor.name!r} label_filename",
                f"{labels} is not a file; Triton refuses to load the model (`failed to open text file for read`).",
                "put the labels file (one label per line) beside config.pbtxt, or remove label_filename.",
            )
    if config.model_transaction_policy.decoupled:
        findings.add(
            DECOUPLED,
            "warning",
            path,
            "model_transaction_policy.decoupled",
            "Triton answers a decoupled model over gRPC streams only; it refuses plain gRPC inference requests "
            "(`ModelInfer RPC doesn't support models with decoupled transaction policy`), so this repository's "
            "parity checks, which send those, fail on it.",
            "set decoupled: false unless your clients stream (the pytorch backend sends one response per request).",
        )
    if config.HasField("sequence_batching") and config.platform != PT2_PLATFORM:
        names = [t.name for t in (*config.input, *config.output)]
        if not all_indexed(names):
            findings.add(
                SEQUENCE_NAMES,
                "error",
                path,
                "sequence_batching",
                f"with sequence_batching the backend wants every input and output named <name>__<index>, and "
                f"{[n for n in names if named_index(n) is None]} are not; Triton refuses to load the model "
                "(`is using sequence batching with state but not all inputs and outputs follow the <name>__<index> "
                "naming convention`).",
                "name inputs INPUT__0, INPUT__1, ... and outputs OUTPUT__0, OUTPUT__1, ..., or remove sequence_batching.",
            )


def _parameters(
    path: Path,
    config: ModelConfig,
    findings: Findings,
    known: frozenset[str],
    *,
    path_name: str = "the pytorch backend",
) -> None:
    """The backend parses its own parameters (``known``) at load and refuses values it cannot read; others it
    ignores. ``path_name`` says which of its paths reads them."""
    for key in sorted(config.parameters):
        value = config.parameters[key].string_value
        if key not in known:
            close = difflib.get_close_matches(key, sorted(known), n=1)
            findings.add(
                UNKNOWN_PARAMETER,
                "warning",
                path,
                f"parameters {key}",
                f"{path_name} does not read this parameter and ignores it.",
                f"did you mean {close[0]}?" if close else f"it reads {', '.join(sorted(known))}.",
            )
        elif key in spec.BOOL_PARAMETERS and spec.backend_flag(value) is None:
            findings.add(
                BAD_BOOL,
                "error",
                path,
                f"parameters {key}",
                f"{value!r} is not a boolean; {path_name} refuses to load the model "
                f"(`failed to convert '{value}' to boolean`).",
                'write "true" or "false" (on/off and 1/0 work too).',
            )
        elif key in spec.INT_PARAMETERS and spec.backend_count(value) is None:
            findings.add(
                BAD_COUNT,
                "error",
                path,
                f"parameters {key}",
                f"{value!r} is not a number; {path_name} refuses to load the model "
                f"(`failed to convert '{value}' to integral number`).",
                'write a thread count such as "2" (0 or less leaves torch\'s default).',
            )
        elif key in spec.INT_PARAMETERS and spec.backend_count(value) not in spec.STOI_RANGE:
            findings.add(
                COUNT_BEYOND_INT,
                "error",
                path,
                f"parameters {key}",
                f"{value!r} is more than a C++ int holds; std::stoi throws std::out_of_range, "
                + (
                    "which the PT2 path catches: it refuses to load the model."
                    if known is spec.PT2_PARAMETERS
                    else "which the pytorch backend does not catch, and the server aborts (SIGABRT) loading the "
                    "model, taking every other model down with it."
                ),
                'write a thread count such as "2" (0 or less leaves torch\'s default).',
            )
