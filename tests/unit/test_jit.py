"""TorchScript's deprecation (torch 2.15 warns on every torch.jit call): told once, in one line, never an error.

The warning texts are torch 2.15.0's own (seen with `python -W always`); the project's tests run torch 2.9.1, which
does not warn, so each test raises the warning torch 2.15 raises, inside the same door. tests/system's wheel test
holds the door against a real torch 2.15.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch

from tritonpt import jit

SAVE_215 = "`torch.jit.save` is deprecated. Please switch to `torch.export`."
LOAD_215 = "`torch.jit.load` is deprecated. Please switch to `torch.export`."


@pytest.fixture
def told(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    lines: list[str] = []
    monkeypatch.setattr(jit, "_told", [])
    monkeypatch.setattr(jit, "tell", lines.append)
    return lines


def test_the_deprecation_is_told_once_in_one_line_and_is_not_an_error(told: list[str]) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # as the matrix's pytest and these tests run
        for text in (SAVE_215, LOAD_215, SAVE_215):
            with jit._deprecation_told("save"):
                warnings.warn(text, FutureWarning, stacklevel=1)
        with jit._deprecation_told("load"):
            warnings.warn(LOAD_215, DeprecationWarning, stacklevel=1)  # torch 2.12's category
    assert len(told) == 1
    assert "\n" not in told[0]
    assert f"torch {torch.__version__} deprecates TorchScript" in told[0]
    assert "--format pt2" in told[0]
    assert jit.deprecated_in_this_torch()


def test_other_warnings_still_reach_the_caller(told: list[str]) -> None:
    with pytest.warns(UserWarning, match="something else"), jit._deprecation_told("trace"):
        warnings.warn("something else", UserWarning, stacklevel=1)
    assert told == []


def _raising(exc: Exception) -> None:
    with jit._deprecation_told("trace"):
        raise exc


def test_a_torch_that_raises_its_deprecation_names_the_format_that_works(told: list[str]) -> None:
    removed = RuntimeError(
        "`torch.jit.trace` is deprecated and has been removed. Please switch to `torch.export`."
    )
    with pytest.raises(jit.TorchScriptRefusedError) as refused:
        _raising(removed)
    message = str(refused.value)
    assert f"torch {torch.__version__} refuses TorchScript: torch.jit.trace raised RuntimeError" in message
    assert "--format pt2" in message
    with pytest.raises(ValueError, match="not about TorchScript"):
        _raising(ValueError("not about TorchScript"))


def test_the_door_round_trips_a_module(tmp_path: Path, told: list[str]) -> None:
    model = torch.nn.Linear(3, 2).eval()
    example = (torch.randn(1, 3),)
    traced = jit.trace(model, example)
    jit.save(traced, tmp_path / "model.pt")
    loaded = jit.load(tmp_path / "model.pt")
    assert not loaded.training
    torch.testing.assert_close(loaded(*example), model(*example))
    scripted = jit.script(model)
    torch.testing.assert_close(scripted(*example), model(*example))


def test_a_torch_that_no_longer_reads_torchscript_says_where_to_read_it(told: list[str]) -> None:
    def load() -> None:
        with jit._deprecation_told("load"):
            msg = "`torch.jit.load` is deprecated and has been removed."
            raise RuntimeError(msg)

    with pytest.raises(jit.TorchScriptRefusedError) as refused:
        load()
    assert "read the file with a torch that still reads TorchScript" in str(refused.value)
    assert "tritonpt migrate" in str(refused.value)
