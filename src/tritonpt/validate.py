"""Validation: every rule that Triton or its pytorch backend would otherwise fail on later, checked now.

``config.pbtxt`` is parsed with Triton's own ``model_config.proto``; the model file is loaded with real
torch and run on the reference inputs (or inputs built from the config), so dims, data types and output
count are checked against what the model really does. Each problem names the file, the field, what was
expected and the fix.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Iterable
from pathlib import Path

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
    ModelWarmup,
)

from tritonpt import dtypes, reference, spec
from tritonpt.errors import Problem, ReferenceDataError, Severity, ValidationError, first_line
from tritonpt.repository import (
    CONFIG,
    MODEL_FILE,
    PLATFORM,
    WARMUP,
    ModelDir,
    config_text,
    models,
    parse_config,
    read_config,
    versions_to_load,
    zero_padded,
)

_INDEXED = re.compile(r"^.+__(\d+)$")
_FIELD = re.compile(r'has no field named "([^"]+)"')
_SYNTH_LENGTH = 5  # length sent on a -1 axis: any length must work there
_SYNTHESIZED = "inputs shaped and typed as the config declares"
_SYNTH_MAX_ELEMENTS = 2**28  # 1 GiB of float32: far beyond any model's input, well below what numpy refuses

Array = npt.NDArray[np.generic]


def validate_repository(repository: Path, *, gpu_available: bool | None = None) -> list[Problem]:
    """Validate every model folder in a repository."""
    if not repository.is_dir():
        return [
            Problem(
                severity="error",
                path=repository,
                field="repository",
                message="the model repository folder does not exist."
                if not repository.exists()
                else "this is a file, not a model repository folder.",
                fix="export models into it first: `invoke export` (built-in set) or `invoke export --model MODULE:ATTR --name NAME`.",
            )
        ]
    try:
        folders = [p for p in sorted(repository.iterdir()) if p.is_dir() and not p.name.startswith(".")]
    except OSError as exc:
        return [
            Problem(
                severity="error",
                path=repository,
                field="repository",
                message=f"the folder cannot be listed ({first_line(exc)}); Triton could not read it either.",
                fix="make the folder readable by the user that runs validate and Triton.",
            )
        ]
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
    problems += process_wide_problems(models(repository))
    return problems


def _inter_op_threads(model: ModelDir) -> int:
    """The INTER_OP_THREAD_COUNT a model's config sets (0 when none, or when it does not parse)."""
    if not model.config.is_file():  # a FIFO would block the read forever; validate_model reports it
        return 0
    try:
        config = read_config(model.config)
    except (OSError, text_format.ParseError):
        return 0
    return spec.BackendRun.of(config).inter_op_threads or 0


def refuse_staged(staged: ModelDir, final: Path, problems: Iterable[Problem]) -> None:
    """Raise :class:`ValidationError` for the errors among ``problems``, found on a staged copy of ``final``:
    named where the folder was going (the staging folder is gone by the time anyone reads them), and saying
    that nothing was written. Warnings alone raise nothing."""
    errors = [p.moved(staged.root, final) for p in problems if p.severity == "error"]
    if errors:
        before = "is as it was" if final.exists() else "was not created"
        raise ValidationError(errors, outcome=f"Nothing was written: {final} {before}.")


