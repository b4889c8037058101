"""One test per validation rule, each on a deliberately broken copy of a sound exported repository."""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from tritonclient.grpc.model_config_pb2 import ModelInput

from tritonpt import spec
from tritonpt.errors import Problem
from tritonpt.repository import (
    SPLIT_FILE,
    ModelDir,
    Split,
    read_config,
    render_config,
    version_number,
    write_split,
)
from tritonpt.validate import RULES, reference, rules, validate_model, validate_repository


def _without_warmup(path: Path) -> None:
    """Drop model_warmup, so that a break of another rule is judged alone (warmup rules have their own test)."""
    config = read_config(path)
    config.ClearField("model_warmup")
    path.write_text(render_config(config), encoding="utf-8")


def _edit(path: Path, pattern: str, replacement: str) -> None:
    text = path.read_text(encoding="utf-8")
    changed, count = re.subn(pattern, replacement, text, count=1, flags=re.MULTILINE)
    assert count == 1, f"{pattern!r} not found in {path}"
    path.write_text(changed, encoding="utf-8")


def _one(problems: list[Problem], severity: str, field: str) -> Problem:
    matching = [p for p in problems if p.severity == severity and p.field == field]
    assert len(matching) == 1, "\n".join(p.render() for p in problems)
    return matching[0]


def test_sound_repository_has_no_problems(exported_small: Path) -> None:
    assert validate_repository(exported_small, gpu_available=False) == []


