"""The soak: thousands of requests against one Triton, and nothing lost, nothing wrong, memory bounded.

    soak(repository, ...)   a warm-up, then N requests (10,000; --smoke 200) over HTTP and gRPC from 16
                            threads, each response held to its eager rows; the counters must rise exactly
    load_models(repository) every model of a valid repository with its reference data
    RSS_BOUND_MB            how far the server's RSS may grow after the warm-up (docs/figures/soak.md)

`nox -s soak` and `nox -s soak-smoke` run it: reports/soak/soak.json and .md, and the reliability part.
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

from tritonpt import assertions, client, reference, repository
from tritonpt.client import Endpoints
from tritonpt.errors import HINT
from tritonpt.reporting.reliability import PARTS
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
        name: assertions.settled_metric(endpoints, name, model, expected=baseline[name] + wanted[name])
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
        models = [replace(m, gpu=assertions.served_on_gpu(server.model_config(m.name))) for m in loaded]
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
