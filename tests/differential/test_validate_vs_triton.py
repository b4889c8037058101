"""`invoke validate` held against the real server: every rule's broken repository, loaded and inferred.

Each mutation below breaks one exported model in one way (or writes something unusual that is fine). All of
them go into one repository, which one tritonserver (the embedded 2.51.0 with the official libtriton_pytorch.so
built from the pinned r25.10 sources) loads at once. The server's verdict per model:

- ``refused``: the model did not become READY (Triton's reason is kept);
- ``failed``: it loaded, but an inference with inputs shaped and typed as its config declares failed;
- ``wrong``: it answered, but an output's shape or data type differs from what the config declares;
- ``served``: it answered with every declared output as declared;
- ``crashed``: the server died while it served the request (it is started again for the next mutation).

The validator must report an error exactly where the verdict is not ``served``; where Triton serves the model
correctly it may warn, never fail. The expected verdict is not written down anywhere: it is what the server
does, so a rule that disagrees with the real backend fails here, whichever side moved.
"""

from __future__ import annotations

import queue
import shutil
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch
import tritonclient.grpc as grpcclient
from tritonclient.grpc.model_config_pb2 import DataType, ModelConfig, ModelInstanceGroup
from tritonclient.utils import InferenceServerException

from tritonpt import dtypes, export
from tritonpt.backend import BuiltBackend
from tritonpt.errors import ServerStartError
from tritonpt.export.pt2 import SUFFIX
from tritonpt.repository import ModelDir, read_config, render_config
from tritonpt.server import LocalServer, TritonFlags
from tritonpt.server.base import ModelState
from tritonpt.validate import RULES, validate_model

from ..helpers import compiled_package

pytestmark = pytest.mark.slow

Edit = Callable[[ModelDir, ModelConfig], None]
"""Changes a copied model folder; the config it is given is written back afterwards (with its name set)."""


@dataclass(frozen=True, kw_only=True)
class Mutation:
    id: str
    base: str  # a built-in model
    edit: Edit
    raw_config: str | None = None  # text written as config.pbtxt as is (for text the proto cannot hold)
    tail: bytes = b""  # bytes appended to the config.pbtxt written (for what is not UTF-8 text)
    encoding: str = "utf-8"  # how the config.pbtxt written is encoded
    # Served by a server of its own: loading it corrupts the server's memory, or it is suspected of crashing
    # the shared server while the rest of the repository loads (each such mutation says which).
    alone: bool = False
    # Keep the export's model_warmup. Off for the rest: a warmup runs the model while it loads, so a mutation
    # that only fails (or corrupts memory) on a request would take the shared server down at load instead,
    # and each rule is judged alone. The as_exported_* and warmup_* mutations keep it.
    warmup: bool = False
    # The rule (tritonpt.validate.RULES) the mutation breaks, which the validator must name; None for what is
    # sound (the validator must then not fail it: Triton serves it).
    rule: str | None = None


def _set(**fields: object) -> Edit:
    def edit(_: ModelDir, config: ModelConfig) -> None:
        for key, value in fields.items():
            setattr(config, key, value)

    return edit


def _tensor(kind: str, index: int, **fields: object) -> Edit:
    """Set fields of ``config.input[index]`` or ``config.output[index]`` (``dims`` replaces the list)."""

    def edit(_: ModelDir, config: ModelConfig) -> None:
        tensor = getattr(config, kind)[index]
        for key, value in fields.items():
            if key == "dims":
                del tensor.dims[:]
                tensor.dims.extend(value)  # type: ignore[arg-type]
            else:
                setattr(tensor, key, value)

    return edit


def _input(index: int, **fields: object) -> Edit:
    return _tensor("input", index, **fields)


def _output(index: int, **fields: object) -> Edit:
    return _tensor("output", index, **fields)


def _reshape(kind: str, index: int, dims: list[int], shape: list[int]) -> Edit:
    """``dims`` for the client and ``reshape: { shape }`` for the model (an empty shape is a reshape too)."""

    def edit(_: ModelDir, config: ModelConfig) -> None:
        tensor = getattr(config, kind)[index]
        del tensor.dims[:]
        tensor.dims.extend(dims)
        tensor.reshape.SetInParent()
        tensor.reshape.shape.extend(shape)

    return edit


def _both(*edits: Edit) -> Edit:
    def edit(model: ModelDir, config: ModelConfig) -> None:
        for one in edits:
            one(model, config)

    return edit


def _nothing(_: ModelDir, __: ModelConfig) -> None:
    pass


def _ensemble(
    name: str,
    rule: str | None = None,
    *,
    model: str = "as_exported_multi_io",
    feature: str = "features",
    context: bool = True,
    batch: int = 16,
) -> Mutation:
    """An ensemble of one step over multi_io as exported (``rule``: the way the keywords break it)."""
    maps = f'input_map {{ key: "{feature}" value: "F" }}' + (
        ' input_map { key: "context" value: "C" }' if context else ""
    )
    text = (
        f'name: "{name}"\nplatform: "ensemble"\nmax_batch_size: {batch}\n'
        'input [ { name: "F" data_type: TYPE_FP32 dims: [ 16 ] }, { name: "C" data_type: TYPE_FP32 dims: [ 8 ] } ]\n'
        'output [ { name: "Y" data_type: TYPE_FP32 dims: [ 8 ] } ]\n'
        f'ensemble_scheduling {{ step [ {{ model_name: "{model}" model_version: -1 {maps} '
        'output_map { key: "OUTPUT__0" value: "Y" } } ] }\n'
    )
    return Mutation(id=name, rule=rule, base="multi_io", edit=_nothing, raw_config=text)