# (model, file edit (pattern, replacement) in config.pbtxt, severity, field, words in message or fix). Which of
# them are errors follows what the real server does with each (tests/differential holds the two side by side).
CONFIG_BREAKS = [
    pytest.param(
        "multi_io",
        (r"^max_batch_size:", "max_batch_sise:"),
        "error",
        "max_batch_sise",
        "max_batch_size",
        id="misspelled-field",
    ),
    pytest.param(
        "multi_io",
        (r"data_type: TYPE_FP32", "data_type: 3372036854775808"),
        "error",
        "data_type",
        "value its field's type holds",
        id="enum-number-out-of-range",
    ),
    pytest.param(
        "multi_io",
        (r"^  dims: 1\n", ""),
        "error",
        "output 'OUTPUT__1' dims",
        "must specify 'dims'",
        id="output-without-dims",
    ),
    pytest.param(
        "multi_io",
        (r'(name: "features"\n  data_type: TYPE_FP32\n  dims: 16\n)', r"\1  reshape { shape: [ 15 ] }\n"),
        "error",
        "input 'features' reshape",
        "different size for dims and reshape",
        id="reshape-misfit",
    ),
    # Core reshapes between the client's dims and the model's shape: served as declared (tests/differential).
    pytest.param(
        "multi_io",
        (r'(name: "OUTPUT__1"\n  data_type: TYPE_FP32\n  dims: 1\n)', r"\1  reshape { shape: [ ] }\n"),
        None,
        None,
        None,
        id="output-reshaped-to-one-value",
    ),
    pytest.param(
        "multi_io",
        (
            r'(name: "OUTPUT__0"\n  data_type: TYPE_FP32\n)  dims: 8\n',
            r"\1  dims: [ 2, 4 ]\n  reshape { shape: [ 8 ] }\n",
        ),
        None,
        None,
        None,
        id="output-reshaped",
    ),
    pytest.param(
        "multi_io",
        (r"^platform:", 'flavour: "x"\nplatform:'),
        "error",
        "flavour",
        "remove it",
        id="unknown-field",
    ),
    pytest.param(
        "multi_io",
        (r'^platform: "pytorch_libtorch"', 'platform: "pytorch"'),
        "error",
        "platform",
        "pytorch_libtorch",
        id="platform-pytorch",
    ),
    pytest.param(
        "multi_io",
        (r"^platform: .*$", 'platform: "onnxruntime_onnx"'),
        "error",
        "platform",
        "pytorch_libtorch",
        id="other-platform",
    ),
    pytest.param(
        "multi_io",
        (r"^platform: .*\n", ""),
        "warning",
        "platform",
        "picks the pytorch backend from the file name",
        id="no-platform",
    ),
    pytest.param(
        "multi_io",
        (r'^name: "multi_io"', 'name: "multi-io"'),
        "error",
        "name",
        "differs from the folder",
        id="name-differs",
    ),
    pytest.param(
        "fixed_shape",
        (r"^platform:", "dynamic_batching { }\nplatform:"),
        "warning",
        "dynamic_batching",
        "does nothing",
        id="dynamic-batching-without-batch",
    ),
    pytest.param(
        "multi_io",
        (
            r"max_queue_delay_microseconds: 1000",
            "max_queue_delay_microseconds: 1000\n  preferred_batch_size: 32",
        ),
        "error",
        "dynamic_batching.preferred_batch_size",
        "exceed max_batch_size 16",
        id="preferred-batch-size",
    ),
    pytest.param(
        "multi_io",
        (r"data_type: TYPE_FP32", "data_type: TYPE_BF16"),
        "error",
        "input 'features' data_type",
        "TYPE_BF16",
        id="bf16",
    ),
    pytest.param(
        "multi_io",
        (r"data_type: TYPE_FP32", "data_type: TYPE_UINT32"),
        "error",
        "input 'features' data_type",
        "unsupported datatype TYPE_UINT32",
        id="uint32",
    ),
    pytest.param(
        "multi_io",
        (r'name: "OUTPUT__1"', 'name: "score"'),
        "warning",
        "output names",
        "<name>__<index>",
        id="output-names",
    ),
    pytest.param(
        "multi_io",
        (r'name: "features"', 'name: "image"'),
        "warning",
        "input names",
        "follow neither",
        id="input-names",
    ),
    pytest.param(
        "multi_io",
        (r'name: "features"', 'name: "INPUT__0"'),
        "warning",
        "input names",
        "in config order",
        id="input-names-mixed",
    ),
    pytest.param(
        "multi_io",
        (r"dims: 16", "dims: 15"),
        "error",
        "input",
        "fails on inputs shaped and typed as the config declares",
        id="input-dims",
    ),
    pytest.param(
        "multi_io",
        (r"dims: 16", "dims: -1"),
        "error",
        "input",
        "features [2, 5]",
        id="variable-axis-the-model-does-not-have",
    ),
    pytest.param(
        "multi_io", (r"dims: 8\n}\noutput", "dims: 8\n}\noutput"), None, None, None, id="unchanged-control"
    ),
    pytest.param(
        "scripted_gate",
        (r"data_type: TYPE_BOOL", "data_type: TYPE_INT8"),
        "error",
        "output 'OUTPUT__1' data_type",
        "TYPE_BOOL",
        id="output-dtype",
    ),
    pytest.param(
        "multi_io",
        (r"data_type: TYPE_FP32\n  dims: 16", "data_type: TYPE_FP64\n  dims: 16"),
        "error",
        "input",
        "float64",
        id="input-dtype",
    ),
    pytest.param(
        "fixed_shape",
        (r"dims: 4\n  dims: 3", "dims: 4\n  dims: 2"),
        "error",
        "output 'OUTPUT__0' dims",
        "[4, 3]",
        id="output-dims",
    ),
    pytest.param(
        "multi_io",
        (r"output \{\n  name: \"OUTPUT__1\"[^}]*\}\n", ""),
        "warning",
        "output",
        "returns 2",
        id="output-count",
    ),
    pytest.param(
        "multi_io",
        (r'name: "OUTPUT__1"', 'name: "OUTPUT__2"'),
        "error",
        "output",
        "does not return",
        id="output-index-beyond",
    ),
    pytest.param(
        "multi_io",
        (r'string_value: "true"', 'string_value: "maybe"'),
        "error",
        "parameters DISABLE_OPTIMIZED_EXECUTION",
        "to boolean",
        id="bad-boolean-parameter",
    ),
    pytest.param(
        "multi_io",
        (r'key: "INFERENCE_MODE"', 'key: "INTRA_OP_THREAD_COUNT"'),
        "error",
        "parameters INTRA_OP_THREAD_COUNT",
        "integral number",
        id="bad-count-parameter",
    ),
    pytest.param(
        "multi_io",
        (
            r"^platform:",
            'parameters { key: "INTER_OP_THREAD_COUNT" value { string_value: "4294967296" } }\nplatform:',
        ),
        "error",
        "parameters INTER_OP_THREAD_COUNT",
        "aborts (SIGABRT)",
        id="count-parameter-beyond-int",
    ),
    pytest.param(
        "multi_io",
        (r'name: "context"', 'name: "context"\n  optional: true'),
        "error",
        "input 'context' optional",
        "does not support optional inputs",
        id="optional-input",
    ),
    pytest.param(
        "multi_io",
        (r'name: "OUTPUT__0"', 'name: "OUTPUT__0"\n  label_filename: "labels.txt"'),
        "error",
        "output 'OUTPUT__0' label_filename",
        "failed to open text file",
        id="missing-labels-file",
    ),
    pytest.param(
        "multi_io",
        (r"^platform:", "model_transaction_policy { decoupled: true }\nplatform:"),
        "warning",
        "model_transaction_policy.decoupled",
        "over gRPC streams only",
        id="decoupled",
    ),
    pytest.param(
        "multi_io",
        (r"^dynamic_batching \{[^}]*\}", "sequence_batching { }"),
        "error",
        "sequence_batching",
        "['features', 'context'] are not",
        id="sequence-batching-with-argument-names",
    ),
    pytest.param(
        "multi_io",
        (r'key: "INFERENCE_MODE"', 'key: "INFERENCE_MOD"'),
        "warning",
        "parameters INFERENCE_MOD",
        "did you mean INFERENCE_MODE",
        id="unknown-parameter",
    ),
    pytest.param(
        "multi_io",
        (r"^platform:", "version_policy { specific { versions: 3 } }\nplatform:"),
        "error",
        "version_policy",
        "has only 1",
        id="missing-policy-version",
    ),
]


