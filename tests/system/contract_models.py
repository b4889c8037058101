"""Model factories that break the user-model contract of `invoke export --model MODULE:ATTR`, one way each.

The contract (docs/guide/your-model.md, "Using the package"): ATTR is a zero-argument callable returning
``(torch.nn.Module, example inputs)`` (a tuple of tensors, or a mapping of forward()'s argument names to tensors) or a
``tritonpt.spec.ModelSpec``; forward() returns tensors of a data type the pytorch backend serves, on the CPU,
alone or in a tuple, list, dict, NamedTuple or dataclass whose keys do not change with the input; the module traces (or scripts, with --script) and computes
the same outputs every time it is given the same inputs. ``good`` keeps it; every other factory here breaks one
clause. tests/system/test_export_contract.py runs each through the front door.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812 - torch's own spelling
from torch import nn

from tritonpt.spec import ModelSpec


class Linear(nn.Module):
    """What the contract asks for: tensors in, tensors out, the same numbers every time."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer(x)


def _example() -> tuple[torch.Tensor, ...]:
    return (torch.randn(2, 4),)


def good() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return Linear(), _example()


# --- the factory itself ---------------------------------------------------------------------------------


def raises() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    msg = "the checkpoint weights.pt is missing"
    raise FileNotFoundError(msg)


def needs_arguments(width: int) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return nn.Linear(width, 3), (torch.randn(2, width),)


def returns_none() -> None:
    return None


def returns_module_only() -> nn.Module:
    return Linear()


def returns_three_items() -> tuple[nn.Module, tuple[torch.Tensor, ...], str]:
    return Linear(), _example(), "extra"


def returns_function_and_inputs() -> tuple[object, tuple[torch.Tensor, ...]]:
    return (lambda x: x * 2), _example()


# --- example inputs -------------------------------------------------------------------------------------


def inputs_are_lists() -> tuple[nn.Module, list[list[float]]]:
    return Linear(), [[0.0, 1.0, 2.0, 3.0]]


def inputs_are_numpy() -> tuple[nn.Module, tuple[object, ...]]:
    return Linear(), (np.zeros((2, 4), dtype=np.float32),)


def spec_with_string_inputs() -> ModelSpec:
    return ModelSpec(name="ignored", module=Linear(), example_inputs=("x",))  # type: ignore[arg-type]


def inputs_on_meta_device() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return Linear(), (torch.randn(2, 4, device="meta"),)


def module_on_meta_device() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return Linear().to("meta"), _example()


def inputs_complex64() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return Linear(), (torch.randn(2, 4, dtype=torch.complex64),)


def inputs_bfloat16() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return Linear(), (torch.randn(2, 4, dtype=torch.bfloat16),)


def inputs_empty_axis() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return Linear(), (torch.randn(2, 0),)


def inputs_one_value_a_sample() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return nn.Identity(), (torch.randn(2),)  # [batch]: no dims left after the batch axis


def inputs_of_the_wrong_shape() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return Linear(), (torch.randn(2, 5),)


# --- outputs --------------------------------------------------------------------------------------------


class Returns(nn.Module):
    """forward() returns what ``kind`` names instead of tensors."""

    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind
        self.layer = nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> object:
        y = self.layer(x)
        if self.kind == "dict":
            return {"logits": y}
        if self.kind == "float":
            return float(y.sum())
        if self.kind == "nested":
            return (y, (y, y))
        if self.kind == "keys-by-input":  # a key only for some inputs: no fixed set of outputs
            return {"logits": y, **({"extra": y} if x.shape[0] > 2 else {})}
        if self.kind == "meta":
            return y.to("meta")
        if self.kind == "complex64":
            return y.to(torch.complex64)
        return y


def outputs_dict() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return Returns("dict"), _example()


def outputs_float() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return Returns("float"), _example()


def outputs_nested() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return Returns("nested"), _example()


def outputs_keys_by_input() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return Returns("keys-by-input"), _example()


def outputs_on_meta_device() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return Returns("meta"), _example()


def outputs_complex64() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return Returns("complex64"), _example()


# --- tracing and scripting ------------------------------------------------------------------------------


class ThroughNumpy(nn.Module):
    """Runs eagerly (export's eager runs need no gradients); tracing records gradients and cannot leave torch."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.from_numpy(self.layer(x).numpy() * 2.0)


def untraceable() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return ThroughNumpy(), _example()


class Branches(nn.Module):
    """Per-batch data-dependent control flow: a trace freezes the branch the example took."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if bool(x.mean() > 0.5):  # the all-ones example: yes; seeded normal reference inputs: no
            return x * 2.0
        return x - 1.0


def traced_branch() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return Branches(), (torch.ones(2, 4),)


class Unscriptable(nn.Module):
    """Python that TorchScript's compiler does not take (``**`` dict expansion)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scales = {**{"a": 2.0}}
        return x * scales["a"]


def unscriptable() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return Unscriptable(), _example()


# --- nondeterminism between eager runs ------------------------------------------------------------------


class AlwaysDropout(nn.Module):
    """Dropout that ignores eval(): ``training=True`` is passed whatever mode the module is in."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.Linear(4, 64)  # 128 outputs: two dropout masks alike once in 2**128 runs, not 1 in 64

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.dropout(self.layer(x), p=0.5, training=True)


def dropout_in_train_mode() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return AlwaysDropout(), _example()


class Noisy(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.rand_like(x)


def random_in_forward() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return Noisy(), _example()


class Counting(nn.Module):
    """State that changes on every call."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return x * self.calls


def state_between_calls() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return Counting(), _example()