def _parameter(key: str, value: str) -> Edit:
    def edit(_: ModelDir, config: ModelConfig) -> None:
        config.parameters[key].string_value = value

    return edit


def _remove_version(model: ModelDir, _: ModelConfig) -> None:
    shutil.rmtree(model.root / "1")


def _empty_version(name: str) -> Edit:
    def edit(model: ModelDir, _: ModelConfig) -> None:
        (model.root / name).mkdir()

    return edit


def _version_folder_named(name: str, *, policy: int | None = None) -> Edit:
    def edit(model: ModelDir, config: ModelConfig) -> None:
        (model.root / "1").rename(model.root / name)
        if policy is not None:
            config.version_policy.specific.versions.append(policy)

    return edit


def _remove_model_file(model: ModelDir, _: ModelConfig) -> None:
    model.model_file().unlink()


def _corrupt_model_file(model: ModelDir, _: ModelConfig) -> None:
    model.model_file().write_bytes(b"not a zip archive")


def _rename_model_file(model: ModelDir, config: ModelConfig) -> None:
    model.model_file().rename(model.root / "1" / "weights.pt")
    config.default_model_filename = "weights.pt"


def _drop_output(index: int) -> Edit:
    def edit(_: ModelDir, config: ModelConfig) -> None:
        del config.output[index]

    return edit


def _drop_input(index: int) -> Edit:
    def edit(_: ModelDir, config: ModelConfig) -> None:
        del config.input[index]

    return edit


def _warmup_file(change: str) -> Edit:
    """Remove, shorten or lengthen the raw file of the warmup's first input."""

    def edit(model: ModelDir, config: ModelConfig) -> None:
        entry = config.model_warmup[0].inputs[config.input[0].name]
        data = model.root / "warmup" / entry.input_data_file
        raw = data.read_bytes()
        if change == "remove":
            data.unlink()
        else:
            data.write_bytes(raw[:-4] if change == "shorten" else raw + bytes(8))

    return edit


def _warmup_input(change: str) -> Edit:
    """Rename the warmup's first input to one the config lacks, or drop it."""

    def edit(_: ModelDir, config: ModelConfig) -> None:
        inputs = config.model_warmup[0].inputs
        name = config.input[0].name
        if change == "variable":
            inputs[name].dims[0] = -1
        elif change == "no-source":
            inputs[name].ClearField("input_data_file")
        elif change == "dims":
            inputs[name].dims[0] += 1
        elif change == "type":
            inputs[name].data_type = DataType.Value("TYPE_FP64")
        else:
            if change == "rename":
                inputs["not_an_input"].CopyFrom(inputs[name])
            del inputs[name]

    return edit


def _swap_inputs(_: ModelDir, config: ModelConfig) -> None:
    first, second = ModelConfig().input.add(), ModelConfig().input.add()
    first.CopyFrom(config.input[0])
    second.CopyFrom(config.input[1])
    config.input[0].CopyFrom(second)
    config.input[1].CopyFrom(first)


def _instances(kind: int, count: int = 1) -> Edit:
    def edit(_: ModelDir, config: ModelConfig) -> None:
        del config.instance_group[:]
        config.instance_group.add(kind=kind, count=count)  # type: ignore[arg-type]

    return edit


def _labels_file(name: str) -> Edit:
    def edit(model: ModelDir, _: ModelConfig) -> None:
        (model.root / name).write_text("".join(f"label {i}\n" for i in range(8)), encoding="utf-8")

    return edit


def _two_groups(_: ModelDir, config: ModelConfig) -> None:
    del config.instance_group[:]
    config.instance_group.add(kind=ModelInstanceGroup.KIND_CPU, count=1)
    config.instance_group.add(kind=ModelInstanceGroup.KIND_CPU, count=2)


def _response_cache(_: ModelDir, config: ModelConfig) -> None:
    config.response_cache.enable = True  # the server is started without --cache-config


def _decoupled(_: ModelDir, config: ModelConfig) -> None:
    config.model_transaction_policy.decoupled = True


def _sequence_batching(_: ModelDir, config: ModelConfig) -> None:
    config.ClearField("dynamic_batching")
    config.sequence_batching.SetInParent()


def _preferred(*sizes: int) -> Edit:
    def edit(_: ModelDir, config: ModelConfig) -> None:
        config.dynamic_batching.preferred_batch_size.extend(sizes)

    return edit


def _no_dynamic_batching(_: ModelDir, config: ModelConfig) -> None:
    config.ClearField("dynamic_batching")


def _version_policy_specific(*versions: int) -> Edit:
    def edit(_: ModelDir, config: ModelConfig) -> None:
        config.version_policy.specific.versions.extend(versions)

    return edit


def _version_policy_latest(count: int) -> Edit:
    def edit(_: ModelDir, config: ModelConfig) -> None:
        config.version_policy.latest.num_versions = count

    return edit


def _empty_policy(_: ModelDir, config: ModelConfig) -> None:
    config.version_policy.SetInParent()  # `version_policy {}`: no choice in it


class ListOutputs(torch.nn.Module):
    """multi_io's inputs and output shapes, returned as a list: traced, forward() returns List[Tensor]."""

    def forward(self, features: torch.Tensor, context: torch.Tensor) -> list[torch.Tensor]:
        mixed = torch.tanh(features[:, :8] + context)
        return [mixed, mixed.sum(dim=1, keepdim=True)]