def process_wide_problems(held: Iterable[ModelDir]) -> list[Problem]:
    """What one model's config does to the others in the same server.

    The backend hands INTER_OP_THREAD_COUNT to ``at::set_num_interop_threads``, which libtorch lets a process
    call once, before any parallel work: seen with server 2.51.0, a second model that sets it aborts the whole
    server at load (SIGABRT, ``cannot set number of interop threads after parallel work has started or
    set_num_interop_threads called``).
    """
    held = list(held)
    setting = [m for m in held if _inter_op_threads(m) > 0]
    if len(setting) > 1:
        return [
            Problem(
                severity="error",
                path=m.config,
                field="parameters INTER_OP_THREAD_COUNT",
                message=f"{len(setting)} models of this repository set it ({', '.join(x.name for x in setting)}); "
                "libtorch takes it once per process, and Triton's server aborts (SIGABRT) loading the second.",
                fix="set it in one model at most (it applies to the whole server), or serve those models apart.",
            )
            for m in setting
        ]
    if setting and len(held) > 1:
        return [
            Problem(
                severity="warning",
                path=setting[0].config,
                field="parameters INTER_OP_THREAD_COUNT",
                message="it applies to the whole server, not this model, and libtorch accepts it only before any "
                "parallel work: if another model of the repository computes first (a warmup), the server aborts.",
                fix="serve this model in a server of its own, or leave the parameter out.",
            )
        ]
    return []


class _Problems(list[Problem]):
    """The problems found so far in one model folder."""

    def add(self, severity: Severity, path: Path, field: str, message: str, fix: str) -> None:
        problem = Problem(severity=severity, path=path, field=field, message=message, fix=fix)
        if problem not in self:  # the same finding on several inputs is one problem
            self.append(problem)

    @property
    def failed(self) -> bool:
        return any(p.severity == "error" for p in self)


