"""The soak: thousands of requests against one Triton, and nothing lost, nothing wrong, memory bounded.

    python -m tritonpt_ci.soak [--requests N] [--concurrency N] [--repository DIR] [--reports DIR] [--parts DIR]
                                   [--seed N] [--smoke]

    1. the repository is validated; each model's config and reference data are read
    2. a LocalServer (the official pytorch backend) serves it; every model must become ready
    3. warm-up: per model and protocol, ``concurrency // 2`` requests at its largest batch, then 100 as the
       soak sends them; then the server's RSS at the start (``VmRSS`` of the process, from /proc/<pid>/status)
    4. the soak: N requests (10,000; --smoke 200), the models in turn, each model's requests alternating HTTP
       and gRPC, batch sizes drawn (seeded) from 1..max_batch_size (a model without batching gets its cases as
       they are), rows sliced from the reference cases, from ``concurrency`` threads (16) that each keep one
       HTTP and one gRPC client; every response is compared with the eager reference rows it was sent for
       (checks.compare_outputs, the tolerances stored in reference.json)
    5. the server's counters: per model, nv_inference_request_success rose by the requests sent and
       nv_inference_count by their samples, exactly
    6. the RSS at the end; its growth since the start must stay within :data:`RSS_BOUND_MB`
    -> reports/soak/soak.json and soak.md, and the reliability part ``soak``; exit 1 on any failed request,
       any mismatch, any count that differs, growth beyond the bound, or a server that died (the watchdog
       ends the run within seconds and the reports say so)

The growth bound, :data:`RSS_BOUND_MB` = 256 MiB from the start (after the warm-up) to the end. The warm-up
has run every model at its largest batch from every connection and a mix of sizes, so the allocators (glibc's
arenas, Triton's and libtorch's pools, gRPC's buffers) hold most of what they will; but glibc keeps what is
freed, so the RSS at rest moves by tens of MiB from one burst of requests to the next. Seen here (2 cores, the
built-in set, 10,000 requests, two runs): +65.4 MiB (662.7 -> 728.1) and +124.3 MiB (678.2 -> 802.5) at the end,
at most +198 MiB at any moment (requests in flight included), and +111 MiB after a 200-request smoke. A leak is
far larger: a resnet18 request carries 588 KiB per sample, so keeping the inputs of 5 % of the soak's resnet18
requests (100 of 2,000, 4.4 samples each on average) is over 256 MiB, and so is a leak of 26 KiB or more on
every request. A tighter bound would fail on what the allocators keep; a relative one (a percentage of a server
that holds libtorch) would let a leak hide behind the size of libtorch. A smoke is too short to see a small leak;
it keeps the soak from rotting.
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

import torch

from tritonpt import checks, client, reference, repository
from tritonpt.client import Endpoints
from tritonpt.errors import HINT
from tritonpt.parts import PARTS
from tritonpt.server import LocalServer, TritonFlags
from tritonpt.server.memory import rss_mb
from tritonpt.server.watchdog import Ending, Watchdog, end_now
from tritonpt_ci.soak.plan import (
    CONCURRENCY,
    COUNTERS,
    REQUESTS,
    RSS_BOUND_MB,
    SHOWN_FAILURES,
    SMOKE_REQUESTS,
    WARM_UP_MIXED,
    Request,
    SoakError,
    SoakModel,
    plan,
    warm_up_plan,
)
from tritonpt_ci.soak.report import Count, SoakReport
from tritonpt_ci.soak.runner import Outcome, Runner

__all__ = [
    "CONCURRENCY",
    "REQUESTS",
    "RSS_BOUND_MB",
    "SMOKE_REQUESTS",
    "WARM_UP_MIXED",
    "Count",
    "Request",
    "SoakError",
    "SoakModel",
    "SoakReport",
    "load_models",
    "plan",
    "soak",
    "warm_up_plan",
]
from tritonpt.validate import validate_repository

# --- The run -----------------------------------------------------------------------------------------------------


def load_models(repository_dir: Path) -> list[SoakModel]:
    """Every model of a valid repository with its reference data; a SoakError names what is missing."""
    errors = [p for p in validate_repository(repository_dir) if p.severity == "error"]
    if errors:
        rendered = "\n\n".join(p.render() for p in errors)
        msg = f"Cannot soak {repository_dir}, as it fails validation:\n\n{rendered}"
        raise SoakError(msg)
    models = []
    for model in repository.models(repository_dir):
        if not reference.exists(model):
            msg = (
                f"Cannot soak {model.name}: {model.reference_json} or {model.reference_npz} is missing, so its "
                f"responses cannot be checked.\n{HINT} export it with `invoke export` (its references come with it)."
            )
            raise SoakError(msg)
        config = repository.read_config(model.config)
        models.append(
            SoakModel(name=model.name, max_batch_size=config.max_batch_size, reference=reference.load(model))
        )
    if not models:
        msg = f"Cannot soak {repository_dir}: it holds no models.\n{HINT} run `invoke export` first."
        raise SoakError(msg)
    return models


def _tally(report: SoakReport, outcomes: Sequence[Outcome], *, soaked: bool) -> None:
    """Count failures and mismatches (warm-up and soak alike); ``soaked``: these are the soak's, count them sent."""
    for outcome in outcomes:
        report.failures += bool(outcome.error)
        report.mismatches += bool(outcome.mismatches) and not outcome.error
        if not outcome.ok and len(report.shown) < SHOWN_FAILURES:
            report.shown.append(outcome.describe())
    if soaked:
        sent = [o.request for o in outcomes if o.request.index >= 0]
        report.requests_sent, report.samples_sent = len(sent), sum(r.samples for r in sent)
        latencies = sorted(o.seconds * 1000 for o in outcomes if o.ok)
        if len(latencies) >= 2:  # quantiles need two points
            cuts = statistics.quantiles(latencies, n=100)
            report.latency_p50_ms, report.latency_p99_ms = cuts[49], cuts[98]