def _list_outputs(model: ModelDir, _: ModelConfig) -> None:
    traced = torch.jit.trace(ListOutputs(), (torch.randn(2, 16), torch.randn(2, 8)), strict=False)  # type: ignore[no-untyped-call]
    traced.save(str(model.model_file()))


def _remove_reference(model: ModelDir, _: ModelConfig) -> None:
    model.reference_json.unlink()
    model.reference_npz.unlink()


def _damage_reference(model: ModelDir, _: ModelConfig) -> None:
    model.reference_npz.write_bytes(b"not an npz archive")


def _no_outputs(_: ModelDir, config: ModelConfig) -> None:
    del config.output[:]


class Ordered(torch.nn.Module):
    """multi_io's inputs, an OrderedDict out: torch.export keeps collections.OrderedDict in the out-spec."""

    def forward(self, features: torch.Tensor, context: torch.Tensor) -> OrderedDict[str, torch.Tensor]:
        mixed = torch.tanh(features[:, :8] + context)
        return OrderedDict(mixed=mixed, summary=mixed.sum(dim=1, keepdim=True))


def _ordered_dict_package(model: ModelDir, config: ModelConfig) -> None:
    """A package whose out-spec the backend's call-spec parser does not take; the config names its outputs."""
    batch = torch.export.Dim("batch", min=1, max=16)
    path = model.root / "1" / "model.pt2"
    path.unlink()
    compiled_package(
        Ordered(),
        (torch.randn(2, 16), torch.randn(2, 8)),
        path,
        dynamic_shapes=({0: batch}, {0: batch}),
        strict=False,
    )
    config.output[0].name, config.output[1].name = "RESULT[mixed]", "RESULT[summary]"


def _not_a_package(model: ModelDir, _: ModelConfig) -> None:
    (model.root / "1" / "model.pt2").write_bytes(b"not a zip archive")


def _ordinal_names(_: ModelDir, config: ModelConfig) -> None:
    for index, tensor in enumerate(config.input):
        tensor.name = f"INPUT__{index}"
    for index, tensor in enumerate(config.output):
        tensor.name = f"OUTPUT__{index}"


FP32, FP64, INT32, INT64 = DataType.TYPE_FP32, DataType.TYPE_FP64, DataType.TYPE_INT32, DataType.TYPE_INT64