@pytest.mark.parametrize(("model", "edit", "severity", "field", "words"), CONFIG_BREAKS)
def test_config_rule(
    repository_copy: Callable[..., Path],
    model: str,
    edit: tuple[str, str],
    severity: str | None,
    field: str | None,
    words: str | None,
) -> None:
    repository = repository_copy(model)
    _without_warmup(repository / model / "config.pbtxt")
    _edit(repository / model / "config.pbtxt", *edit)
    problems = validate_model(ModelDir(root=repository / model), gpu_available=False)
    if field is None:
        assert problems == []
        return
    assert severity is not None
    problem = _one(problems, severity, field)
    assert words is not None
    assert words in problem.message + problem.fix, problem.render()
    assert problem.path.name in ("config.pbtxt", "model.pt")
    if severity == "warning":
        assert not [p for p in problems if p.severity == "error"], "\n".join(p.render() for p in problems)


def test_missing_version_folder(repository_copy: Callable[..., Path]) -> None:
    repository = repository_copy("multi_io")
    shutil.rmtree(repository / "multi_io" / "1")
    problem = _one(validate_model(ModelDir(root=repository / "multi_io")), "error", "version folder")
    assert "1/model.pt" in problem.fix


@pytest.mark.parametrize(
    ("folder", "number"),
    [("1", 1), ("0", 0), ("12", 12), ("007", None), ("01", None), ("1a", 1), ("+1", 1), (" 2", 2), ("-3", -3),
     ("warmup", None), ("initial_state", None), ("configs", None), ("v1", None), ("\u00b2", None)],
)  # fmt: skip
def test_version_folder_names_read_as_triton_reads_them(folder: str, number: int | None) -> None:
    """Triton's core, model_lifecycle.cc VersionsToLoad: skip warmup/initial_state/configs and leading zeros,
    then std::stoll (a leading number; "1a" is 1). The differential suite serves "007", "1a" and "+1"."""
    assert version_number(folder) == number


def test_an_empty_older_version_folder_is_fine_under_the_default_policy(
    repository_copy: Callable[..., Path],
) -> None:
    folder = repository_copy("multi_io") / "multi_io"
    (folder / "0").mkdir()  # Triton loads only the latest version: 1
    assert [p for p in validate_model(ModelDir(root=folder)) if p.severity == "error"] == []
    _edit(folder / "config.pbtxt", r"^platform:", "version_policy { all { } }\nplatform:")
    problem = _one(validate_model(ModelDir(root=folder)), "error", "model file")
    assert problem.path == folder / "0" / "model.pt"


def test_a_version_folder_triton_counts_but_reads_elsewhere_names_both(
    repository_copy: Callable[..., Path],
) -> None:
    folder = repository_copy("multi_io") / "multi_io"
    (folder / "1").rename(folder / "1a")
    problem = _one(validate_model(ModelDir(root=folder)), "error", "model file")
    assert problem.path == folder / "1" / "model.pt"
    assert "counts folder '1a' as version 1" in problem.message
    assert "name the version folder '1'" in problem.fix


def test_a_version_folder_with_a_leading_zero_is_skipped_as_triton_skips_it(
    repository_copy: Callable[..., Path],
) -> None:
    folder = repository_copy("multi_io") / "multi_io"
    (folder / "1").rename(folder / "007")
    problems = validate_model(ModelDir(root=folder))
    assert "name it '7'" in _one(problems, "warning", "version folder").fix
    assert "no numeric version folder" in _one(problems, "error", "version folder").message