def validate_model(model: ModelDir, *, gpu_available: bool | None = None) -> list[Problem]:
    """Validate one model folder; returns its problems (empty when it is sound).

    ``gpu_available`` is whether the server that will load it has a GPU (default: this host has one).
    """
    problems = _Problems()
    add = problems.add

    config_path = model.config
    text = _read_config(config_path, problems)
    if text is None:
        return list(problems)
    try:
        config = parse_config(text)
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
                "error",
                config_path,
                "instance_group.kind",
                "KIND_GPU, and this host has no usable GPU: Triton refuses to load the model here "
                "(`has kind KIND_GPU but no GPUs are available`).",
                "use KIND_AUTO (GPU where there is one, CPU otherwise), or validate on the GPU host that serves it.",
            )
    if problems.failed:
        return list(problems)

    try:
        counted = model.version_folders()
        ignored = sorted(
            p.name for p in model.root.iterdir() if p.is_dir() and zero_padded(p.name) and p.name.isdecimal()
        )
    except OSError as exc:
        add(
            "error",
            model.root,
            "version folder",
            f"the model folder cannot be listed ({first_line(exc)}); Triton finds no version to load.",
            "make the folder readable by the user that runs validate and Triton.",
        )
        return list(problems)
    for name in ignored:
        add(
            "warning",
            model.root / name,
            "version folder",
            f"Triton skips version folders whose name starts with 0 ({name!r}), so it never loads this one.",
            f"name it {str(int(name))!r}.",
        )
    if not counted:
        add(
            "error",
            model.root,
            "version folder",
            "no numeric version folder (e.g. 1/) inside the model folder; Triton finds no version to load.",
            f"put the TorchScript file at {model.root / '1' / MODEL_FILE} (re-export with `invoke export`).",
        )
        return list(problems)
    beyond = [name for name, number in counted.items() if not -(2**63) <= number < 2**63]
    for name in beyond:
        add(
            "error",
            model.root / name,
            "version folder",
            "the number in this folder's name is more than a 64-bit integer holds; std::stoll throws "
            "std::out_of_range, which Triton's version scan does not catch, and server 2.51.0 aborts (SIGABRT) "
            "while it reads the model folder, taking every other model down with it.",
            "rename or remove the folder (versions are small numbers: 1/, 2/, ...).",
        )
    if beyond:
        return list(problems)
    numbers = sorted(set(counted.values()))
    existing = ", ".join(map(str, numbers))
    policy, loaded = versions_to_load(config, numbers)
    missing = [v for v in config.version_policy.specific.versions if v not in numbers]
    if missing and loaded:
        add(
            "warning",
            config_path,
            "version_policy",
            f"version_policy asks for version(s) {', '.join(map(str, missing))}, which the model folder does not "
            f"have; Triton loads {', '.join(map(str, sorted(loaded)))} and logs an error for the rest "
            "(`the version directory is not present`).",
            f"list only versions that exist ({existing}).",
        )
    elif missing:
        add(
            "error",
            config_path,
            "version_policy",
            f"version_policy asks for version(s) {', '.join(map(str, missing))}, but the model folder has only "
            f"{existing}; Triton loads no version and the model never becomes ready.",
            f"list versions that exist ({existing}), or remove the version_policy block.",
        )
        return list(problems)
    if not loaded:
        add(
            "error",
            config_path,
            "version_policy",
            f"{policy} selects no version of {existing}; Triton refuses the model "
            "(`at least one version must be available under the version policy`).",
            "ask for at least one version (latest { num_versions: 1 }), or remove the version_policy block.",
        )
        return list(problems)
    filename = config.default_model_filename or MODEL_FILE
    for version in sorted(loaded):
        # Triton reads version v from <model>/<v>/, whatever name it counted v from; its JoinPath appends even
        # an absolute file name to that folder, so the file is always inside it.
        model_file = model.root / str(version) / filename.lstrip("/")
        if not model_file.is_file():
            named = [n for n, v in counted.items() if v == version and n != str(version)]
            counted_from = (
                f" (Triton counts folder {named[0]!r} as version {version}, then reads {version}/)"
                if named
                else ""
            )
            add(
                "error",
                model_file,
                "model file",
                f"version {version} has no {filename}{counted_from}; the pytorch backend fails with "
                f"`unable to find '{model_file}' for model instance`.",
                f"name the version folder {str(version)!r} and put {filename} in it (re-export with "
                "`invoke export`), or remove the folder."
                if named
                else "re-export the model, or remove the empty version folder.",
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
            "warning",
            path,
            "platform",
            "neither platform nor backend is set; Triton picks the pytorch backend from the file name "
            f"{config.default_model_filename or MODEL_FILE} (seen with server 2.51.0), which a renamed file would break.",
            f'write `platform: "{PLATFORM}"` to make it explicit.',
        )
    if config.max_batch_size < 0:
        add(
            "error",
            path,
            "max_batch_size",
            f"{config.max_batch_size} is negative; Triton refuses to load the model.",
            "use 0 (no batching) or a positive size.",
        )
    if config.HasField("dynamic_batching") and config.max_batch_size == 0:
        add(
            "warning",
            path,
            "dynamic_batching",
            "dynamic_batching with max_batch_size 0 does nothing: without a batch axis there is nothing to combine "
            "(Triton 2.51.0 loads and serves the model regardless).",
            "set max_batch_size to the largest batch the model accepts, or remove the dynamic_batching block.",
        )
    too_large = [s for s in config.dynamic_batching.preferred_batch_size if s > config.max_batch_size > 0]
    if too_large:
        add(
            "error",
            path,
            "dynamic_batching.preferred_batch_size",
            f"{too_large} exceed max_batch_size {config.max_batch_size}; Triton refuses to load the model.",
            f"keep every preferred_batch_size at or below {config.max_batch_size}.",
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
                    f"{list(tensor.dims)} has a 0 or a negative size other than -1; Triton refuses to load the model.",
                    "use positive sizes, and -1 for variable-length axes.",
                )
    outputs = [t.name for t in config.output]
    if outputs and not all(_INDEXED.match(n) for n in outputs):
        add(
            "warning",
            path,
            "output names",
            f"{outputs} do not all follow the <name>__<index> rule; the backend then maps outputs to what forward() "
            "returns by their order in the config, which silently swaps them if that order is wrong.",
            "name outputs OUTPUT__0, OUTPUT__1, ... in the order forward() returns them.",
        )
    _check_serving_fields(model, config, path, problems)
    _check_parameters(config, path, problems)
    _check_warmup(model, config, path, problems)


def _backend_indexed(name: str) -> bool:
    """``<name>__<index>`` as the backend tests it: what follows the first "__" is ASCII digits (or nothing)."""
    _, separator, index = name.partition("__")
    return bool(separator) and all(c in "0123456789" for c in index)