MUTATIONS: tuple[Mutation, ...] = (
    # Unchanged exports: the baseline every rule is measured from.
    Mutation(id="as_exported_multi_io", warmup=True, base="multi_io", edit=_nothing),
    Mutation(id="as_exported_fixed_shape", warmup=True, base="fixed_shape", edit=_nothing),
    Mutation(id="as_exported_token_encoder", warmup=True, base="token_encoder", edit=_nothing),
    # an ensemble over as_exported_multi_io: core schedules it (no backend, no model file)
    _ensemble("ensemble_of_a_model"),
    _ensemble("ensemble_step_model_missing", "E001", model="as_exported_multi_i0"),
    _ensemble("ensemble_step_tensor_missing", "E002", feature="featurez"),
    _ensemble("ensemble_step_input_unmapped", "E003", context=False),
    _ensemble("ensemble_batch_above_its_step", "E004", batch=32),
    # platform and backend
    Mutation(id="platform_pytorch", rule="C002", base="multi_io", edit=_set(platform="pytorch")),
    Mutation(id="platform_onnx", rule="C003", base="multi_io", edit=_set(platform="onnxruntime_onnx")),
    Mutation(id="backend_only", base="multi_io", edit=_set(platform="", backend="pytorch")),
    Mutation(id="platform_and_backend", base="multi_io", edit=_set(backend="pytorch")),
    Mutation(id="no_platform_no_backend", rule="C004", base="multi_io", edit=_set(platform="")),
    # name, versions, files
    Mutation(
        id="name_differs", rule="C001", base="multi_io", edit=_nothing
    ),  # the name is set to another below
    Mutation(id="no_version_folder", rule="R006", base="multi_io", edit=_remove_version),
    Mutation(id="no_model_file", rule="R010", base="multi_io", edit=_remove_model_file),
    Mutation(id="corrupt_model_file", rule="M001", base="multi_io", edit=_corrupt_model_file),
    Mutation(id="default_model_filename", base="multi_io", edit=_rename_model_file),
    Mutation(
        id="version_policy_missing_version", rule="R008", base="multi_io", edit=_version_policy_specific(7)
    ),
    Mutation(
        id="version_policy_one_missing_version",
        rule="R008",
        base="multi_io",
        edit=_version_policy_specific(1, 7),
    ),
    Mutation(id="version_policy_latest_zero", rule="R009", base="multi_io", edit=_version_policy_latest(0)),
    Mutation(
        id="version_policy_empty",
        rule="R010",
        base="multi_io",
        edit=_both(_empty_version("0"), _empty_policy),
        alone=True,
    ),
    Mutation(id="older_version_folder_empty", base="multi_io", edit=_empty_version("0")),
    Mutation(id="newer_version_folder_empty", rule="R010", base="multi_io", edit=_empty_version("2")),
    # Version 0 fails to load, and Triton unloads the model's version 1 again while the other models load:
    # one shared server start in ten ended in SIGSEGV with this and version_policy_empty beside the others.
    Mutation(
        id="older_version_folder_empty_all_policy",
        rule="R010",
        base="multi_io",
        edit=_both(_empty_version("0"), lambda _, config: config.version_policy.all.SetInParent()),
        alone=True,
    ),
    Mutation(
        id="version_folder_leading_zeros",
        rule="R005",
        base="multi_io",
        edit=_version_folder_named("007", policy=7),
    ),
    Mutation(
        id="version_folder_leading_zeros_no_policy",
        rule="R006",
        base="multi_io",
        edit=_version_folder_named("007"),
    ),
    Mutation(id="version_folder_with_suffix", rule="R010", base="multi_io", edit=_version_folder_named("1a")),
    Mutation(id="version_folder_signed", rule="R010", base="multi_io", edit=_version_folder_named("+1")),
    # std::stoll throws std::out_of_range, which VersionsToLoad does not catch
    Mutation(
        id="version_folder_beyond_int64",
        rule="R007",
        base="multi_io",
        edit=_empty_version("99999999999999999999"),
        alone=True,
    ),
    # the schema
    Mutation(
        id="unknown_field",
        rule="T006",
        base="multi_io",
        edit=_nothing,
        raw_config='name: "unknown_field"\nplatform: "pytorch_libtorch"\nmax_batch_sise: 16\n',
    ),
    # protobuf's Python parser hands a number an enum cannot hold to the message (ValueError, not ParseError)
    Mutation(
        id="enum_number_out_of_range",
        rule="T006",
        base="multi_io",
        edit=_nothing,
        raw_config='name: "enum_number_out_of_range"\nplatform: "pytorch_libtorch"\ninput { name: "INPUT__0" data_type: 3372036854775808 dims: 4 }\n',
    ),
    # encoding: a Latin-1 byte (é) where an editor may leave one
    Mutation(id="config_latin1_comment", rule="T004", base="multi_io", edit=_nothing, tail=b"# caf\xe9\n"),
    Mutation(
        id="config_latin1_string",
        rule="T004",
        base="multi_io",
        edit=_nothing,
        tail=b'parameters { key: "NOTE" value { string_value: "caf\xe9" } }\n',
    ),
    Mutation(
        id="config_utf16", rule="T003", base="multi_io", edit=_nothing, encoding="utf-16"
    ),  # an editor's "Unicode"
    Mutation(id="config_utf8_bom", rule="T002", base="multi_io", edit=_nothing, encoding="utf-8-sig"),
    # batching
    Mutation(id="max_batch_size_negative", rule="C005", base="multi_io", edit=_set(max_batch_size=-1)),
    Mutation(id="max_batch_size_larger", base="multi_io", edit=_set(max_batch_size=64)),
    Mutation(
        id="max_batch_size_zero_with_dynamic_batching",
        rule="C006",
        base="multi_io",
        edit=_both(
            _set(max_batch_size=0),
            _input(0, dims=[2, 16]),
            _input(1, dims=[2, 8]),
            _output(0, dims=[2, 8]),
            _output(1, dims=[2, 1]),
        ),
    ),
    Mutation(
        id="max_batch_size_zero_full_shapes",
        rule="D003",
        base="multi_io",
        edit=_both(
            _set(max_batch_size=0),
            _no_dynamic_batching,
            _input(0, dims=[2, 16]),
            _input(1, dims=[2, 8]),
            _output(0, dims=[2, 8]),
            _output(1, dims=[2, 1]),
        ),
    ),
    Mutation(id="preferred_batch_size_above_max", rule="C007", base="multi_io", edit=_preferred(32)),
    Mutation(id="preferred_batch_size_within_max", base="multi_io", edit=_preferred(4, 8)),
    # input and output names
    Mutation(
        id="inputs_indexed_names",
        rule="D003",
        base="multi_io",
        edit=_both(_input(0, name="INPUT__0"), _input(1, name="INPUT__1")),
    ),
    Mutation(
        id="inputs_other_names",
        rule="M004",
        base="multi_io",
        edit=_both(_input(0, name="left"), _input(1, name="right")),
    ),
    Mutation(id="inputs_swapped_order", base="multi_io", edit=_swap_inputs),
    # INPUT__2 of two inputs: the backend indexes its input table by the number, past its end, when it loads
    # the model; every request fails, and the server was seen to crash later on requests to *other* models
    # (SIGSEGV in TRITONBACKEND_ModelInstanceExecute), so it is loaded by a server of its own.
    Mutation(
        id="inputs_index_gap",
        rule="M003",
        base="multi_io",
        edit=_both(_input(0, name="INPUT__0"), _input(1, name="INPUT__2")),
        alone=True,
    ),
    Mutation(
        id="outputs_other_names",
        rule="C012",
        base="multi_io",
        edit=_both(_output(0, name="mixed"), _output(1, name="summary")),
    ),
    # what forward() returns: a list of tensors, which the backend refuses at inference; an index past it
    Mutation(id="outputs_as_a_list", rule="M007", base="multi_io", edit=_list_outputs),
    Mutation(id="output_index_beyond", rule="M008", base="multi_io", edit=_output(1, name="OUTPUT__2")),
    Mutation(id="no_outputs", rule="C008", base="multi_io", edit=_no_outputs),
    # a data type number model_config.proto does not name
    Mutation(id="input_dtype_unknown", rule="C010", base="multi_io", edit=_input(0, data_type=99)),
    # reference data, which Triton never reads: the model serves, parity has less to compare with
    Mutation(id="no_reference_data", rule="D001", base="multi_io", edit=_remove_reference),
    Mutation(id="damaged_reference_data", rule="D002", base="multi_io", edit=_damage_reference),
    # counts
    Mutation(id="one_input_missing", rule="M002", base="multi_io", edit=_drop_input(1)),
    Mutation(id="one_output_missing", rule="M009", base="multi_io", edit=_drop_output(1)),
    # dims
    Mutation(id="input_dims_wrong", rule="M006", base="multi_io", edit=_input(0, dims=[17])),
    Mutation(id="input_dims_variable", rule="M006", base="multi_io", edit=_input(0, dims=[-1])),
    Mutation(id="input_dims_zero", rule="C011", base="multi_io", edit=_input(0, dims=[0])),
    Mutation(id="output_without_dims", rule="C022", base="multi_io", edit=_output(1, dims=[])),
    # reshape: the client's dims, the model's shape (core reshapes between them)
    Mutation(id="input_reshaped", base="multi_io", edit=_reshape("input", 0, [4, 4], [16])),
    Mutation(id="output_reshaped", base="multi_io", edit=_reshape("output", 0, [2, 4], [8])),
    Mutation(id="output_reshaped_to_one_value", base="multi_io", edit=_reshape("output", 1, [1], [])),
    Mutation(id="input_reshape_misfit", rule="C023", base="multi_io", edit=_reshape("input", 0, [16], [15])),
    Mutation(id="output_reshape_misfit", rule="C023", base="multi_io", edit=_reshape("output", 0, [8], [-1])),
    Mutation(id="output_dims_wrong", rule="M011", base="multi_io", edit=_output(0, dims=[9])),
    Mutation(id="output_dims_variable", base="multi_io", edit=_output(0, dims=[-1])),
    Mutation(id="output_rank_wrong", rule="M011", base="multi_io", edit=_output(0, dims=[8, 1])),
    # data types
    Mutation(id="input_dtype_fp64", rule="M006", base="multi_io", edit=_input(0, data_type=FP64)),
    Mutation(id="output_dtype_int32", rule="M010", base="multi_io", edit=_output(0, data_type=INT32)),
    Mutation(id="output_dtype_fp64", rule="M010", base="multi_io", edit=_output(0, data_type=FP64)),
    Mutation(
        id="input_dtype_bf16", rule="C009", base="multi_io", edit=_input(0, data_type=DataType.TYPE_BF16)
    ),
    Mutation(
        id="output_dtype_uint32",
        rule="C009",
        base="multi_io",
        edit=_output(0, data_type=DataType.TYPE_UINT32),
    ),
    Mutation(id="token_input_int32", rule="D003", base="token_encoder", edit=_input(0, data_type=INT32)),
    # placement
    Mutation(id="kind_gpu", rule="C021", base="multi_io", edit=_instances(ModelInstanceGroup.KIND_GPU)),
    Mutation(id="kind_cpu_two_instances", base="multi_io", edit=_instances(ModelInstanceGroup.KIND_CPU, 2)),
    Mutation(id="instance_count_zero", base="multi_io", edit=_instances(ModelInstanceGroup.KIND_CPU, 0)),
    Mutation(id="instance_count_negative", base="multi_io", edit=_instances(ModelInstanceGroup.KIND_CPU, -1)),
    Mutation(id="kind_model", base="multi_io", edit=_instances(ModelInstanceGroup.KIND_MODEL)),
    Mutation(id="two_instance_groups", base="multi_io", edit=_two_groups),
    # other scheduling and serving fields
    Mutation(id="response_cache_without_a_cache", base="multi_io", edit=_response_cache),
    Mutation(id="decoupled", rule="C015", base="multi_io", edit=_decoupled),
    Mutation(id="sequence_batching", rule="C016", base="multi_io", edit=_sequence_batching),
    Mutation(
        id="sequence_batching_indexed_names",
        base="multi_io",
        edit=_both(
            _sequence_batching,
            _input(0, name="INPUT__0"),
            _input(1, name="INPUT__1"),
            _output(0, name="OUTPUT__0"),
            _output(1, name="OUTPUT__1"),
        ),
    ),
    Mutation(id="input_optional", rule="C013", base="multi_io", edit=_input(1, optional=True)),
    Mutation(
        id="output_label_file_missing",
        rule="C014",
        base="multi_io",
        edit=_output(0, label_filename="labels.txt"),
    ),
    Mutation(
        id="output_label_file",
        base="multi_io",
        edit=_both(_output(0, label_filename="labels.txt"), _labels_file("labels.txt")),
    ),
    # backend parameters
    Mutation(id="parameter_unknown", rule="C020", base="multi_io", edit=_parameter("NOT_A_PARAMETER", "1")),
    Mutation(
        id="parameter_bad_bool", rule="C017", base="multi_io", edit=_parameter("INFERENCE_MODE", "maybe")
    ),
    Mutation(
        id="parameter_bad_thread_count",
        rule="C018",
        base="multi_io",
        edit=_parameter("INTRA_OP_THREAD_COUNT", "many"),
    ),
    Mutation(id="parameter_thread_count", base="multi_io", edit=_parameter("INTRA_OP_THREAD_COUNT", "1")),
    # how the backend parses them: ParseBoolValue lowercases and compares; std::stoi reads a leading number
    Mutation(id="parameter_bool_upper_case", base="multi_io", edit=_parameter("INFERENCE_MODE", "TRUE")),
    Mutation(
        id="parameter_bool_blank", rule="C017", base="multi_io", edit=_parameter("INFERENCE_MODE", " true")
    ),
    Mutation(
        id="parameter_thread_count_prefix", base="multi_io", edit=_parameter("INTRA_OP_THREAD_COUNT", "1x")
    ),
    Mutation(
        id="parameter_thread_count_negative", base="multi_io", edit=_parameter("INTRA_OP_THREAD_COUNT", "-1")
    ),
    # std::stoi throws std::out_of_range, which backend_common's ParseIntValue does not catch
    Mutation(
        id="parameter_thread_count_out_of_range",
        rule="C019",
        base="multi_io",
        edit=_parameter("INTRA_OP_THREAD_COUNT", "99999999999"),
        alone=True,
    ),
    # PT2 (platform torch_aoti), served by pytorch_backend r26.05 under the second backend name
    Mutation(id="pt2_as_exported", warmup=True, base="multi_io_pt2", edit=_nothing),
    Mutation(id="pt2_ordinal_names", base="multi_io_pt2", edit=_ordinal_names),
    Mutation(id="pt2_not_a_package", rule="A001", base="multi_io_pt2", edit=_not_a_package),
    Mutation(id="pt2_ordered_dict_output", rule="A002", base="multi_io_pt2", edit=_ordered_dict_package),
    Mutation(id="pt2_one_input_missing", rule="A003", base="multi_io_pt2", edit=_drop_input(1)),
    Mutation(id="pt2_unknown_input_name", rule="A004", base="multi_io_pt2", edit=_input(1, name="ARGS[7]")),
    Mutation(id="pt2_sequence_batching", rule="A006", base="multi_io_pt2", edit=_sequence_batching),
    Mutation(
        id="pt2_parameter_bad_bool",
        rule="A007",
        base="multi_io_pt2",
        edit=_parameter("INFERENCE_MODE", "maybe"),
    ),
    Mutation(
        id="pt2_input_dtype_fp64",
        rule="A008",
        base="multi_io_pt2",
        edit=_input(0, data_type=FP64),
        alone=True,
    ),
    # FACTS.md: a TYPE_FP16 output on an FP32 package crashed the server (SIGSEGV); a server of its own
    Mutation(
        id="pt2_output_dtype_fp16",
        rule="A011",
        base="multi_io_pt2",
        edit=_output(0, data_type=DataType.TYPE_FP16),
        alone=True,
    ),
    Mutation(id="pt2_output_dims_wrong", rule="A012", base="multi_io_pt2", edit=_output(0, dims=[9])),
    # BF16 on torch_aoti: r26.05 maps no BF16 type (Triton 26.11's notes state it from there on)
    Mutation(
        id="pt2_input_bf16", rule="A013", base="multi_io_pt2", edit=_input(0, data_type=DataType.TYPE_BF16)
    ),
    Mutation(
        id="pt2_output_bf16", rule="A013", base="multi_io_pt2", edit=_output(1, data_type=DataType.TYPE_BF16)
    ),
    # model_warmup (export writes one sample of the reference inputs)
    Mutation(
        id="warmup_file_missing", rule="W007", warmup=True, base="multi_io", edit=_warmup_file("remove")
    ),
    Mutation(id="warmup_file_short", rule="W008", warmup=True, base="multi_io", edit=_warmup_file("shorten")),
    Mutation(id="warmup_file_long", rule="W009", warmup=True, base="multi_io", edit=_warmup_file("lengthen")),
    Mutation(
        id="warmup_unknown_input", rule="W002", warmup=True, base="multi_io", edit=_warmup_input("rename")
    ),
    Mutation(
        id="warmup_input_missing", rule="W001", warmup=True, base="multi_io", edit=_warmup_input("drop")
    ),
    Mutation(
        id="warmup_variable_dims", rule="W003", warmup=True, base="multi_io", edit=_warmup_input("variable")
    ),
    Mutation(
        id="warmup_no_data_source", rule="W006", warmup=True, base="multi_io", edit=_warmup_input("no-source")
    ),
    Mutation(id="warmup_dims_differ", rule="W004", warmup=True, base="multi_io", edit=_warmup_input("dims")),
    Mutation(
        id="warmup_data_type_differs", rule="W005", warmup=True, base="multi_io", edit=_warmup_input("type")
    ),
    # A batch-shaped warmup on a model without a batch axis: server 2.51.0 refused it in most of our runs and
    # died of SIGSEGV loading it in one, so it gets a server of its own.
    Mutation(
        id="warmup_after_max_batch_size_zero",
        rule="M006",
        warmup=True,
        alone=True,
        base="multi_io",
        edit=_set(max_batch_size=0),
    ),
)