def test_a_policy_naming_one_missing_version_of_two_is_a_warning(
    repository_copy: Callable[..., Path],
) -> None:
    folder = repository_copy("multi_io") / "multi_io"
    _edit(
        folder / "config.pbtxt", r"^platform:", "version_policy { specific { versions: [1, 7] } }\nplatform:"
    )
    problem = _one(validate_model(ModelDir(root=folder)), "warning", "version_policy")
    assert "Triton loads 1" in problem.message


def test_missing_model_file(repository_copy: Callable[..., Path]) -> None:
    repository = repository_copy("multi_io")
    (repository / "multi_io" / "1" / "model.pt").unlink()
    problem = _one(validate_model(ModelDir(root=repository / "multi_io")), "error", "model file")
    assert "has no model.pt" in problem.message


def test_model_file_that_does_not_load(repository_copy: Callable[..., Path]) -> None:
    repository = repository_copy("multi_io")
    (repository / "multi_io" / "1" / "model.pt").write_bytes(b"not a zip archive")
    problem = _one(validate_model(ModelDir(root=repository / "multi_io")), "error", "model file")
    assert "torch.jit.load cannot load it" in problem.message


def test_model_with_other_input_count(repository_copy: Callable[..., Path]) -> None:
    repository = repository_copy("multi_io", "fixed_shape")
    # A one-input TorchScript file behind a two-input config.
    shutil.copy(repository / "fixed_shape" / "1" / "model.pt", repository / "multi_io" / "1" / "model.pt")
    (repository / "multi_io" / "reference.json").unlink()
    _without_warmup(repository / "multi_io" / "config.pbtxt")
    _edit(repository / "multi_io" / "config.pbtxt", r'name: "features"', 'name: "INPUT__0"')
    _edit(repository / "multi_io" / "config.pbtxt", r'name: "context"', 'name: "INPUT__1"')
    problems = validate_model(ModelDir(root=repository / "multi_io"))
    assert "configuration expects 2 inputs, model provides 1" in _one(problems, "error", "input").message


def test_kind_gpu_fails_where_there_is_no_gpu(repository_copy: Callable[..., Path]) -> None:
    repository = repository_copy("multi_io")
    _edit(
        repository / "multi_io" / "config.pbtxt", r"^instance_group \{", "instance_group {\n  kind: KIND_GPU"
    )
    problems = validate_model(ModelDir(root=repository / "multi_io"), gpu_available=False)
    assert "no GPUs are available" in _one(problems, "error", "instance_group.kind").message
    assert validate_model(ModelDir(root=repository / "multi_io"), gpu_available=True) == []


def test_missing_reference_is_a_warning(repository_copy: Callable[..., Path]) -> None:
    repository = repository_copy("multi_io")
    (repository / "multi_io" / "reference.json").unlink()
    _one(validate_model(ModelDir(root=repository / "multi_io")), "warning", "reference data")


def test_folder_without_config_and_empty_repository(tmp_path: Path) -> None:
    assert _one(validate_repository(tmp_path), "error", "repository").message.endswith("holds no models.")
    (tmp_path / "orphan").mkdir()
    _one(validate_repository(tmp_path), "error", "config.pbtxt")
    assert "does not exist" in validate_repository(tmp_path / "nope")[0].message


def test_string_inputs_without_reference_are_not_run(repository_copy: Callable[..., Path]) -> None:
    repository = repository_copy("fixed_shape")
    (repository / "fixed_shape" / "reference.json").unlink()
    _without_warmup(repository / "fixed_shape" / "config.pbtxt")
    _edit(
        repository / "fixed_shape" / "config.pbtxt",
        r"data_type: TYPE_FP32\n  dims: 4\n  dims: 10",
        "data_type: TYPE_STRING\n  dims: 4",
    )
    problems = validate_model(ModelDir(root=repository / "fixed_shape"))
    assert "the model was not run" in _one(problems, "warning", "input").message


# What server 2.51.0 did with each broken warmup of multi_io (tests/differential holds the same mutations):
# a missing file, a short file or an input the config lacks fail the load; a longer file is served.
WARMUP_BREAKS = [
    pytest.param("remove", "error", "does not exist", id="file-missing"),
    pytest.param("shorten", "error", "fails the model's load", id="file-short"),
    pytest.param("lengthen", "warning", "reads the first ones", id="file-long"),
    pytest.param("rename", "error", "has no input", id="unknown-input"),
    pytest.param("drop", "error", "lacks the input", id="input-missing"),
    pytest.param("variable", "error", "every size given", id="variable-dims"),
    pytest.param("no-source", "error", "says nowhere what data", id="no-data-source"),
]