def _check_serving_fields(model: ModelDir, config: ModelConfig, path: Path, problems: _Problems) -> None:
    """Fields outside the tensors that server 2.51.0 and the pytorch backend refuse, or serve without answering."""
    for tensor in config.input:
        if tensor.optional:
            problems.add(
                "error",
                path,
                f"input {tensor.name!r} optional",
                "the pytorch backend does not support optional inputs; Triton refuses to load the model "
                f"(`'optional' is set to true for input '{tensor.name}' while the backend model doesn't support "
                "optional input`).",
                "remove `optional: true`: every input is sent with every request.",
            )
    for tensor in config.output:
        # Triton's JoinPath appends even an absolute name to the model folder.
        labels = model.root / tensor.label_filename.lstrip("/")
        if tensor.label_filename and not labels.is_file():
            problems.add(
                "error",
                path,
                f"output {tensor.name!r} label_filename",
                f"{labels} is not a file; Triton refuses to load the model "
                "(`failed to open text file for read`).",
                "put the labels file (one label per line) beside config.pbtxt, or remove label_filename.",
            )
    if config.model_transaction_policy.decoupled:
        problems.add(
            "warning",
            path,
            "model_transaction_policy.decoupled",
            "Triton answers a decoupled model over gRPC streams only; it refuses plain gRPC inference requests "
            "(`ModelInfer RPC doesn't support models with decoupled transaction policy`), so this repository's "
            "parity checks, which send those, fail on it.",
            "set decoupled: false unless your clients stream (the pytorch backend sends one response per request).",
        )
    if config.HasField("sequence_batching"):
        names = [t.name for t in (*config.input, *config.output)]
        if not all(_backend_indexed(n) for n in names):
            problems.add(
                "error",
                path,
                "sequence_batching",
                f"with sequence_batching the backend wants every input and output named <name>__<index>, and "
                f"{[n for n in names if not _backend_indexed(n)]} are not; Triton refuses to load the model "
                "(`is using sequence batching with state but not all inputs and outputs follow the <name>__<index> "
                "naming convention`).",
                "name inputs INPUT__0, INPUT__1, ... and outputs OUTPUT__0, OUTPUT__1, ..., or remove sequence_batching.",
            )


