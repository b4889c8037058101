"""Trials: one candidate served on a tritonserver of its own and measured by perf_analyzer; the winner's parity.

A candidate gets its own server on a one-model repository (model.pt linked, the candidate's config.pbtxt):
thread counts are process-wide in libtorch (``at::set_num_threads``, and ``set_num_interop_threads`` may be
called once), so candidates never share a server. A config Triton refuses is a trial with the server's reason.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
from tritonclient.grpc.model_config_pb2 import ModelConfig
from tritonclient.utils import InferenceServerException

from tritonpt import assertions, bench, client, perf_analyzer, reference, repository
from tritonpt.client import Array
from tritonpt.errors import ModelLoadError, TritonPtError, first_line
from tritonpt.options import Pt2Build
from tritonpt.repository import ModelDir
from tritonpt.tune.space import Settings, Trial

WINDOW_MS = 1000
"""perf_analyzer's measurement window. Three windows make a measurement; they need only agree within a factor
of two (``--stability-percentage 100``), because on a busy 2-core machine the default 10 % makes perf_analyzer
give up ("Failed to obtain stable measurement") more often than it helps. MARGIN absorbs the noise instead."""
STABILITY = 100
TIMEOUT_S = 60.0
"""The most one load level may take (perf_analyzer never needs more than its three windows and a warm-up)."""
WARMUP_REQUESTS = 3
"""Requests sent before measuring: the first ones after a load run the TorchScript profiling passes."""


@contextmanager
def serving(
    model: ModelDir, config: ModelConfig, *, pt2_build: Pt2Build = "stock"
) -> Iterator[client.Endpoints]:
    """One tritonserver with the official backend (a PT2 model with the PT2 build ``pt2_build``), serving
    ``config`` for ``model``; its endpoints."""
    from tritonpt.server import LocalServer, TritonFlags  # noqa: PLC0415

    with (
        repository.one_model(model, config) as folder,
        LocalServer(
            TritonFlags(model_repository=folder, load_model=(model.name,)), pt2_build=pt2_build
        ) as server,
    ):
        server.wait_models_ready([model.name], timeout=60)
        yield server.endpoints


def warm_up(endpoints: client.Endpoints, model: ModelDir, config: ModelConfig) -> None:
    """A few batch-1 requests of the reference inputs before anything is measured."""
    ref = reference.load(model)
    case = min(ref.cases, key=lambda c: c.batch_size)
    rows = slice(0, 1) if config.max_batch_size > 0 else slice(None)
    inputs = {t.name: a[rows] for t, a in zip(config.input, case.inputs, strict=True)}
    for _ in range(WARMUP_REQUESTS):
        client.infer(endpoints, "grpc", model.name, inputs, [o.name for o in ref.outputs])


TOO_SHORT = "No valid requests recorded within time interval"
"""What perf_analyzer says when no request finished inside one window (slow requests at high concurrency)."""


def _measure_level(
    endpoints: client.Endpoints,
    model: ModelDir,
    config: ModelConfig,
    case: bench.Case,
    *,
    tool: perf_analyzer.Tool,
    window_ms: int,
) -> bench.Measurement:
    """One load level; a window too short for a single request to finish is tried once more, four times as long."""
    try:
        windows = bench.time_windows(window_ms, stability=STABILITY, trials=3)
        return bench.served(
            endpoints, "grpc", model, config, case, windows=windows, tool=tool, timeout=TIMEOUT_S
        )
    except bench.BenchError as exc:
        if TOO_SHORT not in str(exc):
            raise
    windows = bench.time_windows(4 * window_ms, stability=STABILITY, trials=3)
    return bench.served(endpoints, "grpc", model, config, case, windows=windows, tool=tool, timeout=TIMEOUT_S)


def measure(
    model: ModelDir,
    base: ModelConfig,
    settings: Settings,
    *,
    exported: Settings,
    varied: str,
    tool: perf_analyzer.Tool,
    window_ms: int = WINDOW_MS,
    pt2_build: Pt2Build = "stock",
) -> Trial:
    """Serve one candidate and measure it at each load level; a refusal or a failed run is the trial's error."""
    started = time.perf_counter()
    config = settings.config(base)
    points = []
    error: str | None = None
    try:
        with serving(model, config, pt2_build=pt2_build) as endpoints:
            warm_up(endpoints, model, config)
            for concurrency in settings.load_levels(exported):
                case = bench.Case(id=f"c{concurrency}", batch=1, concurrency=concurrency, eager_batch=1)
                points.append(_measure_level(endpoints, model, config, case, tool=tool, window_ms=window_ms))
    except ModelLoadError as exc:
        error = f"refused: {exc.reasons.get(model.name) or first_line(exc)}"
    except (TritonPtError, InferenceServerException) as exc:
        error = "failed: " + " / ".join(line.strip() for line in str(exc).strip().splitlines())
    compared = tuple(sorted({1, exported.filling}))
    seconds = time.perf_counter() - started
    if error is not None:
        return Trial(settings=settings, varied=varied, seconds=seconds, error=error, compared=compared)
    return Trial(settings=settings, varied=varied, seconds=seconds, points=tuple(points), compared=compared)


# --- Parity of the winner -----------------------------------------------------------------------------------


def parity_failures(model: ModelDir, config: ModelConfig, *, pt2_build: Pt2Build = "stock") -> list[str]:
    """Serve ``config`` and send every reference case over HTTP and gRPC (in requests of at most
    max_batch_size rows); what disagrees with eager PyTorch, one line each."""
    ref = reference.load(model)
    names = [tensor.name for tensor in config.input]
    outputs = [info.name for info in ref.outputs]
    largest = max(1, config.max_batch_size)
    failures = []
    with serving(model, config, pt2_build=pt2_build) as endpoints:
        gpu = assertions.served_on_gpu(config)
        for case in ref.cases:
            rows = case.batch_size if config.max_batch_size > 0 else 0
            chunks = [(0, None)] if rows == 0 else [(i, i + largest) for i in range(0, rows, largest)]
            for protocol in client.PROTOCOLS:
                parts: list[list[Array]] = []
                for start, stop in chunks:
                    inputs = {n: a[start:stop] for n, a in zip(names, case.inputs, strict=True)}
                    parts.append(client.infer(endpoints, protocol, model.name, inputs, outputs))
                got = [np.concatenate(pieces) if rows else pieces[0] for pieces in zip(*parts, strict=True)]
                comparisons = assertions.compare_outputs(ref.outputs, got, case.outputs, gpu=gpu)
                failures += [
                    f"{case.id} over {protocol}: {line}" for line in assertions.mismatches(comparisons)
                ]
    return failures