NOT_HELD = {
    "R001": "the repository folder itself missing: Triton refuses to start (`failed to stat file`), which "
    "tests/system holds",
    "R002": "an unreadable folder: these machines run as root, which reads everything",
    "R003": "a model folder without config.pbtxt is skipped by an explicit-mode server; nothing to infer",
    "R004": "an empty repository: nothing to load or infer",
    "T001": "a config.pbtxt that is a FIFO or a folder: the server's read would hang or fail at start",
    "T005": "an unreadable config.pbtxt: root reads everything",
    "M005": "TYPE_STRING inputs: the built-in set has no model that takes strings",
    "M012": "dims of more than 2^28 elements: a request that large is not sent",
    "D003": None,  # held by the mutations that change inputs under their reference data (below)
    "D004": "a model that fails on the stored reference values but not on zeros: none of the built-in set",
    "P001": "INTER_OP_THREAD_COUNT in two models aborts the whole server at load (seen by hand), which would "
    "take every other mutation down",
    "P002": "its warning is about the models served beside it, which this suite's server holds by the dozen",
    "A005": "dynamic_batching goes wrong only when requests are merged, which one request at a time does not show; "
    "`nox -s triton-qa`'s L0_torch_aoti_dynamic_batching sends 8 at once on the stock build and holds it",
    "A009": "a static batch axis serves rows after the first wrong, with the right shapes: the verdict here reads "
    "shapes and types, not values; `nox -s triton-qa`'s L0_torch_aoti_static_batch holds it on the stock build",
    "A010": "dims other than the package's are served with garbage (or worse) and the right shapes, which the "
    "verdict here cannot tell from a right answer; the validator's checked run finds them",
}


