"""A model's own file run in-process (tritonpt.in_process), with real torch: the inputs it is run on, the backend's
mapping of names, the reference it makes, and the models it refuses (rows mixed, a batch size baked in)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from tritonclient.grpc import model_config_pb2 as mc

from tritonpt import in_process, spec
from tritonpt.errors import InProcessError
from tritonpt.repository import ModelDir, read_config


def _folder(
    tmp_path: Path, module: torch.nn.Module, example: tuple[torch.Tensor, ...], config: str
) -> ModelDir:
    """A model folder as a team writes one: a traced file and a config by hand, no reference data."""
    model = ModelDir(root=tmp_path / "repository" / "m")
    (model.root / "1").mkdir(parents=True)
    traced = torch.jit.trace(module, example)  # type: ignore[no-untyped-call]
    traced.save(str(model.root / "1" / "model.pt"))
    model.config.write_text('name: "m"\nplatform: "pytorch_libtorch"\n' + config, encoding="utf-8")
    return model


class Affine(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.linear = torch.nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x)


AFFINE = (
    'max_batch_size: 4\ninput [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
    'output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 3 ] } ]\n'
)


def test_generated_inputs_follow_the_config() -> None:
    config = mc.ModelConfig(name="m", max_batch_size=16)
    for index, (kind, dims) in enumerate(
        [(mc.TYPE_FP16, [2]), (mc.TYPE_INT64, [-1]), (mc.TYPE_BOOL, [1]), (mc.TYPE_UINT8, [3, -1])]
    ):
        config.input.add(name=f"INPUT__{index}", data_type=kind, dims=dims)
    given = in_process.generate(config, path=Path("m/config.pbtxt"))
    assert given.what == in_process.GENERATED
    assert len(given.rows) == in_process.GENERATED_ROWS  # 8 distinct samples; the batch of 16 repeats them
    floats, ids, flags, pixels = zip(*given.rows, strict=True)
    assert {a.dtype for a in floats} == {np.dtype(np.float16)}
    assert {a.shape for a in ids} == {(in_process.VARIABLE_LENGTH,)}
    assert set(np.unique(np.concatenate(ids))) <= {0, 1}  # ids and masks take them
    assert [bool(f[0]) for f in flags[:2]] == [True, False]  # booleans both ways
    assert {a.shape for a in pixels} == {(3, in_process.VARIABLE_LENGTH)}
    unbatched = mc.ModelConfig(name="m", max_batch_size=0)
    unbatched.input.add(name="INPUT__0", data_type=mc.TYPE_FP32, dims=[2, 2])
    assert len(in_process.generate(unbatched, path=Path("c")).rows) == 1


def test_a_type_no_input_can_be_generated_for_asks_for_samples() -> None:
    config = mc.ModelConfig(name="m", max_batch_size=0)
    config.input.add(name="TEXT", data_type=mc.TYPE_STRING, dims=[1])
    with pytest.raises(InProcessError, match=r"TYPE_STRING.*samples\.npz"):
        in_process.generate(config, path=Path("m/config.pbtxt"))


def test_the_reference_is_the_file_at_batch_1_and_the_largest_batch(tmp_path: Path) -> None:
    model = _folder(tmp_path, Affine(), (torch.randn(2, 4),), AFFINE)
    config = read_config(model.config)
    ref = in_process.reference_of(model, config)
    assert [(c.id, c.batch_size) for c in ref.cases] == [("b1", 1), ("b4", 4)]
    module = torch.jit.load(str(model.root / "1" / "model.pt"))
    for case in ref.cases:
        (expected,) = [module(torch.from_numpy(case.inputs[0])).detach().numpy()]
        np.testing.assert_array_equal(case.outputs[0], expected)
    assert ref.provenance.source == "in-process"
    assert ref.provenance.held_to().startswith(f"its own file in-process (torch {torch.__version__})")
    assert ref.outputs[0].cpu_tolerance == spec.tolerance_for("TYPE_FP32")
    assert not (model.root / "reference.json").exists()  # a check writes nothing into the team's repository


class MixesRows(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x - x.mean(0, keepdim=True)


class BakedBatch(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.reshape(4, -1) * 2  # the trace keeps 4


@pytest.mark.parametrize(
    ("module", "words"),
    [
        (MixesRows(), "row 0 of a batch of 4 differs from the same sample run alone"),
        (
            BakedBatch(),
            "fails on sample 0 of the inputs generated from config.pbtxt (INPUT__0 [1, 3] float32): ",
        ),
    ],
    ids=["mixes-rows", "baked-batch"],
)
def test_a_file_whose_rows_are_not_its_own_is_refused_with_the_models_words(
    tmp_path: Path, module: torch.nn.Module, words: str
) -> None:
    config = AFFINE.replace("dims: [ 4 ]", "dims: [ 3 ]")
    model = _folder(tmp_path, module, (torch.randn(4, 3),), config)
    with pytest.raises(InProcessError) as refused:
        in_process.reference_of(model, read_config(model.config))
    said = str(refused.value)
    assert words in said
    assert said.startswith(str(model.root / "1" / "model.pt"))
    assert "Hint:" in said


class TwoInTwoOut(torch.nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return a * 2, b + 1


def test_names_are_mapped_as_the_backend_maps_them(tmp_path: Path) -> None:
    """Inputs by forward()'s argument name or <name>__<index>, outputs by <name>__<index>, whatever the config's
    order."""
    config = (
        "max_batch_size: 2\n"
        'input [ { name: "INPUT__1" data_type: TYPE_FP32 dims: [ 3 ] }, { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 2 ] } ]\n'
        'output [ { name: "OUTPUT__1" data_type: TYPE_FP32 dims: [ 3 ] }, { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 2 ] } ]\n'
    )
    model = _folder(tmp_path, TwoInTwoOut(), (torch.randn(1, 2), torch.randn(1, 3)), config)
    own = in_process.OwnFile.load(model, read_config(model.config))
    b, a = np.ones((1, 3), np.float32), np.full((1, 2), 5, np.float32)
    first, second = own.run([b, a])  # config order: INPUT__1 (b), INPUT__0 (a); OUTPUT__1 (b + 1), OUTPUT__0
    np.testing.assert_array_equal(first, b + 1)
    np.testing.assert_array_equal(second, a * 2)
    named = config.replace("INPUT__1", "b").replace("INPUT__0", "a")
    model = _folder(tmp_path / "named", TwoInTwoOut(), (torch.randn(1, 2), torch.randn(1, 3)), named)
    first, second = in_process.OwnFile.load(model, read_config(model.config)).run([b, a])
    np.testing.assert_array_equal(first, b + 1)


class PerSample(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.sum(dim=1)  # [batch]


def test_an_output_with_a_reshape_is_as_triton_serves_it(tmp_path: Path) -> None:
    config = (
        'max_batch_size: 4\ninput [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 3 ] } ]\n'
        'output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 1 ] reshape { shape: [ ] } } ]\n'
    )
    model = _folder(tmp_path, PerSample(), (torch.randn(2, 3),), config)
    ref = in_process.reference_of(model, read_config(model.config))
    assert [c.outputs[0].shape for c in ref.cases] == [(1, 1), (4, 1)]


def _samples_config() -> mc.ModelConfig:
    config = mc.ModelConfig(name="m", max_batch_size=4)
    config.input.add(name="INPUT__0", data_type=mc.TYPE_FP32, dims=[4])
    config.output.add(name="OUTPUT__0", data_type=mc.TYPE_FP32, dims=[3])
    return config


def test_a_teams_samples_are_used_instead_and_held_to_the_config(tmp_path: Path) -> None:
    model = _folder(tmp_path, Affine(), (torch.randn(2, 4),), AFFINE)
    rows = np.arange(8, dtype=np.float32).reshape(2, 4)
    np.savez(model.root / in_process.SAMPLES, INPUT__0=rows)
    ref = in_process.reference_of(model, read_config(model.config))
    assert ref.provenance.samples == in_process.SAMPLES
    np.testing.assert_array_equal(ref.cases[0].inputs[0], rows[:1])
    np.testing.assert_array_equal(
        ref.cases[1].inputs[0], rows[[0, 1, 0, 1]]
    )  # the largest batch repeats them


@pytest.mark.parametrize(
    ("arrays", "field", "words"),
    [
        ({"x": np.zeros((2, 4), np.float32)}, "arrays", "the config's inputs are ['INPUT__0']"),
        (
            {"INPUT__0": np.zeros((2, 4), np.float64)},
            "array 'INPUT__0'",
            "float64; the config declares TYPE_FP32",
        ),
        ({"INPUT__0": np.zeros((2, 5), np.float32)}, "array 'INPUT__0'", "must fit the config's dims [4]"),
        ({"INPUT__0": np.zeros((0, 4), np.float32)}, "arrays", "or none"),
    ],
    ids=["names", "type", "shape", "empty"],
)
def test_samples_that_do_not_fit_the_config_are_refused_naming_the_file(
    tmp_path: Path, arrays: dict[str, np.ndarray], field: str, words: str
) -> None:
    path = tmp_path / in_process.SAMPLES
    np.savez(path, **arrays)
    with pytest.raises(InProcessError) as refused:
        in_process.read_samples(path, _samples_config())
    assert refused.value.path == path
    assert refused.value.field == field
    assert words in refused.value.detail


def test_a_samples_file_that_is_not_an_npz_is_refused(tmp_path: Path) -> None:
    path = tmp_path / in_process.SAMPLES
    path.write_text("not numpy", encoding="utf-8")
    with pytest.raises(InProcessError, match=r"cannot be read as a numpy \.npz archive"):
        in_process.read_samples(path, _samples_config())


def test_a_config_naming_a_file_that_is_not_there_is_refused(tmp_path: Path) -> None:
    model = _folder(tmp_path, Affine(), (torch.randn(2, 4),), AFFINE + 'default_model_filename: "other.pt"\n')
    with pytest.raises(
        InProcessError, match=r"the config names other\.pt in version 1, and there is no such file"
    ):
        in_process.OwnFile.load(model, read_config(model.config))


def test_the_version_triton_loads_is_the_one_run(tmp_path: Path) -> None:
    """version_policy specific [1] with folders 1 and 2: Triton serves 1, so 1 is the reference."""
    model = _folder(
        tmp_path, Affine(), (torch.randn(2, 4),), AFFINE + "version_policy { specific { versions: [ 1 ] } }\n"
    )
    (model.root / "2").mkdir()
    torch.jit.trace(MixesRows(), torch.randn(4, 4)).save(str(model.root / "2" / "model.pt"))  # type: ignore[no-untyped-call]
    assert in_process.OwnFile.load(model, read_config(model.config)).path == model.root / "1" / "model.pt"
    in_process.reference_of(model, read_config(model.config))  # version 2 would mix rows; version 1 does not


class Logs(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log(x)  # NaN where the generated normal values are negative


def test_nan_where_both_have_it_is_the_same_answer(tmp_path: Path) -> None:
    model = _folder(tmp_path, Logs(), (torch.rand(2, 4),), AFFINE.replace("dims: [ 3 ]", "dims: [ 4 ]"))
    ref = in_process.reference_of(model, read_config(model.config))
    assert np.isnan(ref.cases[1].outputs[0]).any()


def test_string_tensors_have_no_in_process_reference() -> None:
    config = mc.ModelConfig(name="m", max_batch_size=0)
    config.input.add(name="INPUT__0", data_type=mc.TYPE_FP32, dims=[2])
    config.output.add(name="OUTPUT__0", data_type=mc.TYPE_FP32, dims=[2])
    assert in_process.numeric(config)
    config.output.add(name="OUTPUT__1", data_type=mc.TYPE_STRING, dims=[1])
    assert not in_process.numeric(config)  # the matrix names it as not checked, as before
