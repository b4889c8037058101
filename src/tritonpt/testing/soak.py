"""The soak: thousands of requests against one Triton, and nothing lost, nothing wrong, memory bounded.

    python -m tritonpt.testing.soak [--requests N] [--concurrency N] [--repository DIR] [--reports DIR] [--parts DIR]
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

import argparse
import json
import os
import random
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from tritonpt import checks, client, reference, repository, scratch
from tritonpt.client import PROTOCOLS, Array, Connection, Endpoints, Protocol
from tritonpt.errors import HINT, TritonPtError
from tritonpt.server import LocalServer, TritonFlags
from tritonpt.server.watchdog import Ending, Watchdog, end_now
from tritonpt.testing.parts import PARTS, count_tracebacks, write_part
from tritonpt.validate import validate_repository

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


# --- What came back ----------------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Outcome:
    request: Request
    seconds: float
    error: str = ""  # the request failed: what the client or the server said
    mismatches: tuple[str, ...] = ()  # one line per output out of tolerance

    @property
    def ok(self) -> bool:
        return not self.error and not self.mismatches

    def describe(self) -> str:
        r = self.request
        rows = f"rows {r.start}..{r.start + r.rows - 1}" if r.rows else "as it is"
        what = self.error or "; ".join(self.mismatches)
        return f"request {r.index} ({r.model} over {r.protocol}, case {r.case}, {rows}): {what}"


def rss_mb(pid: int) -> tuple[float, float]:
    """``(VmRSS, VmHWM)`` of a process in MiB, from /proc/<pid>/status (the current and the peak RSS)."""
    found: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/status").read_text(encoding="ascii").splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            found[key] = int(value.split()[0]) / 1024  # the kernel writes kB
    return found["VmRSS"], found["VmHWM"]


NO_REQUEST = Request(index=-1, model="", protocol="http", case="", start=0, rows=0)
"""What a failure outside any request is recorded against (it is no request sent)."""


class Runner:
    """Sends planned requests from ``concurrency`` threads, each with one HTTP and one gRPC client of its own."""

    def __init__(
        self,
        endpoints: Endpoints,
        models: dict[str, SoakModel],
        *,
        concurrency: int,
        stop: threading.Event,
        progress: Callable[[Sequence[Outcome]], None] = lambda _: None,
    ) -> None:
        self.endpoints = endpoints
        self.models = models
        self.concurrency = concurrency
        self.stop = stop
        self.progress = progress
        self.outcomes: list[Outcome] = []  # appended by the workers (list.append is atomic)
        self._lock = threading.Lock()
        self._queue: Iterator[Request] = iter(())

    def run(self, requests: Sequence[Request]) -> list[Outcome]:
        """Every request sent (unless ``stop`` is set), their outcomes in the order they finished."""
        self.outcomes = []
        self._queue = iter(requests)
        workers = [
            threading.Thread(target=self._work, name=f"soak-{n}", daemon=True)
            for n in range(self.concurrency)
        ]
        for worker in workers:
            worker.start()
        said = time.monotonic()
        try:
            while alive := [worker for worker in workers if worker.is_alive()]:
                alive[0].join(0.5)
                if time.monotonic() - said >= PROGRESS_S:
                    self.progress(self.outcomes)
                    said = time.monotonic()
        except BaseException:
            self.stop.set()  # Ctrl-C: each worker finishes the request in hand and stops
            raise
        return list(self.outcomes)

    def _next(self) -> Request | None:
        with self._lock:
            return None if self.stop.is_set() else next(self._queue, None)

    def _work(self) -> None:
        """Send requests until none is left; a request that fails is counted and the clients are opened again."""
        while True:
            current: Request | None = None
            began = time.perf_counter()
            try:
                with client.http(self.endpoints) as http, client.grpc(self.endpoints) as grpc:
                    connections = {"http": http, "grpc": grpc}
                    while (current := self._next()) is not None:
                        began = time.perf_counter()
                        self.outcomes.append(self._one(current, connections[current.protocol], began))
            except Exception as exc:  # whatever a request raised is the soak's finding, counted
                if current is None:  # the clients failed outside any request: this worker stops, saying so
                    self.outcomes.append(
                        Outcome(request=NO_REQUEST, seconds=0.0, error=f"a client failed: {_words(exc)}")
                    )
                    return
                self.outcomes.append(
                    Outcome(request=current, seconds=time.perf_counter() - began, error=_words(exc))
                )
            else:
                return

    def _one(self, request: Request, connection: Connection, began: float) -> Outcome:
        model = self.models[request.model]
        inputs, expected = model.payload(request)
        names = [o.name for o in model.reference.outputs]
        got = client.infer_on(connection, request.protocol, model.name, inputs, names)
        seconds = time.perf_counter() - began
        comparisons = checks.compare_outputs(model.reference.outputs, got, expected, gpu=model.gpu)
        return Outcome(request=request, seconds=seconds, mismatches=tuple(checks.mismatches(comparisons)))


def _words(exc: BaseException) -> str:
    """An exception as one line: its type and message (tritonclient's carry the status and the server's words)."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


