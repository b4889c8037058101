"""What the integration matrix asserts with, on top of :mod:`tritonpt.client`: where a model runs, served outputs
against their reference with the stored tolerances, and counters that settle.

The tests call these and the client; they never know whether the server is a local process, a container or a
remote URL.
"""

from __future__ import annotations

from collections.abc import Sequence

from tritonclient.grpc.model_config_pb2 import ModelConfig, ModelInstanceGroup

from tritonpt import client
from tritonpt.client import Array, Endpoints
from tritonpt.parity import Comparison, compare
from tritonpt.reference import OutputInfo

SETTLE_S = 5.0
"""How long a counter may lag behind the response: the backend reports statistics after it responds."""


def served_on_gpu(config: ModelConfig) -> bool:
    """Whether the server placed any instance of the model on a GPU (KIND_AUTO resolves to a kind)."""
    return any(group.kind == ModelInstanceGroup.KIND_GPU for group in config.instance_group)


def compare_outputs(
    outputs: Sequence[OutputInfo], got: Sequence[Array], expected: Sequence[Array], *, gpu: bool
) -> list[Comparison]:
    """Each served output against its reference, with the tolerance reference.json stores for it."""
    return [
        compare(info.name, actual, wanted, info.tolerance(gpu=gpu))
        for info, actual, wanted in zip(outputs, got, expected, strict=True)
    ]


def mismatches(comparisons: Sequence[Comparison]) -> list[str]:
    """One line per comparison that failed (empty when all are within tolerance)."""
    return [c.describe() for c in comparisons if not c.ok]


def settled_metric(endpoints: Endpoints, name: str, model: str, *, expected: float) -> float:
    """The model's ``name`` counter once it reaches ``expected`` (or its value after :data:`SETTLE_S`)."""
    return client.settle(
        lambda: client.model_metric(client.metrics(endpoints), name, model),
        lambda value: value >= expected,
        timeout=SETTLE_S,
    )


def settled_statistics(endpoints: Endpoints, model: str, *, requests: int) -> client.Statistics:
    """The model's statistics once ``requests`` successful requests are counted (or after :data:`SETTLE_S`)."""
    return client.settle(
        lambda: client.statistics(endpoints, model),
        lambda stats: stats.requests >= requests,
        timeout=SETTLE_S,
    )