def _counters(endpoints: Endpoints, models: Sequence[SoakModel]) -> dict[str, dict[str, float]]:
    parsed = client.metrics(endpoints)
    return {m.name: {n: client.model_metric(parsed, n, m.name) for n in COUNTERS} for m in models}


def _count(
    endpoints: Endpoints, model: str, baseline: dict[str, float], sent: Sequence[Request]
) -> tuple[Count, dict[str, float]]:
    """The model's counters against ``sent``, once they settle; and the counters as read."""
    samples = sum(r.samples for r in sent)
    wanted = {"nv_inference_request_success": len(sent), "nv_inference_count": samples}
    settled = {
        name: checks.settled_metric(endpoints, name, model, expected=baseline[name] + wanted[name])
        for name in COUNTERS
    }
    rose = {name: round(settled[name] - baseline[name]) for name in COUNTERS}
    count = Count(
        sent=len(sent),
        request_success=rose["nv_inference_request_success"],
        inference_count=rose["nv_inference_count"],
        expected_inference_count=samples,
    )
    return count, settled


def soak(
    repository_dir: Path,
    *,
    requests: int,
    concurrency: int,
    smoke: bool,
    reports: Path,
    parts: Path = PARTS,
    seed: int = 0,
    say: Callable[[str], None] = lambda _: None,
) -> SoakReport:
    """Run the soak against a LocalServer on ``repository_dir``; the report says whether it passed.

    Only a server that dies writes the reports here (then the run ends at once); otherwise the caller writes them.
    """
    loaded = load_models(repository_dir)
    report = SoakReport(smoke=smoke, concurrency=concurrency)
    stop = threading.Event()
    reports.mkdir(parents=True, exist_ok=True)
    flags = TritonFlags(model_repository=repository_dir)
    with LocalServer(flags, log_path=reports / "tritonserver.log") as server:
        server.wait_models_ready([m.name for m in loaded])
        pid = server.pid
        if pid is None:  # pragma: no cover - a started LocalServer has its process
            msg = f"{server.describe()} has no process to measure."
            raise SoakError(msg)
        models = [replace(m, gpu=checks.served_on_gpu(server.model_config(m.name))) for m in loaded]
        origin = server.backend_origin()
        report.environment = {
            "server": f"tritonserver {server.install.version if server.install else 'unknown'} (pid {pid})",
            "pytorch backend": origin.describe() if origin else "the server's own",
            "torch (references)": torch.__version__,
            "cores": str(os.cpu_count()),
            "models": ", ".join(f"{m.name} (max_batch_size {m.max_batch_size})" for m in models),
        }
        runner = Runner(server.endpoints, {m.name: m for m in models}, concurrency=concurrency, stop=stop)
        soaking = threading.Event()

        def abort(ending: Ending) -> None:
            """The server died or hung: end the soak now, its reports saying so (watchdog.end_now)."""
            stop.set()
            report.aborted = ending.paragraph

            def write() -> str:
                _tally(report, list(runner.outcomes), soaked=soaking.is_set())
                report.write(reports, parts)
                return str(reports)

            end_now(server, ending, what="soak", write_reports=write)

        with Watchdog(server, abort, what="during the soak"):
            before = _counters(server.endpoints, models)
            warm = warm_up_plan(models, concurrency, seed=seed + 1)
            say(
                f"soak: warm-up, {len(warm)} requests (each model's largest batch over both protocols, then a mix)"
            )
            _tally(report, runner.run(warm), soaked=False)
            report.warmup_requests = len(warm)
            baseline: dict[str, dict[str, float]] = {}
            for m in models:
                warmed, baseline[m.name] = _count(
                    server.endpoints, m.name, before[m.name], [r for r in warm if r.model == m.name]
                )
                if not warmed.exact:
                    report.shown.append(f"warm-up of {m.name}: {warmed}")
                    report.failures += 1
            report.rss_start_mb, _ = rss_mb(pid)
            say(f"soak: server RSS after load and warm-up {report.rss_start_mb:.1f} MiB")

            planned = plan(models, requests, seed=seed)
            began = time.perf_counter()

            def progress(done: Sequence[Outcome]) -> None:
                bad = sum(not o.ok for o in done)
                rate = len(done) / max(time.perf_counter() - began, 1e-9)
                say(
                    f"soak: {len(done)}/{len(planned)} requests ({100 * len(done) // len(planned)} %), "
                    f"{bad} failed or mismatched, {rate:.1f} requests/s, server RSS {rss_mb(pid)[0]:.1f} MiB"
                )

            runner.progress = progress
            soaking.set()
            outcomes = runner.run(planned)
            report.seconds = time.perf_counter() - began
            _tally(report, outcomes, soaked=True)
            progress(outcomes)
            for m in models:
                sent = [o.request for o in outcomes if o.request.model == m.name]
                report.counts[m.name], _ = _count(server.endpoints, m.name, baseline[m.name], sent)
            report.rss_end_mb, report.rss_peak_mb = rss_mb(pid)
    return report