@pytest.mark.parametrize(("change", "severity", "words"), WARMUP_BREAKS)
def test_warmup_rule(repository_copy: Callable[..., Path], change: str, severity: str, words: str) -> None:
    repository = repository_copy("multi_io")
    model = ModelDir(root=repository / "multi_io")
    data = model.root / "warmup" / "features"
    if change == "remove":
        data.unlink()
    elif change in {"shorten", "lengthen"}:
        raw = data.read_bytes()
        data.write_bytes(raw[:-4] if change == "shorten" else raw + bytes(8))
    else:
        config = read_config(model.config)
        inputs = config.model_warmup[0].inputs
        if change == "variable":
            inputs["features"].dims[0] = -1
        elif change == "no-source":
            inputs["features"].ClearField("input_data_file")
        else:
            if change == "rename":
                inputs["image"].CopyFrom(inputs["features"])
            del inputs["features"]
        model.config.write_text(render_config(config), encoding="utf-8")
    problems = validate_model(model, gpu_available=False)
    problem = next((p for p in problems if "model_warmup" in p.field and words in p.message), None)
    assert problem is not None, problems
    assert problem.severity == severity
    errors = [p for p in problems if p.severity == "error"]
    assert all("model_warmup" in p.field for p in errors)  # nothing else is blamed
    assert bool(errors) is (severity == "error")


def _set_inter_op(model: Path, value: str) -> None:
    config = read_config(model / "config.pbtxt")
    config.parameters["INTER_OP_THREAD_COUNT"].string_value = value
    (model / "config.pbtxt").write_text(render_config(config), encoding="utf-8")


def test_inter_op_threads_in_two_models_of_one_server_is_an_error(
    repository_copy: Callable[..., Path],
) -> None:
    # Seen with server 2.51.0: the second model's set_num_interop_threads aborts the server (SIGABRT).
    repository = repository_copy("multi_io", "fixed_shape")
    _set_inter_op(repository / "multi_io", "1")
    [alone] = [p for p in validate_repository(repository) if "INTER_OP" in p.field]
    assert alone.severity == "warning"  # one model: it works, but it is the whole server's setting
    _set_inter_op(repository / "fixed_shape", "1")
    both = [p for p in validate_repository(repository) if "INTER_OP" in p.field]
    assert [p.severity for p in both] == ["error", "error"]
    assert "aborts" in both[0].message
    _set_inter_op(repository / "fixed_shape", "0")  # 0 leaves torch's default: not a second call
    assert [p.severity for p in validate_repository(repository) if "INTER_OP" in p.field] == ["warning"]


def test_the_rules_across_models_see_the_models_a_sharded_export_left_to_other_runners(
    repository_copy: Callable[..., Path],
) -> None:
    # One shard's runner holds fixed_shape; the split names two more that other runners export.
    repository = repository_copy("fixed_shape")
    assert [p for p in validate_repository(repository) if "INTER_OP" in p.field] == []
    inter_op = {"INTER_OP_THREAD_COUNT": "1"}
    write_split(repository, Split(models=("fixed_shape", "a", "b"), parameters={"a": inter_op, "b": {}}))
    [alone] = [p for p in validate_repository(repository, only=["fixed_shape"]) if "INTER_OP" in p.field]
    assert (alone.rule, alone.severity, alone.path.name) == ("P002", "warning", SPLIT_FILE)
    assert "a INTER_OP_THREAD_COUNT" in alone.field
    write_split(
        repository, Split(models=("fixed_shape", "a", "b"), parameters={"a": inter_op, "b": inter_op})
    )
    both = [p for p in validate_repository(repository, only=["fixed_shape"]) if "INTER_OP" in p.field]
    assert [(p.rule, p.severity) for p in both] == [
        ("P001", "error"),
        ("P001", "error"),
    ]  # as one server of all
    _set_inter_op(
        repository / "fixed_shape", "1"
    )  # the held model's config counts once, not again as recorded
    write_split(repository, Split(models=("fixed_shape", "a"), parameters={"fixed_shape": inter_op, "a": {}}))
    [held] = [p for p in validate_repository(repository) if "INTER_OP" in p.field]
    assert (held.rule, held.path) == ("P002", repository / "fixed_shape" / "config.pbtxt")


def test_a_sharded_export_records_the_parameters_the_export_writes(exported_small: Path) -> None:
    from tritonpt.export import builtin_parameters  # noqa: PLC0415

    recorded = builtin_parameters(["multi_io", "fixed_shape"])
    for name in ("multi_io", "fixed_shape"):
        config = read_config(exported_small / name / "config.pbtxt")
        assert recorded[name] == {k: v.string_value for k, v in config.parameters.items()}


