"""The soak's constants and what it sends: each model's batch limit and reference data, and the planned requests."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from tritonpt import reference
from tritonpt.client import PROTOCOLS, Array, Protocol
from tritonpt.errors import TritonPtError

REQUESTS = 10_000
SMOKE_REQUESTS = 200
CONCURRENCY = 16
WARM_UP_MIXED = 100
"""Requests of mixed batch sizes in the warm-up, after those at the largest batch."""
RSS_BOUND_MB = 256.0
"""Growth of the server's RSS from the start (after the warm-up) to the end that fails the soak (see above)."""
PROGRESS_S = 10.0
"""How often a progress line goes to stderr."""
SHOWN_FAILURES = 10
"""Failed or mismatched requests named in the report (all are counted)."""
COUNTERS = ("nv_inference_request_success", "nv_inference_count")


class SoakError(TritonPtError):
    """The soak could not be set up (the repository, its reference data, the server)."""


# --- What is sent ------------------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Request:
    """One planned request: which model, protocol, reference case and rows."""

    index: int
    model: str
    protocol: Protocol
    case: str
    start: int  # the first row of the case sent
    rows: int  # the batch size sent; 0: a model without batching, its case sent as it is

    @property
    def samples(self) -> int:
        """What nv_inference_count counts for it (a request without a batch axis counts one)."""
        return max(self.rows, 1)


@dataclass(frozen=True, kw_only=True)
class SoakModel:
    """One model of the repository: its batching limit and its reference data."""

    name: str
    max_batch_size: int
    reference: reference.Reference
    gpu: bool = False  # served on a GPU (the GPU tolerances apply)

    def largest(self) -> int:
        """The largest batch a request may have: max_batch_size, or less when no reference case has that many rows."""
        return min(self.max_batch_size, max(c.batch_size for c in self.reference.cases))

    def draw(self, rng: random.Random, *, rows: int | None = None) -> tuple[str, int, int]:
        """``(case, start, rows)``: a batch size from 1..largest (or ``rows``) and rows of a case that has them."""
        if self.max_batch_size <= 0:
            return rng.choice(self.reference.cases).id, 0, 0
        size = rows if rows is not None else rng.randint(1, self.largest())
        case = rng.choice([c for c in self.reference.cases if c.batch_size >= size])
        return case.id, rng.randint(0, case.batch_size - size), size

    def payload(self, request: Request) -> tuple[dict[str, Array], tuple[Array, ...]]:
        """The inputs to send and the reference outputs for exactly those rows."""
        case = self.reference.case(request.case)
        rows = slice(request.start, request.start + request.rows) if request.rows else slice(None)
        inputs = {
            info.name: array[rows] for info, array in zip(self.reference.inputs, case.inputs, strict=True)
        }
        return inputs, tuple(array[rows] for array in case.outputs)


def plan(models: Sequence[SoakModel], count: int, *, seed: int, first: int = 0) -> list[Request]:
    """``count`` requests: the models in turn, each model's alternating HTTP and gRPC, seeded batch sizes."""
    rng = random.Random(seed)  # noqa: S311 - seeded draws of batch sizes and rows, not secrets
    sent_to: dict[str, int] = dict.fromkeys((m.name for m in models), 0)
    planned = []
    for index in range(first, first + count):
        model = models[index % len(models)]
        case, start, rows = model.draw(rng)
        protocol = PROTOCOLS[sent_to[model.name] % len(PROTOCOLS)]
        sent_to[model.name] += 1
        planned.append(
            Request(index=index, model=model.name, protocol=protocol, case=case, start=start, rows=rows)
        )
    return planned


def warm_up_plan(models: Sequence[SoakModel], concurrency: int, *, seed: int) -> list[Request]:
    """Per model and protocol, ``concurrency // 2`` requests at its largest batch (the largest buffers), then
    :data:`WARM_UP_MIXED` requests as the soak sends them (the allocators' mix of sizes); indices below 0."""
    rng = random.Random(seed)  # noqa: S311 - seeded draws of batch sizes and rows, not secrets
    largest: list[tuple[SoakModel, Protocol, tuple[str, int, int]]] = [
        (model, protocol, model.draw(rng, rows=model.largest() if model.max_batch_size > 0 else None))
        for model in models
        for protocol in PROTOCOLS
        for _ in range(max(1, concurrency // 2))
    ]
    mixed = [(r.model, r.protocol, (r.case, r.start, r.rows)) for r in plan(models, WARM_UP_MIXED, seed=seed)]
    drawn = [(m.name, p, d) for m, p, d in largest] + mixed
    return [
        Request(index=-1 - n, model=name, protocol=protocol, case=case, start=start, rows=rows)
        for n, (name, protocol, (case, start, rows)) in enumerate(drawn)
    ]
