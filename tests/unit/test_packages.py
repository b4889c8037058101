"""The AOTInductor package cache's key: the same program and weights give the same key, anything that changes the
package gives another (a cache that hit on another model's weights would serve wrong outputs)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import torch

from tritonpt.export import packages


class Small(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)
        self.norm = torch.nn.BatchNorm1d(
            3
        )  # a 0-dim buffer (num_batches_tracked), as torchvision's models hold

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.linear(x))


def _program(seed: int, *, dynamic: bool = True) -> torch.export.ExportedProgram:
    torch.manual_seed(seed)
    module = Small().eval()
    shapes = ({0: torch.export.Dim.DYNAMIC},) if dynamic else None
    return torch.export.export(module, (torch.randn(2, 4),), dynamic_shapes=shapes, strict=False)


def test_the_same_program_gives_the_same_key_and_other_weights_or_shapes_another() -> None:
    first = packages.key(_program(0))
    assert first is not None
    assert packages.key(_program(0)) == first
    others = {packages.key(_program(1)), packages.key(_program(0, dynamic=False))}
    assert None not in others
    assert first not in others
    assert len(others) == 2


def test_the_same_model_in_another_folder_gives_the_same_key(tmp_path: Path) -> None:
    """The graph's comments name the source line of each node (``# File: /path/model.py:4``): a model's own file in
    another checkout is the same program, so a fresh clone takes its package from the cache."""
    keys = set()
    for folder in ("one", "two"):
        source = tmp_path / folder / "model_file.py"
        source.parent.mkdir()
        source.write_text(
            "import torch\n\nclass Twice(torch.nn.Module):\n    def forward(self, x):\n        return x * 2 + 1\n",
            encoding="utf-8",
        )
        found = importlib.util.spec_from_file_location(f"model_file_{folder}", source)
        assert found is not None
        assert found.loader is not None
        module = importlib.util.module_from_spec(found)
        found.loader.exec_module(module)
        program = torch.export.export(module.Twice(), (torch.randn(2, 3),), strict=False)
        assert str(source) in program.graph_module.print_readable(
            print_output=False
        )  # what the key leaves out
        keys.add(packages.key(program))
    assert len(keys) == 1
