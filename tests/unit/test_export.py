"""Export with real torch: files written, config derived from the real model, reference data, failures."""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

import numpy as np
import pytest
import torch
from tritonclient.grpc.model_config_pb2 import DataType, ModelInstanceGroup

from tritonpt import assertions, export, reference, spec
from tritonpt.errors import ExportError, SpecError
from tritonpt.repository import ModelDir, read_config

from ..helpers import SMALL_MODELS


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_layout_of_each_exported_model(exported_small: Path) -> None:
    for name in SMALL_MODELS:
        model = ModelDir(root=exported_small / name)
        assert model.config.is_file()
        assert model.model_file().is_file()
        assert reference.exists(model)
        assert model.versions() == ["1"]
    # Nothing else (no staging folders) is left in the repository.
    assert sorted(p.name for p in exported_small.iterdir()) == sorted(SMALL_MODELS)


def test_config_reflects_the_real_model(exported_small: Path) -> None:
    config = read_config(exported_small / "token_encoder" / "config.pbtxt")
    assert config.name == "token_encoder"
    assert config.platform == "pytorch_libtorch"
    assert config.max_batch_size == 8
    [tokens] = config.input
    assert (tokens.name, DataType.Name(tokens.data_type), list(tokens.dims)) == (
        "INPUT__0",
        "TYPE_INT64",
        [-1],
    )
    # Per-token logits follow the variable axis; the pooled vector does not.
    assert [(o.name, DataType.Name(o.data_type), list(o.dims)) for o in config.output] == [
        ("OUTPUT__0", "TYPE_FP32", [-1, 4]),
        ("OUTPUT__1", "TYPE_FP32", [32]),
    ]
    assert config.dynamic_batching.max_queue_delay_microseconds == export.MAX_QUEUE_DELAY_US
    assert [ModelInstanceGroup.Kind.Name(g.kind) for g in config.instance_group] == ["KIND_AUTO"]
    assert config.parameters["INFERENCE_MODE"].string_value == "true"
    assert config.parameters["DISABLE_OPTIMIZED_EXECUTION"].string_value == "true"


def test_forward_argument_names_and_two_outputs(exported_small: Path) -> None:
    config = read_config(exported_small / "multi_io" / "config.pbtxt")
    assert [(i.name, list(i.dims)) for i in config.input] == [("features", [16]), ("context", [8])]
    assert [(o.name, list(o.dims)) for o in config.output] == [("OUTPUT__0", [8]), ("OUTPUT__1", [1])]


def test_scripted_model_keeps_bool_and_int_outputs(exported_small: Path) -> None:
    config = read_config(exported_small / "scripted_gate" / "config.pbtxt")
    assert [DataType.Name(o.data_type) for o in config.output] == ["TYPE_FP32", "TYPE_BOOL", "TYPE_INT32"]
    ref = reference.load(ModelDir(root=exported_small / "scripted_gate"))
    assert ref.provenance.method == "script"
    assert [o.cpu_tolerance for o in ref.outputs][1:] == [spec.Tolerance.exact(), spec.Tolerance.exact()]


def test_no_batch_axis_model(exported_small: Path) -> None:
    config = read_config(exported_small / "fixed_shape" / "config.pbtxt")
    assert config.max_batch_size == 0
    assert not config.HasField("dynamic_batching")
    assert list(config.input[0].dims) == [4, 10]
    assert list(config.output[0].dims) == [4, 3]


def test_reference_outputs_are_eager_outputs_of_the_saved_model(exported_small: Path) -> None:
    model = ModelDir(root=exported_small / "multi_io")
    ref = reference.load(model)
    assert [c.id for c in ref.cases] == ["b1", "b16"]
    assert ref.provenance.torch_version == torch.__version__
    assert ref.provenance.device == "cpu"
    loaded = torch.jit.load(str(model.model_file()))
    for case in ref.cases:
        assert case.inputs[0].shape == (case.batch_size, 16)
        outputs = [o.detach().numpy() for o in loaded(*(torch.from_numpy(a) for a in case.inputs))]
        failures = assertions.mismatches(
            assertions.compare_outputs(ref.outputs, outputs, case.outputs, gpu=False)
        )
        assert not failures, "\n".join(failures)


