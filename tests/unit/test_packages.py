"""The AOTInductor package cache's key: the same program and weights give the same key, anything that changes the
package gives another (a cache that hit on another model's weights would serve wrong outputs)."""

from __future__ import annotations

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
