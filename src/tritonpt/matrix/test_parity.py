"""Numerical parity: eager PyTorch 2.9 reference outputs vs Triton's, per model x case x protocol."""

from __future__ import annotations

import concurrent.futures
import itertools

import pytest

from tritonpt import assertions, client
from tritonpt.client import Array
from tritonpt.parity import Comparison
from tritonpt.reporting.report import ParityRow, Report
from tritonpt.server.base import Server

from .models import Model


def _compare_outputs(
    triton: Server, model: Model, got: list[Array], expected: tuple[Array, ...]
) -> list[Comparison]:
    gpu = assertions.served_on_gpu(triton.model_config(model.name))
    return assertions.compare_outputs(model.reference.outputs, got, expected, gpu=gpu)


def test_parity(triton: Server, model: Model, case: str, protocol: client.Protocol, report: Report) -> None:
    reference_case = model.reference.case(case)
    inputs = dict(zip(model.input_names, reference_case.inputs, strict=True))
    got = client.infer(triton.endpoints, protocol, model.name, inputs, model.output_names)
    comparisons = _compare_outputs(triton, model, got, reference_case.outputs)
    for comparison in comparisons:
        report.parity.append(
            ParityRow.of(
                model=model.name,
                protocol=protocol,
                case=case,
                batch_size=reference_case.batch_size,
                comparison=comparison,
            )
        )
    failures = assertions.mismatches(comparisons)
    assert not failures, f"{model.name} {case} over {protocol}:\n" + "\n".join(failures)


WAITS_US = 100
"""A queue delay that, with one instance and 16 requests in flight, leaves the batcher something to combine."""
# Mixed request sizes, cycled; each request is a slice of the largest reference case.
REQUEST_SIZES = (1, 3, 2, 1, 4, 1, 2)
REQUESTS = 48


def test_parity_under_dynamic_batching(triton: Server, batched_model: Model, report: Report) -> None:
    """48 concurrent requests of mixed sizes, every response held to its rows of the reference. That the batcher
    combined some is held only where Triton's rules promise it: one instance, a max_batch_size of 2 or more, and a
    queue delay of at least :data:`WAITS_US` (what export writes); elsewhere (no delay, Triton's default, where a
    request goes as soon as an instance is free; max_batch_size 1; several instances) combining none is a finding in
    the report, with the queue delay that would let it combine."""
    model = batched_model
    if not model.dynamic_batching:  # a PT2 model: named here rather than left out of the matrix
        pytest.skip(
            "not served with dynamic batching: pytorch_backend r26.05's stock PT2 path returns the whole merged batch "
            "to every request (docs/upstream/pt2-dynamic-batching.md), so export writes none for it and the "
            "validator refuses it (A005); `nox -s integration -- --pt2-build patched` exports and serves it with "
            "dynamic batching on our patched build (tests/system/test_pt2_backend.py holds it; `nox -s triton-qa` "
            "shows stock's bug)"
        )
    largest = max(model.reference.cases, key=lambda c: (c.batch_size, -len(c.id)))
    sizes = [
        min(size, largest.batch_size)
        for size, _ in zip(itertools.cycle(REQUEST_SIZES), range(REQUESTS), strict=False)
    ]
    starts = [(i * 5) % max(1, largest.batch_size - size + 1) for i, size in enumerate(sizes)]
    # Triton counts a request after it answers it: the checks before this one may not all be counted yet. What it
    # will have counted is its warmup runs and our answered requests; a baseline short of that (the warmup left
    # out) was read before the last check was counted, and the count below came out one too many (49 == 48).
    expected = model.counted(triton)
    before = assertions.settled_statistics(triton.endpoints, model.name, requests=expected)
    if triton.kind == "local":  # server 2.51.0 of this run's own: nothing else sends it requests
        assert before.requests == expected, (
            f"{model.name}: the server counted {before.requests} successful requests, this run expected {expected} "
            f"({model.warmup_runs} warmup runs and {expected - model.warmup_runs} answered)"
        )

    def one(index: int) -> list[str]:
        size, start = sizes[index], starts[index]
        protocol = client.PROTOCOLS[index % 2]
        inputs = {
            name: array[start : start + size]
            for name, array in zip(model.input_names, largest.inputs, strict=True)
        }
        got = client.infer(triton.endpoints, protocol, model.name, inputs, model.output_names)
        expected = tuple(array[start : start + size] for array in largest.outputs)
        return [
            f"request {index} ({protocol}, rows {start}..{start + size - 1}): {c.describe()}"
            for c in _compare_outputs(triton, model, got, expected)
            if not c.ok
        ]

    with concurrent.futures.ThreadPoolExecutor(max_workers=16) as pool:
        failures = [line for lines in pool.map(one, range(REQUESTS)) for line in lines]
    after = assertions.settled_statistics(triton.endpoints, model.name, requests=before.requests + REQUESTS)
    assert not failures, "\n".join(failures)
    requests = after.requests - before.requests
    executions = after.executions - before.executions
    assert requests == REQUESTS
    assert after.inferences - before.inferences == sum(sizes)
    if executions < requests:
        return
    said = f"{requests} concurrent requests ran as {executions} executions: the dynamic batcher combined none"
    delay = model.config.dynamic_batching.max_queue_delay_microseconds
    instances = sum(max(1, g.count) for g in model.config.instance_group) or 1
    promised = model.config.max_batch_size >= 2 and delay >= WAITS_US and instances == 1
    assert not promised, f"{said}, with one instance and max_queue_delay_microseconds {delay}"
    if model.config.max_batch_size < 2:
        why = f"with max_batch_size {model.config.max_batch_size} there is nothing to combine"
    elif instances > 1:
        why = f"{instances} instances took the requests as they came, each free before the next arrived"
    elif delay:
        why = f"with max_queue_delay_microseconds {delay}, the model answered faster than the requests came"
    else:
        why = (
            "with no max_queue_delay_microseconds a request is scheduled as soon as an instance is free, and the "
            "model answered faster than the requests came"
        )
    report.findings.setdefault(model.name, []).append(
        f"{said} (every response had parity): {why}. A queue delay lets them combine, e.g. `dynamic_batching "
        "{ max_queue_delay_microseconds: 1000 }` (the export's default); `tritonpt tune --name "
        f"{model.name}` measures which delay serves best."
    )


def test_pt2_parity_at_every_batch_size(triton: Server, pt2_model: Model, protocol: client.Protocol) -> None:
    """Each batch size from 1 to max_batch_size, rows of the largest reference case: pytorch_backend r26.05's PT2
    path serves rows after the first wrong when the batch axis was exported static (docs/upstream/), so every
    size is sent, not only the reference cases' 1 and largest."""
    model = pt2_model
    largest = max(model.reference.cases, key=lambda c: (c.batch_size, -len(c.id)))
    failures = []
    for size in range(1, model.config.max_batch_size + 1):
        rows = slice(0, min(size, largest.batch_size))
        inputs = {n: a[rows] for n, a in zip(model.input_names, largest.inputs, strict=True)}
        got = client.infer(triton.endpoints, protocol, model.name, inputs, model.output_names)
        expected = tuple(a[rows] for a in largest.outputs)
        failures += [
            f"batch {size}: {line}"
            for line in assertions.mismatches(_compare_outputs(triton, model, got, expected))
        ]
    assert not failures, f"{model.name} over {protocol}:\n" + "\n".join(failures)