@pytest.mark.parametrize(
    ("parameters", "wanted"),
    [
        ({}, spec.BackendRun()),
        ({"INTRA_OP_THREAD_COUNT": "1", "DISABLE_OPTIMIZED_EXECUTION": "false"}, spec.BackendRun(intra_op_threads=1)),
        ({"INTRA_OP_THREAD_COUNT": "0", "DISABLE_OPTIMIZED_EXECUTION": "True"}, spec.BackendRun(optimized=False)),
        ({"INTER_OP_THREAD_COUNT": " 12x", "DISABLE_OPTIMIZED_EXECUTION": "on"},
         spec.BackendRun(inter_op_threads=12, optimized=False)),
        ({"INTRA_OP_THREAD_COUNT": "-2", "INTER_OP_THREAD_COUNT": "many", "DISABLE_OPTIMIZED_EXECUTION": "maybe"},
         spec.BackendRun()),
        ({"INTRA_OP_THREAD_COUNT": "2147483648"}, spec.BackendRun()),  # std::stoi throws: the server aborts
        ({"INTRA_OP_THREAD_COUNT": "\uff13"}, spec.BackendRun()),  # a full-width 3 is no digit to std::stoi
    ],
)  # fmt: skip
def test_bench_tune_and_validate_read_the_backends_parameters_as_the_backend_does(
    exported_small: Path, parameters: dict[str, str], wanted: spec.BackendRun
) -> None:
    """std::stoi reads a leading number (" 12x" is 12), a count of 0 or less leaves torch's default, and
    ParseBoolValue takes true/on/1 in any case (pytorch_backend r25.10 src/libtorch.cc, ParseParameters)."""
    config = read_config(exported_small / "multi_io" / "config.pbtxt")
    config.ClearField("parameters")
    for key, value in parameters.items():
        config.parameters[key].string_value = value
    assert spec.BackendRun.of(config) == wanted


def test_a_config_with_a_latin1_byte_is_read_around_it_and_warned_about(
    repository_copy: Callable[..., Path],
) -> None:
    """Server 2.51.0 serves such a config (the differential suite's config_latin1_* mutations)."""
    folder = repository_copy("multi_io") / "multi_io"
    config = folder / "config.pbtxt"
    config.write_bytes(config.read_bytes() + b"# caf\xe9\n")
    problems = validate_model(ModelDir(root=folder))
    warning = _one(problems, "warning", "config.pbtxt")
    assert f"at byte {len(config.read_bytes()) - 2}" in warning.message
    assert [p for p in problems if p.severity == "error"] == []
    assert read_config(config).name == "multi_io"


@pytest.mark.parametrize(
    ("encode", "said"),
    [
        (lambda text: text.encode("utf-16"), "saved as UTF-16 or UTF-32"),
        (lambda text: b"\xef\xbb\xbf" + text.encode("utf-8"), "byte-order mark"),
    ],
    ids=["utf16", "utf8-bom"],
)
def test_a_config_saved_in_an_encoding_triton_refuses_is_an_error_naming_it(
    repository_copy: Callable[..., Path], encode: Callable[[str], bytes], said: str
) -> None:
    """Server 2.51.0 refuses both (the differential suite's config_utf16 and config_utf8_bom mutations)."""
    folder = repository_copy("multi_io") / "multi_io"
    config = folder / "config.pbtxt"
    config.write_bytes(encode(config.read_text(encoding="utf-8")))
    problems = validate_model(ModelDir(root=folder))
    assert said in _one(problems, "error", "config.pbtxt").message
    assert len(problems) == 1


def test_a_version_folder_beyond_int64_is_an_error_saying_the_server_aborts(
    repository_copy: Callable[..., Path],
) -> None:
    """Server 2.51.0 aborts reading such a folder (the differential suite's version_folder_beyond_int64)."""
    folder = repository_copy("multi_io") / "multi_io"
    (folder / "99999999999999999999").mkdir()
    problem = _one(validate_model(ModelDir(root=folder)), "error", "version folder")
    assert problem.path == folder / "99999999999999999999"
    assert "aborts (SIGABRT)" in problem.message


ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / reference.PAGE


def test_the_rule_reference_is_the_generators_output() -> None:
    """docs/reference/validator.md has one writer: the generator, from the rules' declarations."""
    assert REFERENCE.read_text(encoding="utf-8") == reference.render(), (
        f"{reference.PAGE} is stale: run `{reference.REGENERATE}` from the repository root and commit the page"
    )