def test_variable_axis_gets_a_case_of_another_length(exported_small: Path) -> None:
    ref = reference.load(ModelDir(root=exported_small / "token_encoder"))
    lengths = {case.id: case.inputs[0].shape[1] for case in ref.cases}
    assert lengths == {"b1": 12, "b8": 12, "b8-len6": 6}
    assert ref.case("b8-len6").outputs[0].shape == (8, 6, 4)
    # int64 inputs stay inside the range of the example input (valid embedding ids).
    assert all(case.inputs[0].min() >= 0 and case.inputs[0].max() < 1000 for case in ref.cases)


def test_reexport_with_same_seed_is_byte_identical(tmp_path: Path, exported_small: Path) -> None:
    again = tmp_path / "again"
    export.export_builtin(SMALL_MODELS, repository=again)
    for name in SMALL_MODELS:
        for file in ("config.pbtxt", "reference.json", "reference.npz"):
            assert _digest(again / name / file) == _digest(exported_small / name / file), f"{name}/{file}"


def test_another_seed_gives_other_reference_inputs(tmp_path: Path, exported_small: Path) -> None:
    export.export_builtin(["multi_io"], repository=tmp_path, seed=1)
    first = reference.load(ModelDir(root=exported_small / "multi_io")).cases[0].inputs[0]
    other = reference.load(ModelDir(root=tmp_path / "multi_io")).cases[0].inputs[0]
    assert not np.array_equal(first, other)