def _check_warmup(model: ModelDir, config: ModelConfig, path: Path, problems: _Problems) -> None:
    """Triton runs each model_warmup before the model is ready; a warmup it cannot build fails the load."""
    inputs = {t.name: t for t in config.input}
    for warmup in config.model_warmup:
        where = f"model_warmup {warmup.name!r}"
        missing = sorted(n for n, t in inputs.items() if n not in warmup.inputs and not t.optional)
        if missing:
            problems.add(
                "error",
                path,
                f"{where} inputs",
                f"lacks the input(s) {', '.join(missing)} the model requires; Triton fails the model's load at warmup.",
                "give the warmup every input of the config, or re-export the model with `invoke export`.",
            )
        for name in sorted(warmup.inputs):
            entry = warmup.inputs[name]
            if name not in inputs:
                problems.add(
                    "error",
                    path,
                    f"{where} inputs {name!r}",
                    f"the config has no input {name!r}; Triton fails the model's load at warmup.",
                    f"name one of the config's inputs: {', '.join(sorted(inputs))}.",
                )
                continue
            declared = inputs[name]
            if any(d < 1 for d in entry.dims):
                problems.add(
                    "error",
                    path,
                    f"{where} inputs {name!r} dims",
                    f"{list(entry.dims)}: a warmup needs every size given; Triton fails the model's load at warmup.",
                    "give the sample's real sizes (no -1), or re-export the model with `invoke export`.",
                )
                continue
            if not _dims_match(declared.dims, tuple(entry.dims)):
                problems.add(
                    "error",
                    path,
                    f"{where} inputs {name!r} dims",
                    f"{list(entry.dims)} does not fit the input's dims {list(declared.dims)}"
                    + (" (without the batch axis)" if config.max_batch_size > 0 else "")
                    + "; Triton fails the model's load at warmup (`unexpected shape`).",
                    "give the warmup the input's dims, or re-export the model with `invoke export`.",
                )
            if entry.data_type != declared.data_type:
                problems.add(
                    "error",
                    path,
                    f"{where} inputs {name!r} data_type",
                    f"{_config_type(entry)} differs from the input's {_config_type(declared)}; Triton fails the "
                    "model's load at warmup.",
                    "give the warmup the input's data type, or re-export the model with `invoke export`.",
                )
            source = entry.WhichOneof("input_data_type")
            if source is None:
                problems.add(
                    "error",
                    path,
                    f"{where} inputs {name!r}",
                    "says nowhere what data to send (zero_data, random_data or input_data_file); Triton fails the "
                    "model's load at warmup.",
                    "name the file of the sample's raw bytes (input_data_file), or re-export with `invoke export`.",
                )
                continue
            if source != "input_data_file":
                continue
            data = model.root / WARMUP / entry.input_data_file
            if not data.is_file():
                problems.add(
                    "error",
                    path,
                    f"{where} inputs {name!r} input_data_file",
                    f"{data} does not exist; Triton fails the model's load at warmup.",
                    "put the raw input bytes there (row-major), or re-export the model with `invoke export`.",
                )
                continue
            try:
                itemsize = np.dtype(dtypes.from_config(_config_type(entry)).numpy).itemsize
            except ValueError:
                continue  # the input's own data type check reports it
            wanted = math.prod(entry.dims) * itemsize
            size = data.stat().st_size
            if size != wanted:
                problems.add(
                    "error" if size < wanted else "warning",
                    data,
                    f"{where} inputs {name!r} input_data_file",
                    f"holds {size} bytes; dims {list(entry.dims)} of {_config_type(entry)} need {wanted}"
                    + (
                        "; Triton fails the model's load at warmup."
                        if size < wanted
                        else "; Triton reads the first ones."
                    ),
                    "write exactly the sample's raw bytes, or re-export the model with `invoke export`.",
                )


def _check_parameters(config: ModelConfig, path: Path, problems: _Problems) -> None:
    """The backend parses its own parameters at load and refuses values it cannot read; others it ignores."""
    for key in sorted(config.parameters):
        value = config.parameters[key].string_value
        if key in spec.BOOL_PARAMETERS and spec.backend_flag(value) is None:
            problems.add(
                "error",
                path,
                f"parameters {key}",
                f"{value!r} is not a boolean; the pytorch backend refuses to load the model "
                f"(`failed to convert '{value}' to boolean`).",
                'write "true" or "false" (on/off and 1/0 work too).',
            )
        elif key in spec.INT_PARAMETERS and spec.backend_count(value) is None:
            problems.add(
                "error",
                path,
                f"parameters {key}",
                f"{value!r} is not a number; the pytorch backend refuses to load the model "
                f"(`failed to convert '{value}' to integral number`).",
                'write a thread count such as "2" (0 or less leaves torch\'s default).',
            )
        elif key in spec.INT_PARAMETERS and spec.backend_count(value) not in spec.STOI_RANGE:
            problems.add(
                "error",
                path,
                f"parameters {key}",
                f"{value!r} is more than a C++ int holds; std::stoi throws std::out_of_range, which the pytorch "
                "backend does not catch, and the server aborts (SIGABRT) loading the model, taking every other "
                "model down with it.",
                'write a thread count such as "2" (0 or less leaves torch\'s default).',
            )
        elif key not in spec.KNOWN_PARAMETERS:
            close = difflib.get_close_matches(key, sorted(spec.KNOWN_PARAMETERS), n=1)
            problems.add(
                "warning",
                path,
                f"parameters {key}",
                "the pytorch backend does not read this parameter and ignores it.",
                f"did you mean {close[0]}?"
                if close
                else f"the backend reads {', '.join(sorted(spec.KNOWN_PARAMETERS))}.",
            )


