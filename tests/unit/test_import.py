"""`export --from-file`: a TorchScript file made elsewhere becomes a model folder as export writes one (the file as
it was given, the config from what it takes and returns, reference data from it in-process); what it cannot
describe or run is refused in one paragraph, with nothing written. (PT2 packages: tests/system/test_own_files.py.)"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest
import torch

from tritonpt import in_process, reference, validate
from tritonpt.errors import ExportError, ValidationError
from tritonpt.export.imported import import_file
from tritonpt.repository import ModelDir, read_config


class TwoHeads(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.body = torch.nn.Linear(6, 4)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        hidden = self.body(x * mask)
        return hidden, hidden.sum(dim=1)  # the second: one value a sample


def _file(tmp_path: Path, module: torch.nn.Module, *example: torch.Tensor) -> Path:
    path = tmp_path / "made-elsewhere" / "model.pt"
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.jit.trace(module, example).save(str(path))  # type: ignore[no-untyped-call]
    return path


def _samples(tmp_path: Path, **arrays: np.ndarray) -> Path:
    path = tmp_path / "inputs.npz"
    np.savez(path, **arrays)
    return path


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


ROWS = np.random.default_rng(0).standard_normal((3, 6)).astype(np.float32)


def test_a_torchscript_file_becomes_a_model_folder(tmp_path: Path) -> None:
    path = _file(tmp_path, TwoHeads(), torch.randn(2, 6), torch.ones(2, 6))
    samples = _samples(tmp_path, x=ROWS, mask=np.ones((3, 6), np.float32))  # by forward()'s argument names
    result = import_file(path, name="heads", repository=tmp_path / "repository", samples=samples)
    model = ModelDir(root=tmp_path / "repository" / "heads")
    assert result.model == model
    assert _digest(model.root / "1" / "model.pt") == _digest(path)  # the file as it was given
    config = read_config(model.config)
    assert [(t.name, list(t.dims)) for t in config.input] == [("INPUT__0", [6]), ("INPUT__1", [6])]
    assert [(t.name, list(t.dims), t.HasField("reshape")) for t in config.output] == [
        ("OUTPUT__0", [4], False),
        ("OUTPUT__1", [1], True),  # [batch] served as [batch, 1]
    ]
    assert config.max_batch_size == 8
    assert config.HasField("dynamic_batching")
    ref = reference.load(model)
    assert ref.provenance.source == "in-process"
    assert ref.provenance.samples == in_process.SAMPLES
    assert [c.batch_size for c in ref.cases] == [1, 8]
    module = torch.jit.load(str(path))
    first, second = module(torch.from_numpy(ROWS[:1]), torch.ones(1, 6))
    np.testing.assert_array_equal(ref.cases[0].outputs[0], first.detach().numpy())
    np.testing.assert_array_equal(ref.cases[0].outputs[1], second.detach().numpy()[:, None])
    kept = np.load(model.root / in_process.SAMPLES)
    assert sorted(kept.files) == ["INPUT__0", "INPUT__1"]  # the team's inputs, named as the config names them
    assert not [p for p in validate.validate_repository(model.root.parent) if p.severity == "error"]


class Baked(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.reshape(4, -1).relu()  # the trace keeps the 4 it saw


def test_a_file_without_a_batch_axis_is_served_without_one_and_said_so(tmp_path: Path) -> None:
    path = _file(tmp_path, Baked(), torch.randn(4, 3))
    samples = _samples(tmp_path, INPUT__0=np.ones((4, 3), np.float32))
    result = import_file(path, name="baked", repository=tmp_path / "repository", samples=samples)
    config = read_config(result.model.config)
    assert config.max_batch_size == 0
    assert list(config.input[0].dims) == [4, 3]
    assert any("served without a batch axis" in note and "fails at batch 1" in note for note in result.notes)
    with pytest.raises(ExportError, match="--max-batch-size 8 asks for a batch axis, and the file has none"):
        import_file(path, name="again", repository=tmp_path / "repository", samples=samples, max_batch_size=8)
    assert not (tmp_path / "repository" / "again").exists()


def test_without_samples_it_asks_for_them_naming_the_inputs(tmp_path: Path) -> None:
    path = _file(tmp_path, TwoHeads(), torch.randn(2, 6), torch.ones(2, 6))
    with pytest.raises(ExportError) as refused:
        import_file(path, name="heads", repository=tmp_path / "repository")
    said = str(refused.value)
    assert "give its inputs with --samples FILE.npz" in said
    assert "INPUT__0 (or x), INPUT__1 (or mask)" in said
    assert not (tmp_path / "repository").exists()


@pytest.mark.parametrize(
    ("arrays", "words"),
    [
        ({"x": ROWS}, "it has no array for input INPUT__1"),
        ({"x": ROWS, "mask": np.ones((2, 6), np.float32)}, "different numbers of samples ([3, 2])"),
        ({"x": ROWS, "mask": np.ones((3, 6), np.float32), "extra": ROWS}, "arrays for no input of the file"),
        ({"x": ROWS, "mask": np.ones((3, 5), np.float32)}, "fails on its example inputs"),
    ],
    ids=["missing", "counts", "extra", "wrong-shape"],
)
def test_samples_that_do_not_fit_the_file_are_refused_naming_the_file(
    tmp_path: Path, arrays: dict[str, np.ndarray], words: str
) -> None:
    path = _file(tmp_path, TwoHeads(), torch.randn(2, 6), torch.ones(2, 6))
    samples = _samples(tmp_path, **arrays)
    with pytest.raises(ExportError) as refused:
        import_file(path, name="heads", repository=tmp_path / "repository", samples=samples)
    assert words in str(refused.value)
    assert str(samples) in str(refused.value) or str(path) in str(refused.value)
    assert not (tmp_path / "repository").exists()


def test_a_file_that_is_no_model_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "weights.pt"
    torch.save({"weight": torch.zeros(3)}, path)  # a state_dict, not a model
    with pytest.raises(ExportError, match=r"neither a TorchScript file .* nor an AOTInductor package"):
        import_file(path, name="w", repository=tmp_path / "repository", samples=_samples(tmp_path, x=ROWS))
    assert not (tmp_path / "repository").exists()


class PerSampleInput(torch.nn.Module):
    def forward(self, x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        return x * scale.unsqueeze(-1)


def test_an_input_of_one_value_a_sample_is_refused_as_the_validator_refuses_it(tmp_path: Path) -> None:
    """scale is [batch]: no dims after the batch axis, which Triton refuses (C022); the staged folder goes."""
    path = _file(tmp_path, PerSampleInput(), torch.randn(2, 3), torch.ones(2))
    samples = _samples(tmp_path, x=np.ones((2, 3), np.float32), scale=np.ones(2, np.float32))
    with pytest.raises(ValidationError, match="C022"):
        import_file(path, name="scaled", repository=tmp_path / "repository", samples=samples)
    assert not (tmp_path / "repository" / "scaled").exists()


def test_one_sample_is_said_to_have_checked_the_batch_axis_on_itself(tmp_path: Path) -> None:
    path = _file(tmp_path, TwoHeads(), torch.randn(2, 6), torch.ones(2, 6))
    samples = _samples(tmp_path, x=ROWS[:1], mask=np.ones((1, 6), np.float32))
    result = import_file(path, name="heads", repository=tmp_path / "repository", samples=samples)
    assert any("one sample given" in note for note in result.notes)


class TakesOne(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.reshape(1, 3).sum(dim=0)  # one sample, no batch axis of its own


def test_samples_that_are_no_request_together_are_served_on_one_samples_shape(tmp_path: Path) -> None:
    path = _file(tmp_path, TakesOne(), torch.randn(1, 3))
    samples = _samples(tmp_path, INPUT__0=np.ones((3, 3), np.float32))
    result = import_file(path, name="one", repository=tmp_path / "repository", samples=samples)
    config = read_config(result.model.config)
    assert (config.max_batch_size, list(config.input[0].dims)) == (0, [1, 3])
    assert any("served on one sample's shape" in note for note in result.notes)


class Bfloat(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.to(torch.bfloat16)


def test_an_output_type_the_backend_does_not_serve_is_refused(tmp_path: Path) -> None:
    path = _file(tmp_path, Bfloat(), torch.randn(2, 3))
    samples = _samples(tmp_path, INPUT__0=np.ones((2, 3), np.float32))
    with pytest.raises(
        ExportError, match=r"returns torch\.bfloat16, which Triton's pytorch backend does not serve"
    ):
        import_file(path, name="b", repository=tmp_path / "repository", samples=samples)


class Lengths(torch.nn.Module):
    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return ids.float().cumsum(dim=1)


def test_a_dynamic_axis_is_found_in_the_outputs(tmp_path: Path) -> None:
    path = _file(tmp_path, Lengths(), torch.zeros(2, 7, dtype=torch.int64))
    samples = _samples(tmp_path, ids=np.ones((2, 7), np.int64))
    result = import_file(
        path, name="lengths", repository=tmp_path / "repository", samples=samples, dynamic_axes={"ids": (1,)}
    )
    config = read_config(result.model.config)
    assert (list(config.input[0].dims), list(config.output[0].dims)) == ([-1], [-1])