class Branchy(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if bool(x.sum() > 0):
            return x * 2
        return x - 100


def test_tracing_data_dependent_control_flow_fails_with_a_hint(tmp_path: Path) -> None:
    # A positive example input freezes the `x * 2` branch; the reference cases hit the other branch.
    model = spec.ModelSpec(
        name="branchy", module=Branchy(), example_inputs=(torch.ones(1, 64),), max_batch_size=4
    )
    with pytest.raises(ExportError, match="disagrees with eager") as info:
        export.export(model, repository=tmp_path, seed=3)
    assert "--script" in str(info.value)
    # torch.export cannot make one graph of a branch on the data either, and the refusal says so.
    assert "PT2 would not serve it either, tried just now: torch.export failed" in str(info.value)
    assert list(tmp_path.iterdir()) == []  # nothing half-written


def test_scripting_the_same_model_succeeds(tmp_path: Path) -> None:
    model = spec.ModelSpec(
        name="branchy",
        module=Branchy(),
        example_inputs=(torch.ones(1, 64),),
        max_batch_size=4,
        method="script",
    )
    export.export(model, repository=tmp_path, seed=3)
    assert (tmp_path / "branchy" / "1" / "model.pt").is_file()


class DictWithCount(torch.nn.Module):
    """A dict with a number beside the tensor: nothing the backend can return for it."""

    def forward(self, x: torch.Tensor) -> dict[str, object]:
        return {"y": x, "count": 3}


class KeysByBatch(torch.nn.Module):
    """A key that is there for some inputs only: a structure that depends on the data."""

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        found = {"y": x}
        if x.shape[0] > 1:
            found["extra"] = x * 2
        return found


class ScalarOut(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.sum()


class NotBatched(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.sum(dim=0)


@pytest.mark.parametrize(
    ("module", "inputs", "error", "words"),
    [
        pytest.param(
            DictWithCount(),
            (torch.ones(1, 3),),
            SpecError,
            "count in it is of type int",
            id="dict-with-a-number",
        ),
        pytest.param(
            KeysByBatch(), (torch.ones(1, 3),), SpecError, "changes with its inputs", id="keys-by-batch"
        ),
        pytest.param(ScalarOut(), (torch.ones(1, 3),), SpecError, "0-d scalar", id="scalar-output"),
        pytest.param(
            torch.nn.Identity(), (torch.ones(1, 3, dtype=torch.bfloat16),), SpecError, "bfloat16", id="bf16"
        ),
        pytest.param(
            torch.nn.Identity(), (torch.ones(1, 3, dtype=torch.uint32),), SpecError, "uint32", id="uint32"
        ),
        pytest.param(NotBatched(), (torch.ones(2, 3),), ExportError, "batch axis", id="no-batch-axis"),
    ],
)
def test_unservable_models_are_refused_before_anything_is_written(
    tmp_path: Path,
    module: torch.nn.Module,
    inputs: tuple[torch.Tensor, ...],
    error: type[Exception],
    words: str,
) -> None:
    model = spec.ModelSpec(name="bad", module=module, example_inputs=inputs)
    with pytest.raises(error, match=words):
        export.export(model, repository=tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_failed_reexport_keeps_the_previous_model(repository_copy) -> None:
    repository = repository_copy("multi_io")
    before = _digest(repository / "multi_io" / "reference.npz")
    broken = spec.ModelSpec(name="multi_io", module=DictWithCount(), example_inputs=(torch.ones(1, 3),))
    with pytest.raises(SpecError):
        export.export(broken, repository=repository)
    assert _digest(repository / "multi_io" / "reference.npz") == before
    assert sorted(p.name for p in repository.iterdir()) == ["multi_io"]


def test_spec_rejects_bad_options() -> None:
    base = spec.ModelSpec(name="m", module=torch.nn.Identity(), example_inputs=(torch.ones(1, 3),))
    with pytest.raises(SpecError, match="out of range"):
        spec.check(spec.ModelSpec(**{**base.__dict__, "dynamic_axes": {0: (0,)}}))
    with pytest.raises(SpecError, match="unknown backend parameter"):
        spec.check(spec.ModelSpec(**{**base.__dict__, "parameters": {"ENABLE_NVFUSER": "true"}}))
    with pytest.raises(SpecError, match="letters, digits"):
        spec.check(spec.ModelSpec(**{**base.__dict__, "name": "a/b"}))
    with pytest.raises(SpecError, match=r"expected `\(torch.nn.Module"):
        spec.coerce(torch.ones(3), name="m")


class InPlace(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x.add_(1)  # changes its input, as some users' preprocessing does
        return x * 2


def test_a_model_that_changes_its_input_in_place_records_the_inputs_its_reference_outputs_are_of(
    tmp_path: Path,
) -> None:
    """Eager and the reloaded TorchScript each ran on the same tensors, so the recorded inputs were the changed
    ones and the TorchScript check failed, blaming the tracer."""
    example = torch.randn(2, 3)
    before = example.clone()
    model = spec.ModelSpec(name="in_place", module=InPlace(), example_inputs=(example,), max_batch_size=4)
    result = export.export(model, repository=tmp_path)
    assert torch.equal(example, before)  # the user's example inputs are left as they were
    cases = reference.load(result.model).cases
    assert len(cases) >= 2
    for case in cases:
        np.testing.assert_allclose(case.outputs[0], (case.inputs[0] + 1) * 2, rtol=1e-6)


class PerSample(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x * 2, x.sum(dim=1)  # the second: one value a sample, shape [batch]


def test_one_value_a_sample_is_served_as_batch_by_1_and_an_input_of_one_is_refused(tmp_path: Path) -> None:
    """Triton refuses a config tensor without dims (C022), with a batch axis too; export said "valid" and wrote
    one (found serving models the set does not hold). An output of one value a sample is declared dims [ 1 ] with
    reshape { shape: [ ] }, which Triton's core answers as [batch, 1] (tests/differential: served)."""
    model = spec.ModelSpec(
        name="per_sample", module=PerSample(), example_inputs=(torch.randn(2, 3),), max_batch_size=4
    )
    result = export.export(model, repository=tmp_path)
    config = read_config(result.model.config)
    assert [list(o.dims) for o in config.output] == [[3], [1]]
    assert [o.HasField("reshape") for o in config.output] == [False, True]
    assert list(config.output[1].reshape.shape) == []
    for case in reference.load(result.model).cases:
        assert case.outputs[1].shape == (case.batch_size, 1)
        np.testing.assert_allclose(case.outputs[1][:, 0], case.inputs[0].sum(axis=1), rtol=1e-5)
    taking = spec.ModelSpec(
        name="takes", module=torch.nn.Identity(), example_inputs=(torch.randn(2),), max_batch_size=4
    )
    with pytest.raises(SpecError, match=r"input 0: shape \[2\] is one value a sample") as info:
        export.export(taking, repository=tmp_path)
    assert "[2, 1]" in str(info.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["per_sample"]
    # without a batch axis the same tensors have dims, and no reshape
    served = export.export(dataclasses.replace(model, name="whole", max_batch_size=0), repository=tmp_path)
    assert not any(o.HasField("reshape") for o in read_config(served.model.config).output)


def test_an_unchanged_builtin_is_kept_and_a_changed_one_exported_again(tmp_path: Path) -> None:
    first = export.export_builtin(["multi_io"], repository=tmp_path)
    assert not first[0].kept
    model = ModelDir(root=tmp_path / "multi_io")
    written = model.model_file().stat().st_mtime_ns
    again = export.export_builtin(["multi_io"], repository=tmp_path)
    assert again[0].kept
    assert model.model_file().stat().st_mtime_ns == written  # nothing was written
    # Another seed, an edited file, a removed file, or --force: exported again.
    assert not export.export_builtin(["multi_io"], repository=tmp_path, seed=1)[0].kept
    assert not export.export_builtin(["multi_io"], repository=tmp_path)[0].kept  # back to seed 0
    model.config.write_text(model.config.read_text(encoding="utf-8") + "# edited\n", encoding="utf-8")
    assert not export.export_builtin(["multi_io"], repository=tmp_path)[0].kept
    assert "# edited" not in model.config.read_text(encoding="utf-8")
    (model.root / "warmup" / "features").unlink()
    assert not export.export_builtin(["multi_io"], repository=tmp_path)[0].kept
    assert (model.root / "warmup" / "features").is_file()
    assert not export.export_builtin(["multi_io"], repository=tmp_path, force=True)[0].kept


def test_export_writes_a_warmup_of_one_reference_sample(exported_small: Path) -> None:
    model = ModelDir(root=exported_small / "multi_io")
    config = read_config(model.config)
    ref = reference.load(model)
    smallest = min(ref.cases, key=lambda c: c.batch_size)
    (warmup,) = config.model_warmup
    assert warmup.batch_size == 1
    assert warmup.count == export.WARMUP_COUNT
    assert sorted(warmup.inputs) == sorted(t.name for t in config.input)
    for tensor, array in zip(config.input, smallest.inputs, strict=True):
        entry = warmup.inputs[tensor.name]
        assert list(entry.dims) == list(array.shape[1:])
        assert entry.data_type == tensor.data_type
        assert (model.root / "warmup" / entry.input_data_file).read_bytes() == array[:1].tobytes()


def test_a_pt2_config_carries_dynamic_batching_only_for_the_patched_build() -> None:
    """The stock PT2 path returns a merged batch to every request (docs/upstream/pt2-dynamic-batching.md); our
    patched build splits it, so export writes dynamic_batching for it as for TorchScript. Parameters never."""
    from tritonpt.export import pt2 as pt2_export  # noqa: PLC0415

    model_spec = spec.coerce((torch.nn.Linear(4, 2), (torch.randn(1, 4),)), name="lin")
    assert model_spec.dynamic_batching
    assert model_spec.parameters
    stock = pt2_export.as_written(model_spec)
    patched = pt2_export.as_written(model_spec, "patched")
    assert (stock.dynamic_batching, patched.dynamic_batching) == (False, True)
    assert stock.parameters == patched.parameters == {}