# --- The counters ------------------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Count:
    """One model's counters against what was sent (only the soak's requests: the warm-up is counted before)."""

    sent: int
    request_success: int
    inference_count: int
    expected_inference_count: int

    @property
    def exact(self) -> bool:
        return self.request_success == self.sent and self.inference_count == self.expected_inference_count


# --- The report --------------------------------------------------------------------------------------------------


@dataclass(kw_only=True)
class SoakReport:
    """What the soak found; ``passed`` only with no failure, no mismatch, exact counts and bounded growth."""

    smoke: bool
    concurrency: int
    environment: dict[str, str] = field(default_factory=dict)
    warmup_requests: int = 0
    requests_sent: int = 0
    samples_sent: int = 0
    seconds: float = 0.0
    latency_p50_ms: float = 0.0
    latency_p99_ms: float = 0.0
    failures: int = 0
    mismatches: int = 0
    shown: list[str] = field(default_factory=list)
    counts: dict[str, Count] = field(default_factory=dict)
    rss_start_mb: float = 0.0
    rss_end_mb: float = 0.0
    rss_peak_mb: float = 0.0
    rss_bound_mb: float = RSS_BOUND_MB
    aborted: str = ""

    @property
    def rss_growth_mb(self) -> float:
        return self.rss_end_mb - self.rss_start_mb

    @property
    def throughput(self) -> float:
        """Requests per second over the soak (the warm-up not included)."""
        return self.requests_sent / self.seconds if self.seconds else 0.0

    def problems(self) -> list[str]:
        """Why the soak failed, one line each (empty when it passed)."""
        found = [f"the run was aborted: {self.aborted.splitlines()[0]}"] if self.aborted else []
        if self.failures:
            found.append(f"{self.failures} requests failed")
        if self.mismatches:
            found.append(f"{self.mismatches} responses differ from their reference")
        found += [
            f"{model}: {c.sent} requests sent, nv_inference_request_success rose by {c.request_success}; "
            f"{c.expected_inference_count} samples sent, nv_inference_count rose by {c.inference_count}"
            for model, c in self.counts.items()
            if not c.exact
        ]
        if self.rss_growth_mb > self.rss_bound_mb:
            found.append(
                f"the server's RSS grew by {self.rss_growth_mb:.1f} MiB ({self.rss_start_mb:.1f} -> "
                f"{self.rss_end_mb:.1f}), beyond the bound of {self.rss_bound_mb:.0f} MiB"
            )
        return found

    @property
    def passed(self) -> bool:
        return not self.problems()

    def to_dict(self) -> dict[str, Any]:
        data = {k: v for k, v in asdict(self).items() if k not in ("counts", "shown")}
        data["counts"] = {model: asdict(c) for model, c in self.counts.items()}
        data.update(
            throughput_rps=round(self.throughput, 2),
            samples_per_s=round(self.samples_sent / self.seconds, 2) if self.seconds else 0.0,
            rss_growth_mb=round(self.rss_growth_mb, 1),
            first_failures=self.shown,
            problems=self.problems(),
            passed=self.passed,
        )
        return data

    def part(self) -> dict[str, Any]:
        """The reliability part ``soak`` (issue 10's contract, plus the verdict and the time)."""
        return {
            "tracebacks": count_tracebacks([*self.shown, self.aborted]),
            "requests_sent": self.requests_sent,
            "failures": self.failures,
            "mismatches": self.mismatches,
            "counts": {model: asdict(c) for model, c in self.counts.items()},
            "rss_start_mb": round(self.rss_start_mb, 1),
            "rss_end_mb": round(self.rss_end_mb, 1),
            "rss_bound_mb": self.rss_bound_mb,
            "smoke": self.smoke,
            "seconds": round(self.seconds, 1),
            "passed": self.passed,
        }

    def to_markdown(self) -> str:
        verdict = "passed" if self.passed else "FAILED"
        lines = [f"# Soak{' (smoke)' if self.smoke else ''}: {verdict}", "", "| | |", "|---|---|"]
        lines += [f"| {k} | {v} |" for k, v in self.environment.items()]
        lines += [
            f"| requests | {self.requests_sent} ({self.samples_sent} samples) at concurrency {self.concurrency}, "
            f"after {self.warmup_requests} warm-up requests |",
            f"| time | {self.seconds:.1f} s: {self.throughput:.1f} requests/s, "
            f"latency p50 {self.latency_p50_ms:.1f} ms, p99 {self.latency_p99_ms:.1f} ms |",
            f"| failed requests | {self.failures} |",
            f"| responses out of tolerance | {self.mismatches} |",
            f"| server RSS | {self.rss_start_mb:.1f} MiB at the start, {self.rss_end_mb:.1f} MiB at the end "
            f"({self.rss_growth_mb:+.1f}; bound {self.rss_bound_mb:.0f}), peak {self.rss_peak_mb:.1f} MiB |",
            "",
            "| model | requests sent | nv_inference_request_success | samples sent | nv_inference_count | exact |",
            "|---|---|---|---|---|---|",
        ]
        lines += [
            f"| {m} | {c.sent} | +{c.request_success} | {c.expected_inference_count} | +{c.inference_count} | "
            f"{'yes' if c.exact else 'NO'} |"
            for m, c in self.counts.items()
        ]
        if self.problems():
            lines += ["", "## Problems", "", *[f"- {p}" for p in self.problems()]]
        if self.shown:
            lines += ["", f"## The first {len(self.shown)} failed or mismatched requests", ""]
            lines += [f"- {line}" for line in self.shown]
        if self.aborted:
            lines += ["", "## Aborted", "", "```", self.aborted, "```"]
        return "\n".join(lines) + "\n"

    def write(self, folder: Path, parts: Path = PARTS) -> list[Path]:
        folder.mkdir(parents=True, exist_ok=True)
        written = [folder / "soak.json", folder / "soak.md"]
        written[0].write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")
        written[1].write_text(self.to_markdown(), encoding="utf-8")
        written.append(write_part("soak", self.part(), folder=parts))
        return written


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


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m tritonpt.testing.soak``: exit 0 only when nothing was lost, wrong or leaked."""
    parser = argparse.ArgumentParser(
        prog="python -m tritonpt.testing.soak", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--requests",
        type=int,
        default=None,
        help=f"requests to send (default {REQUESTS}; --smoke {SMOKE_REQUESTS})",
    )
    parser.add_argument(
        "--concurrency", type=int, default=CONCURRENCY, help=f"threads sending (default {CONCURRENCY})"
    )
    parser.add_argument("--repository", type=Path, default=repository.DEFAULT_REPOSITORY)
    parser.add_argument("--reports", type=Path, default=Path("reports/soak"))
    parser.add_argument(
        "--parts", type=Path, default=PARTS, help=f"where the reliability part goes (default {PARTS})"
    )
    parser.add_argument("--seed", type=int, default=0, help="seeds the batch sizes and rows drawn")
    parser.add_argument(
        "--smoke", action="store_true", help=f"a short soak ({SMOKE_REQUESTS} requests) for CI"
    )
    options = parser.parse_args(argv)
    requests = (
        options.requests if options.requests is not None else SMOKE_REQUESTS if options.smoke else REQUESTS
    )
    if requests < 1 or not 1 <= options.concurrency <= CONCURRENCY * 4:
        parser.error(f"--requests must be at least 1 and --concurrency between 1 and {CONCURRENCY * 4}")

    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    try:
        with scratch.stop_signals_interrupt():
            report = soak(
                options.repository,
                requests=requests,
                concurrency=options.concurrency,
                smoke=options.smoke,
                reports=options.reports,
                parts=options.parts,
                seed=options.seed,
                say=say,
            )
        written = report.write(options.reports, options.parts)
    except TritonPtError as exc:
        say(f"error: {exc}")
        return 1
    except KeyboardInterrupt as interrupt:
        say("soak: interrupted; the server was stopped and no report was written")
        return scratch.exit_code(interrupt)
    print(report.to_markdown())
    say("written: " + ", ".join(str(p) for p in written))
    for problem in report.problems():
        say(f"soak failed: {problem}")
    return 0 if report.passed else 1


if __name__ == "__main__":
    sys.exit(main())
