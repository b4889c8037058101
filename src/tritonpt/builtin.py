"""The built-in model set: small models that together cover what the pytorch backend must handle.

:data:`BUILTIN` maps each name (resnet18, multi_io, token_encoder, scripted_gate, fixed_shape) to its factory;
docs/guide/your-model.md tabulates what each covers, and :data:`NOT_PT2` names those without a PT2 copy, and
why. Each factory builds its module after :func:`build` has seeded torch, so weights are reproducible.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from tritonpt.spec import ModelSpec


def resnet18() -> ModelSpec:
    import torchvision  # noqa: PLC0415 - only this model needs it, and it is slow to import

    module = torchvision.models.resnet18(weights=None)
    return ModelSpec(
        name="resnet18",
        module=module,
        example_inputs=(torch.randn(1, 3, 224, 224),),
        max_batch_size=8,
        description="torchvision ResNet18, random weights, 3x224x224 float32 images",
    )


class MultiIO(nn.Module):
    """Two inputs, two outputs: a projection of both and their elementwise product summary."""

    def __init__(self) -> None:
        super().__init__()
        self.left = nn.Linear(16, 8)
        self.right = nn.Linear(8, 8)

    def forward(self, features: torch.Tensor, context: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mixed = torch.tanh(self.left(features) + self.right(context))
        return mixed, (mixed * context).sum(dim=1, keepdim=True)


def multi_io() -> ModelSpec:
    return ModelSpec(
        name="multi_io",
        module=MultiIO(),
        example_inputs=(torch.randn(2, 16), torch.randn(2, 8)),
        input_names=("features", "context"),
        max_batch_size=16,
        description="two float32 inputs named after forward() arguments, two outputs",
    )


class TokenEncoder(nn.Module):
    """Token ids of any length -> per-token logits and a pooled embedding."""

    def __init__(self, vocab: int = 1000, width: int = 32) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.mix = nn.Linear(width, width)
        self.head = nn.Linear(width, 4)

    def forward(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        hidden = torch.relu(self.mix(self.embed(tokens)))
        return self.head(hidden), hidden.mean(dim=1)


def token_encoder() -> ModelSpec:
    return ModelSpec(
        name="token_encoder",
        module=TokenEncoder(),
        example_inputs=(torch.randint(0, 1000, (2, 12), dtype=torch.int64),),
        dynamic_axes={0: (1,)},
        max_batch_size=8,
        description="int64 token ids with a variable-length axis; per-token logits and a pooled vector",
    )


class ScriptedGate(nn.Module):
    """Per-sample data-dependent control flow that tracing would freeze: only scripting keeps it.

    Each row takes its own branch and loop count, so results do not depend on which other requests
    the dynamic batcher puts in the same batch.
    """

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(6, 6)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        projected = self.proj(x)
        rows: list[torch.Tensor] = []
        for i in range(projected.shape[0]):
            row = projected[i]
            row = row * 2.0 if bool(row.sum() > 0) else row - 1.0
            steps = 0
            while steps < 3 and bool(row.abs().max() > 1.0):
                row = row / 2.0
                steps += 1
            rows.append(row)
        y = torch.stack(rows)
        positive = y > 0
        count = positive.sum(dim=1, keepdim=True).to(torch.int32)
        return y, positive, count


def scripted_gate() -> ModelSpec:
    return ModelSpec(
        name="scripted_gate",
        module=ScriptedGate(),
        example_inputs=(torch.randn(2, 6),),
        method="script",
        max_batch_size=8,
        description="torch.jit.script with if/while on data; float32, bool and int32 outputs",
    )


class FixedShape(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(10, 10), nn.GELU(), nn.Linear(10, 3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.net(x), dim=-1)


def fixed_shape() -> ModelSpec:
    return ModelSpec(
        name="fixed_shape",
        module=FixedShape(),
        example_inputs=(torch.randn(4, 10),),
        max_batch_size=0,
        dynamic_batching=False,
        description="max_batch_size 0: the config's dims are the full [4, 10] shape",
    )


BUILTIN: dict[str, Callable[[], ModelSpec]] = {
    "resnet18": resnet18,
    "multi_io": multi_io,
    "token_encoder": token_encoder,
    "scripted_gate": scripted_gate,
    "fixed_shape": fixed_shape,
}


NOT_PT2: dict[str, str] = {
    "scripted_gate": "its forward() branches and loops in Python on each row's values, which torch.export turns "
    "into one graph only through torch.cond (TorchScript's --script keeps it as it is)",
}
"""Built-in models without a PT2 copy, and why."""


def build(factory: Callable[[], object], seed: int) -> object:
    """Call a model factory with torch seeded, so random weights and example inputs are reproducible."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return factory()