def test_the_rule_reference_has_one_section_per_rule() -> None:
    """The rule book, its reference page and the differential mutations stay one to one (tests/differential holds
    the mutations to RULES); the README and the guide's "What validate catches" point at the page."""
    text = REFERENCE.read_text(encoding="utf-8")
    sections = re.findall(r"^### ([A-Z]\d{3})$", text, flags=re.MULTILINE)
    assert len(sections) == len(set(sections)), "a rule has two sections"
    assert set(sections) == set(RULES), (
        f"missing: {sorted(set(RULES) - set(sections))}, unknown: {sorted(set(sections) - set(RULES))}"
    )
    assert sections == sorted(sections, key=lambda code: ("RTCWMAEDP".index(code[0]), code)), (
        "sections out of the book's order"
    )
    for code, found in RULES.items():
        section = text.split(f"### {code}\n", 1)[1].split("\n### ", 1)[0]
        assert found.example in section, f"{code}'s example is not in its section"
    assert "](docs/reference/validator.md)" in (ROOT / "README.md").read_text(encoding="utf-8")
    guide = (ROOT / "docs/guide/your-model.md").read_text(encoding="utf-8")
    assert (
        "](../reference/validator.md)" in guide.split("## What validate catches\n", 1)[1].split("\n## ", 1)[0]
    )


def test_a_rule_needs_a_why_and_an_example() -> None:
    with pytest.raises(ValueError, match="needs a why and an example"):
        rules.rule("C999", "a rule with no documentation", why="", example="max_batch_size: 1")
    assert "C999" not in RULES
    assert all(r.why.strip() and r.example.strip() for r in RULES.values())