def _config_type(tensor: ModelInput | ModelOutput | ModelWarmup.Input) -> str:
    """The data type's enum name, e.g. ``TYPE_FP32``; a number model_config.proto does not name stays a number."""
    try:
        return str(DataType.Name(tensor.data_type))
    except ValueError:
        return f"data type {tensor.data_type} (not a model_config.proto DataType)"


def _read_config(path: Path, problems: _Problems) -> str | None:
    """config.pbtxt's text; None (and an error) when it is not a readable UTF-8 file."""
    if not path.is_file():
        problems.add(
            "error",
            path,
            "config.pbtxt",
            "this is not a regular file (a folder, a device or a dangling link); Triton cannot read it.",
            "replace it with the config.pbtxt text file (re-export with `invoke export`).",
        )
        return None
    try:
        data = path.read_bytes()
        if data.startswith(b"\xef\xbb\xbf"):
            problems.add(
                "error",
                path,
                "config.pbtxt",
                "it starts with a UTF-8 byte-order mark, which Triton's text parser does not skip: server 2.51.0 "
                "refuses the model.",
                "save it as UTF-8 without a BOM (most editors call that plain UTF-8), or re-export with "
                "`invoke export`.",
            )
            return None
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        if data.startswith((b"\xff\xfe", b"\xfe\xff")) or b"\x00" in data:
            problems.add(
                "error",
                path,
                "config.pbtxt",
                "it looks saved as UTF-16 or UTF-32 (a byte-order mark or NUL bytes); Triton's text parser cannot "
                "read it and refuses the model.",
                'save it as UTF-8 (an editor\'s "Unicode" is often UTF-16), or re-export with `invoke export`.',
            )
            return None
        problems.add(
            "warning",
            path,
            "config.pbtxt",
            f"not UTF-8 text ({exc.reason} at byte {exc.start}); Triton's parser takes such bytes as they are "
            "(server 2.51.0 serves a config with a Latin-1 byte in a comment or a string value), and the checks "
            "here read each such sequence as U+FFFD.",
            "save it as UTF-8 (an editor may have changed its encoding), or re-export with `invoke export`.",
        )
        return config_text(data)
    except OSError as exc:
        problems.add(
            "error",
            path,
            "config.pbtxt",
            f"it cannot be read ({first_line(exc)}); Triton could not read it either.",
            "make it readable by the user that runs validate and Triton.",
        )
    return None


def _check_model_file(model: ModelDir, config: ModelConfig, model_file: Path, problems: _Problems) -> None:
    """Load the TorchScript file and run it the way the backend would: on inputs shaped and typed as the config
    declares (another length on every -1 axis), and on the reference inputs where they fit the config."""
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

    arguments = [a.name for a in module.forward.schema.arguments[1:]]
    names = [t.name for t in config.input]
    if len(names) != len(arguments):
        add(
            "error",
            path,
            "input",
            f"{len(names)} input(s) declared, forward() takes {len(arguments)} ({', '.join(arguments)}); the backend "
            f"refuses to load it (`configuration expects {len(names)} inputs, model provides {len(arguments)}`).",
            "declare one input per forward() argument.",
        )
        return
    order = _input_order(names, arguments, path, problems)
    if order is None:
        return

    if any(_config_type(t) == "TYPE_STRING" for t in config.input):
        add(
            "warning",
            path,
            "input",
            "TYPE_STRING inputs: the model was not run, so dims, data types and the output count are unchecked.",
            "check it by serving it (`nox -s integration -- --repository ...`).",
        )
        return
    batch = config.max_batch_size > 0
    feeds: list[tuple[str, list[Array]]] = []
    synthesized = _synthesize_all(config, path, problems)
    if synthesized is not None:
        feeds.append((_SYNTHESIZED, synthesized))
    feeds += _reference_feeds(model, config, problems)

    for what, feed in feeds:
        ordered = [torch.from_numpy(np.array(feed[i])) for i in order]
        try:
            with torch.inference_mode():
                result = module(*ordered)
        except Exception as exc:
            shapes = ", ".join(
                f"{t.name} {list(a.shape)} {a.dtype}" for t, a in zip(config.input, feed, strict=True)
            )
            if what != _SYNTHESIZED:
                # The inputs fit the config and config-shaped zeros ran: the stored values are what fails.
                add(
                    "warning",
                    model.reference_npz,
                    what,
                    f"the model fails on its inputs ({shapes}): {first_line(exc)}; served, it fails the same way, so "
                    "parity on this case would fail.",
                    "re-export the model so that its reference inputs are values the model accepts.",
                )
                continue
            add(
                "error",
                path,
                "input",
                f"the model fails on {what} ({shapes}): {first_line(exc)}; Triton's inference would fail the same way.",
                "make input dims (-1 only where any length works) and data_type match what forward() expects "
                "(re-export to generate them).",
            )
            return
        if not _check_outputs(model_file, path, config, result, batch=batch, problems=problems):
            return