def test_every_rule_is_held_against_the_server_or_says_why_not() -> None:
    """One to one: every rule has a mutation that breaks it, or a reason here why it cannot be held."""
    broken = {m.rule for m in MUTATIONS if m.rule}
    unknown = broken - set(RULES)
    assert not unknown, f"mutations name rules the validator does not have: {sorted(unknown)}"
    reasons = {code for code, why in NOT_HELD.items() if why}
    missing = set(RULES) - broken - reasons
    assert not missing, f"rules no mutation breaks and NOT_HELD does not explain: {sorted(missing)}"
    assert not (broken & reasons), f"held and said not to be: {sorted(broken & reasons)}"


BATCH = 2
VARIABLE_LENGTH = 5


@dataclass(frozen=True, kw_only=True)
class Verdict:
    kind: str  # refused | failed | wrong | served
    detail: str


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("differential-exports") / "repository"
    bases = {m.base for m in MUTATIONS}
    export.export_builtin(sorted(b for b in bases if not b.endswith(SUFFIX)), repository=root)
    pt2 = sorted(b.removesuffix(SUFFIX) for b in bases if b.endswith(SUFFIX))
    export.export_builtin(pt2, repository=root, model_formats=("pt2",))
    return root


@pytest.fixture(scope="module")
def broken(exported: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One repository holding every mutation, each in a folder named after it (those that corrupt the server
    in ``isolated/<id>/``, a repository each)."""
    root = tmp_path_factory.mktemp("differential") / "repository"
    root.mkdir()
    for mutation in MUTATIONS:
        folder = root / "isolated" / mutation.id / mutation.id if mutation.alone else root / mutation.id
        folder.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(exported / mutation.base, folder)
        model = ModelDir(root=folder)
        if mutation.raw_config is not None:
            model.config.write_text(mutation.raw_config, encoding="utf-8")
            continue
        config = read_config(model.config)
        config.name = "another_name" if mutation.id == "name_differs" else mutation.id
        if not mutation.warmup:
            config.ClearField("model_warmup")
        mutation.edit(model, config)
        model.config.write_bytes(render_config(config).encode(mutation.encoding) + mutation.tail)
    return root


class Harness:
    """One server for every mutation that does not corrupt it, started again (with a new log) if a request
    kills it; a server of its own for each mutation that does."""

    def __init__(self, repository: Path, built: BuiltBackend, pt2: BuiltBackend, logs: Path) -> None:
        self.repository, self.built, self.pt2, self.logs = repository, built, pt2, logs
        self.starts = 0
        self.server = self._start(repository)
        self.states = self.server.model_states([m.id for m in MUTATIONS if not m.alone])

    def _start(self, repository: Path) -> LocalServer:
        self.starts += 1
        log = self.logs / f"tritonserver-{self.starts}.log"
        server = LocalServer(
            TritonFlags(model_repository=repository),
            log_path=log,
            pytorch_backend=self.built,
            pt2_backend=self.pt2,
        )
        server.start()
        return server

    def restart(self) -> str:
        """Start a fresh server after a crash; returns how the old one ended and its last log lines."""
        ended = self.server.failure("the server died during the request")
        self.server.stop()
        self.server = self._start(self.repository)
        return ended

    def verdict(self, mutation: Mutation, model: ModelDir) -> Verdict:
        if not mutation.alone:
            found = _verdict(self.server, model.config, mutation.id, self.states[mutation.id])
            return Verdict(kind="crashed", detail=self.restart()) if not self.server.is_alive() else found
        try:
            alone = self._start(model.root.parent)
        except ServerStartError as exc:  # it died loading the model
            return Verdict(kind="crashed", detail=str(exc))
        try:
            found = _verdict(alone, model.config, mutation.id, alone.model_states([mutation.id])[mutation.id])
            if not alone.is_alive():
                return Verdict(kind="crashed", detail=alone.failure("the server died during the request"))
            return found
        finally:
            alone.stop()

    def stop(self) -> None:
        self.server.stop()


ROWS: list[tuple[str, str, str, str]] = []  # mutation, Triton's verdict, the validator's, detail


@pytest.fixture(scope="module")
def harness(
    broken: Path,
    pytorch_backend: BuiltBackend,
    pt2_backend: BuiltBackend,
    tmp_path_factory: pytest.TempPathFactory,
    pytestconfig: pytest.Config,
) -> Iterator[Harness]:
    running = Harness(broken, pytorch_backend, pt2_backend, tmp_path_factory.mktemp("differential-logs"))
    yield running
    running.stop()
    folder = Path(pytestconfig.getoption("--reports", default="reports"))
    folder.mkdir(parents=True, exist_ok=True)
    lines = [
        "# The validator against Triton",
        "",
        f"Server {running.server.install.version if running.server.install else '?'} with "
        f"{running.built.describe()}; server starts: {running.starts}.",
        "",
        "| mutation | Triton | validator | what happened |",
        "|---|---|---|---|",
        *(f"| {m} | {v} | {s} | {d.splitlines()[0][:160] if d else ''} |" for m, v, s, d in ROWS),
    ]
    (folder / "differential.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


def _inputs_as_declared(config: ModelConfig, batch: int) -> list[grpcclient.InferInput]:
    request = []
    for tensor in config.input:
        shape = [VARIABLE_LENGTH if d == -1 else d for d in tensor.dims]
        if config.max_batch_size > 0:
            shape = [batch, *shape]
        type_name = DataType.Name(tensor.data_type)
        wire = type_name.removeprefix("TYPE_")
        try:
            numpy_type = dtypes.from_config(type_name).numpy
        except ValueError:
            numpy_type = np.uint32 if "UINT32" in type_name else np.float32
        item = grpcclient.InferInput(tensor.name, shape, "BF16" if wire == "BF16" else wire)
        array = np.ones(shape, dtype=numpy_type)
        if wire != "BF16":
            item.set_data_from_numpy(array)
        request.append(item)
    return request


def _streamed(
    client: grpcclient.InferenceServerClient,
    name: str,
    request: list[grpcclient.InferInput],
    outputs: list[grpcclient.InferRequestedOutput],
) -> grpcclient.InferResult:
    """The first response of a request sent over a gRPC stream (what a decoupled model answers on)."""
    answers: queue.Queue[tuple[grpcclient.InferResult | None, InferenceServerException | None]] = (
        queue.Queue()
    )
    client.start_stream(callback=lambda result, error: answers.put((result, error)))
    try:
        client.async_stream_infer(name, request, outputs=outputs)
        try:
            result, error = answers.get(timeout=60)
        except queue.Empty:
            msg = "no response on the stream within 60 s"
            raise InferenceServerException(msg) from None
    finally:
        client.stop_stream(cancel_requests=True)
    if error is not None:
        raise error
    assert result is not None
    return result


def _verdict(server: LocalServer, config_path: Path, name: str, state: ModelState) -> Verdict:
    if not state.ready:
        return Verdict(kind="refused", detail=state.summary or state.state or "not in the repository index")
    config = read_config(config_path)
    # A model with sequence_batching is asked as its clients ask it: one sample, as a whole sequence.
    sequence = config.HasField("sequence_batching")
    batch = 1 if sequence else BATCH
    request = _inputs_as_declared(config, batch)
    outputs = [grpcclient.InferRequestedOutput(o.name) for o in config.output]
    try:
        with grpcclient.InferenceServerClient(server.endpoints.grpc) as client:
            if config.model_transaction_policy.decoupled:  # asked over a stream, as decoupled models are
                result = _streamed(client, name, request, outputs)
            else:
                result = client.infer(
                    name,
                    request,
                    outputs=outputs,
                    client_timeout=60,
                    **({"sequence_id": 1, "sequence_start": True, "sequence_end": True} if sequence else {}),
                )
    except InferenceServerException as exc:
        return Verdict(kind="failed", detail=str(exc).splitlines()[0])
    response = result.get_response()
    answered = {o.name: o for o in response.outputs}
    for tensor in config.output:
        got = answered.get(tensor.name)
        if got is None:
            return Verdict(kind="wrong", detail=f"no output {tensor.name} in the response")
        wire = DataType.Name(tensor.data_type).removeprefix("TYPE_")
        shape = list(got.shape)
        expected = list(tensor.dims)
        if config.max_batch_size > 0:
            if not shape or shape[0] != batch:
                return Verdict(
                    kind="wrong", detail=f"{tensor.name} has shape {shape}, batch {batch} was sent"
                )
            shape = shape[1:]
        fits = len(shape) == len(expected) and all(d in (-1, s) for d, s in zip(expected, shape, strict=True))
        if got.datatype != wire or not fits:
            return Verdict(
                kind="wrong",
                detail=f"{tensor.name} served as {got.datatype} {shape}, the config declares {wire} {expected}",
            )
    return Verdict(kind="served", detail="every declared output as declared")


@pytest.mark.parametrize("mutation", MUTATIONS, ids=[m.id for m in MUTATIONS])
def test_the_validator_fails_exactly_where_triton_does(
    mutation: Mutation, broken: Path, harness: Harness
) -> None:
    folder = broken / "isolated" / mutation.id / mutation.id if mutation.alone else broken / mutation.id
    model = ModelDir(root=folder)
    verdict = harness.verdict(mutation, model)
    problems = validate_model(model, gpu_available=False)
    errors = [p for p in problems if p.severity == "error"]
    said = "\n".join(p.render() for p in problems) or "(nothing)"
    judged = "error" if errors else "warning" if problems else "ok"
    ROWS.append((mutation.id, verdict.kind, judged, verdict.detail))
    if verdict.kind == "served":
        assert not errors, (
            f"Triton serves {mutation.id} correctly ({verdict.detail}), but the validator fails it:\n{said}"
        )
    else:
        assert errors, (
            f"Triton {verdict.kind} {mutation.id} ({verdict.detail}), but the validator passes it:\n{said}"
        )
    if mutation.rule is not None:
        assert mutation.rule in {p.rule for p in problems}, f"{mutation.id} breaks {mutation.rule}:\n{said}"
    for problem in problems:
        assert problem.path.is_relative_to(model.root) or problem.path == model.root, problem.render()