def test_the_reference_command_writes_and_checks_the_page(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page = tmp_path / "validator.md"
    assert reference.main(["--page", str(page), "--check"]) == 1
    assert reference.REGENERATE in capsys.readouterr().err
    assert reference.main(["--page", str(page)]) == 0
    assert page.read_text(encoding="utf-8") == reference.render()
    assert reference.main(["--page", str(page), "--check"]) == 0


def test_every_problem_names_its_rule(exported_small: Path, tmp_path: Path) -> None:
    repository = tmp_path / "repository"
    shutil.copytree(exported_small / "multi_io", repository / "multi_io")
    _edit(repository / "multi_io" / "config.pbtxt", r"^max_batch_size: \d+", "max_batch_size: -1")
    problems = validate_repository(repository, gpu_available=False)
    assert problems
    assert all(p.rule in RULES for p in problems)
    assert "[C005]" in _one(problems, "error", "max_batch_size").render()


class ListOfTensors(torch.nn.Module):
    def forward(self, features: torch.Tensor, context: torch.Tensor) -> list[torch.Tensor]:
        mixed = torch.tanh(features[:, :8] + context)
        return [mixed, mixed.sum(dim=1, keepdim=True)]


def test_a_model_that_returns_a_list_of_tensors_is_refused_as_the_backend_refuses_it(
    exported_small: Path, tmp_path: Path
) -> None:
    """pytorch_backend r25.10 serves a Tensor, a tuple, or List[str]; a List[Tensor] loads, then fails every
    inference (`output must be of type Tensor or List[str], received List[Tensor]`)."""
    repository = tmp_path / "repository"
    shutil.copytree(exported_small / "multi_io", repository / "multi_io")
    model = ModelDir(root=repository / "multi_io")
    traced = torch.jit.trace(ListOfTensors(), (torch.randn(2, 16), torch.randn(2, 8)), strict=False)  # type: ignore[no-untyped-call]
    traced.save(str(model.model_file()))
    problem = _one(validate_model(model, gpu_available=False), "error", "outputs")
    assert problem.rule == "M007"
    assert "received List[Tensor]" in problem.message


_PT2_CONFIG = """
name: "m_pt2"
platform: "torch_aoti"
max_batch_size: 8
input { name: "ARGS[0]" data_type: TYPE_FP32 dims: 4 }
output { name: "RESULT" data_type: TYPE_FP32 dims: 4 }
dynamic_batching { }
parameters { key: "INFERENCE_MODE" value { string_value: "maybe" } }
parameters { key: "INTRA_OP_THREAD_COUNT" value { string_value: "2" } }
parameters { key: "ENABLE_JIT_PROFILING" value { string_value: "true" } }
"""


@pytest.mark.parametrize("build", ["stock", "patched"])
def test_the_pt2_build_decides_which_rules_hold_a_pt2_config(tmp_path: Path, build: str) -> None:
    """Stock (NVIDIA's, NGC's): A005 and A007 guard its bugs and the C rules never see PT2 parameters; patched:
    dynamic batching is served and the parameters are read, so the C rules hold them with the PT2 path's keys."""
    from google.protobuf import text_format  # noqa: PLC0415
    from tritonclient.grpc.model_config_pb2 import ModelConfig  # noqa: PLC0415

    from tritonpt.validate import config as config_rules  # noqa: PLC0415
    from tritonpt.validate import pt2  # noqa: PLC0415
    from tritonpt.validate.rules import Findings  # noqa: PLC0415

    model = ModelDir(root=tmp_path / "m_pt2")
    config = text_format.Parse(_PT2_CONFIG, ModelConfig())
    findings = Findings()
    config_rules.check(model, config, findings, gpu_available=False, pt2_build=build)
    pt2.check_config(model, config, findings, pt2_build=build)
    found = {(p.rule, p.severity, p.field) for p in findings}
    if build == "stock":
        assert found == {("A005", "error", "dynamic_batching"), ("A007", "warning", "parameters")}
    else:
        # ENABLE_JIT_PROFILING: a TorchScript-only key, which the PT2 path ignores
        assert found == {
            ("C017", "error", "parameters INFERENCE_MODE"),
            ("C020", "warning", "parameters ENABLE_JIT_PROFILING"),
        }
        [refused] = [p for p in findings if p.rule == "C017"]
        assert "the PT2 path refuses to load the model" in refused.message


@pytest.mark.parametrize("build", ["stock", "patched"])
def test_bf16_on_a_pt2_model_is_its_own_rule_naming_the_release_that_serves_it(
    tmp_path: Path, build: str
) -> None:
    """A013, not C009: r26.05's PT2 path maps no BF16 type (both builds); Triton 26.11's notes state it serves
    them. The TorchScript refusal (C009) stays as it was."""
    from google.protobuf import text_format  # noqa: PLC0415
    from tritonclient.grpc.model_config_pb2 import ModelConfig  # noqa: PLC0415

    from tritonpt.validate import config as config_rules  # noqa: PLC0415
    from tritonpt.validate import pt2  # noqa: PLC0415
    from tritonpt.validate.rules import Findings  # noqa: PLC0415

    model = ModelDir(root=tmp_path / "m_pt2")
    text = _PT2_CONFIG.replace('"RESULT" data_type: TYPE_FP32', '"RESULT" data_type: TYPE_BF16')
    text = text.replace("dynamic_batching { }", "").split("parameters")[0]
    config = text_format.Parse(text, ModelConfig())
    findings = Findings()
    config_rules.check(model, config, findings, gpu_available=False, pt2_build=build)
    pt2.check_config(model, config, findings, pt2_build=build)
    [problem] = list(findings)
    assert (problem.rule, problem.severity, problem.field) == ("A013", "error", "output 'RESULT' data_type")
    assert "Unsupported datatype TYPE_BF16" in problem.message
    assert "Triton 26.11 and later serve" in problem.message
    assert "tritonpt doctor --ngc 26.11" in problem.fix


@pytest.mark.parametrize(
    ("dims", "shape", "batching", "refusal"),
    [
        ([2, 4, -1, 6], [8, -1, 1, 6], True, None),  # core's own example of a valid reshape
        ([1], [], True, None),
        ([1], [], False, "cannot have empty reshape for non-batching model"),
        ([4, 4], [15], True, "has different size for dims and reshape"),
        ([4, -1], [-1, 4], True, "has different size for dims and reshape"),
        ([4, -1], [4, -1, -1], True, "has different number of variable-size dimensions"),
        ([16], [0, 16], True, "reshape dimensions must be integer >= 1"),
    ],
)
def test_a_reshape_is_refused_where_core_refuses_it_and_fills_the_models_variable_axes(
    dims: list[int], shape: list[int], batching: bool, refusal: str | None
) -> None:
    """core r24.10 src/model_config_utils.cc (ValidateIOShape) and src/infer_request.cc (the reshape it applies)."""
    tensor = ModelInput(name="INPUT__0", dims=dims)
    tensor.reshape.SetInParent()
    tensor.reshape.shape.extend(shape)
    said = rules.reshape_refusal(tensor, batching=batching)
    assert (said is None) if refusal is None else (said is not None and said.startswith(refusal)), said
    if refusal is None:
        client = [3 if d == -1 else d for d in dims]
        assert rules.model_shape(tensor, client) == [3 if d == -1 else d for d in shape]
        assert rules.model_dims(tensor) == shape