def _input_order(names: list[str], arguments: list[str], path: Path, problems: _Problems) -> list[int] | None:
    """Which config input feeds each forward() argument, as the backend maps them; None after an error."""
    if all(n in arguments for n in names):
        return sorted(range(len(names)), key=lambda i: arguments.index(names[i]))
    indexed = [_INDEXED.match(n) for n in names]
    if all(indexed):
        positions = [int(m.group(1)) for m in indexed if m]
        if sorted(positions) != list(range(len(names))):
            problems.add(
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
    problems.add(
        "warning",
        path,
        "input names",
        f"{names} follow neither forward()'s argument names {arguments} nor the <name>__<index> rule; the backend "
        "then feeds them to forward() in config order, which silently swaps inputs if that order is wrong.",
        f"name inputs {', '.join(f'INPUT__{i}' for i in range(len(arguments)))} or {', '.join(arguments)}.",
    )
    return list(range(len(names)))


def _reference_feeds(
    model: ModelDir, config: ModelConfig, problems: _Problems
) -> list[tuple[str, list[Array]]]:
    """The reference cases whose inputs fit the config; a warning when some do not (parity cannot use them)."""
    if not reference.exists(model):
        return []
    try:
        ref = reference.load(model)
    except ReferenceDataError as exc:
        # Triton never reads these files: the model serves, but parity has nothing to compare with.
        problems.add("warning", exc.path, f"reference data {exc.field}", exc.detail, exc.fix)
        return []
    by_name = {info.name: index for index, info in enumerate(ref.inputs)}
    batch = config.max_batch_size > 0
    feeds: list[tuple[str, list[Array]]] = []
    for case in ref.cases:
        arrays = [case.inputs[by_name[t.name]] if t.name in by_name else None for t in config.input]
        misfit = next(
            (
                (t, a)
                for t, a in zip(config.input, arrays, strict=True)
                if a is None
                or dtypes.from_numpy(a.dtype).config != _config_type(t)
                or (batch and a.ndim == 0)
                or not _dims_match(t.dims, a.shape[1:] if batch else a.shape)
                or (batch and a.shape[0] > config.max_batch_size)
            ),
            None,
        )
        if misfit is None:
            feeds.append((f"reference case {case.id!r}", [a for a in arrays if a is not None]))
            continue
        tensor, array = misfit
        got = "absent" if array is None else f"{dtypes.from_numpy(array.dtype).config} {list(array.shape)}"
        problems.add(
            "warning",
            model.reference_json,
            f"reference case {case.id!r}",
            f"its input {tensor.name!r} ({got}) does not fit the config ({_config_type(tensor)}, dims "
            f"{list(tensor.dims)}{', after the batch axis' if batch else ''}): the parity checks cannot send it.",
            "re-export the model so that the reference data matches its config.",
        )
        break
    return feeds


def _check_outputs(
    model_file: Path, path: Path, config: ModelConfig, result: object, *, batch: bool, problems: _Problems
) -> bool:
    """Outputs as the backend maps them (by <name>__<index>, else by config order); False after an error."""
    add = problems.add
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
        return False
    declared = list(config.output)
    indexed = all(_INDEXED.match(t.name) for t in declared)
    positions = [_index_of(t.name) if indexed else j for j, t in enumerate(declared)]
    beyond = [t.name for t, k in zip(declared, positions, strict=True) if k >= len(outputs)]
    if beyond:
        add(
            "error",
            path,
            "output",
            f"{', '.join(beyond)} refer(s) to an output forward() does not return (it returns {len(outputs)}); every "
            "inference fails (`refers to an output index which doesn't exist`).",
            "declare one output per returned tensor, OUTPUT__0 ... in order.",
        )
        return False
    if len(declared) < len(outputs):
        add(
            "warning",
            path,
            "output",
            f"{len(declared)} output(s) declared, forward() returns {len(outputs)}; Triton serves the declared ones only.",
            "declare every returned tensor if clients need them (OUTPUT__0 ... in order).",
        )
    found = len(problems)
    for tensor, position in zip(declared, positions, strict=True):
        value = outputs[position]
        try:
            actual = dtypes.from_torch(value.dtype).config
        except ValueError:
            actual = str(value.dtype)
        if actual != _config_type(tensor):
            add(
                "error",
                path,
                f"output {tensor.name!r} data_type",
                f"{_config_type(tensor)} is declared, the model returns {actual}; every inference fails "
                f"(`configuration expects datatype {_config_type(tensor)} for output '{tensor.name}'`).",
                f"declare {actual}.",
            )
        shape = tuple(value.shape[1:]) if batch else tuple(value.shape)
        if not _dims_match(tensor.dims, shape):
            add(
                "error",
                path,
                f"output {tensor.name!r} dims",
                f"{list(tensor.dims)} is declared, the model returns shape {list(shape)}"
                f"{' after the batch axis' if batch else ''}; Triton serves the model's shape, not the declared one.",
                f"declare dims {list(shape)} (with -1 on variable-length axes).",
            )
    return not any(p.severity == "error" for p in problems[found:])


def _index_of(name: str) -> int:
    """The <index> of a ``<name>__<index>`` tensor name (checked to match before this is called)."""
    match = _INDEXED.match(name)
    return int(match.group(1)) if match else 0


def _dims_match(declared: Iterable[int], shape: tuple[int, ...]) -> bool:
    dims = list(declared)
    return len(dims) == len(shape) and all(d in (-1, s) for d, s in zip(dims, shape, strict=True))


def _synthesize_all(config: ModelConfig, path: Path, problems: _Problems) -> list[Array] | None:
    """Zeros of the declared type and dims: -1 axes get a length no exporter picks by accident, batch 2 (or 1).

    None (and a warning) when the dims ask for more than :data:`_SYNTH_MAX_ELEMENTS` elements in all.
    """
    shapes = []
    for tensor in config.input:
        shape = [(_SYNTH_LENGTH if d == -1 else d) for d in tensor.dims]
        if config.max_batch_size > 0:
            shape = [min(2, config.max_batch_size), *shape]
        shapes.append(shape)
    elements = sum(math.prod(shape) for shape in shapes)
    if elements > _SYNTH_MAX_ELEMENTS:
        problems.add(
            "warning",
            path,
            "input dims",
            f"one request of these dims holds {elements:.3g} elements, more than the {_SYNTH_MAX_ELEMENTS:.3g} "
            "validate allocates; the model was not run on config-shaped inputs, so they are unchecked.",
            "check the dims (a typo adds digits); if they are right, serve the model to check it "
            "(`nox -s integration -- --repository ...`).",
        )
        return None
    return [
        np.zeros(shape, dtype=dtypes.from_config(_config_type(t)).numpy)
        for t, shape in zip(config.input, shapes, strict=True)
    ]
