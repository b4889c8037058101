"""The bench itself: each side measured (eager in a process of its own, http and grpc through perf_analyzer), the
cases and their windows, the batches formed and the first request after a load; the package's face,
:mod:`tritonpt.bench`, says what it reports."""

from __future__ import annotations

import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from tritonclient.grpc.model_config_pb2 import ModelConfig

from tritonpt import client, jit, perf_analyzer, reference, repository, spec
from tritonpt.client import PROTOCOLS, Endpoints
from tritonpt.errors import TritonPtError
from tritonpt.options import Pt2Build
from tritonpt.repository import ModelDir

SIDES = ("eager", *PROTOCOLS)


class BenchError(TritonPtError):
    """A benchmark could not be set up or run."""


# --- What is measured -----------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Case:
    id: str  # "b1-c1", "b8-c1", "b1-c8"
    batch: int
    concurrency: int
    eager_batch: int  # what eager runs for it: the batch the server could at best form


@dataclass(frozen=True, kw_only=True)
class Measurement:
    model: str
    case: str
    side: str  # eager | http | grpc
    batch: int
    concurrency: int
    throughput: float  # inferences (samples) per second
    p50_ms: float
    p90_ms: float
    p99_ms: float
    queue_us: float | None = None  # the server's split, per request
    compute_input_us: float | None = None
    compute_infer_us: float | None = None
    compute_output_us: float | None = None
    batch_formed: float | None = None  # samples an execution over the case's run, from the server's counters
    stable: bool = True  # False: the windows never agreed within 25 %; three more were taken as they came
    after: bool = False  # eager measured again once the served sides are done, to bracket the machine's drift


def cases_for(config: ModelConfig) -> list[Case]:
    """b1-c1 (full-c1 without a batch axis); with batching the largest batch; with dynamic batching batch 1 at
    that concurrency."""
    largest = config.max_batch_size
    if largest <= 0:
        return [Case(id="full-c1", batch=1, concurrency=1, eager_batch=1)]
    found = [Case(id="b1-c1", batch=1, concurrency=1, eager_batch=1)]
    if largest > 1:
        found.append(Case(id=f"b{largest}-c1", batch=largest, concurrency=1, eager_batch=largest))
        if config.HasField("dynamic_batching"):
            found.append(Case(id=f"b1-c{largest}", batch=1, concurrency=largest, eager_batch=largest))
    return found


def _feed(model: ModelDir, batch: int) -> list[torch.Tensor]:
    """Reference inputs at ``batch`` rows (the first rows of the largest case, repeated when needed)."""
    ref = reference.load(model)
    largest = max(ref.cases, key=lambda c: c.batch_size)
    if largest.batch_size == 0:
        return [torch.from_numpy(np.array(a)) for a in largest.inputs]
    return [torch.from_numpy(np.resize(a, (batch, *a.shape[1:])).astype(a.dtype)) for a in largest.inputs]


@dataclass(frozen=True, kw_only=True)
class Pinning:
    """Which cores the server side and the client side may use (``taskset``); eager runs on the server's."""

    server: tuple[int, ...]
    client: tuple[int, ...]

    @classmethod
    def parse(cls, text: str) -> Pinning:
        """``SERVER:CLIENT`` core lists, e.g. ``1:0`` or ``2,3:0,1``."""
        try:
            server, client = text.split(":")
            found = cls(
                server=tuple(int(c) for c in server.split(",")),
                client=tuple(int(c) for c in client.split(",")),
            )
        except ValueError:
            msg = f"--pin {text!r}: expected SERVER_CORES:CLIENT_CORES, e.g. 1:0 (server on core 1, load on core 0)."
            raise BenchError(msg) from None
        available = os.sched_getaffinity(0)
        if not set(found.server + found.client) <= available or set(found.server) & set(found.client):
            msg = (
                f"--pin {text!r}: the two sides need separate cores among this machine's {sorted(available)}."
            )
            raise BenchError(msg)
        return found


def eager(
    model: ModelDir, case: Case, *, seconds: float, config: ModelConfig, cores: tuple[int, ...] = ()
) -> Measurement:
    """The model file at the case's eager batch, for about ``seconds``: the TorchScript file with the thread count
    and optimized execution the config gives the backend, or a PT2 package through ``aoti_load_package``
    (AOTInductor eager).

    On ``cores``, it runs in a child process started on them under ``taskset`` (``python -m tritonpt.bench.eager``),
    as the server is: OpenMP counts the cores it may use when the process starts, and an AOTInductor
    package's kernels run ``#pragma omp parallel num_threads(N)`` with the N of the machine that compiled them, so
    a process moved onto fewer cores afterwards spins N threads on them (5-10 times slower, seen here)."""
    if not cores:
        return measure_eager(model, case, seconds=seconds, config=config)
    pinned = ["taskset", "--cpu-list", ",".join(map(str, cores))]
    command = [
        *pinned,
        sys.executable,
        "-m",
        "tritonpt.bench.eager",
        str(model.root),
        json.dumps(asdict(case)),
        str(seconds),
        str(len(cores)),
    ]
    try:
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            check=False,
            timeout=seconds * 10 + 300,
        )
    except subprocess.TimeoutExpired as exc:
        msg = f"The eager side of {model.name} {case.id} did not finish within {exc.timeout:.0f} s."
        raise BenchError(msg) from exc
    if done.returncode != 0 or not done.stdout.strip():
        msg = (
            f"The eager side of {model.name} {case.id} failed on cores {','.join(map(str, cores))} "
            f"(exit {done.returncode}): {((done.stderr or done.stdout).strip().splitlines() or ['no output'])[-1]}"
        )
        raise BenchError(msg)
    return Measurement(**json.loads(done.stdout.strip().splitlines()[-1]))


def measure_eager(
    model: ModelDir, case: Case, *, seconds: float, config: ModelConfig, threads: int | None = None
) -> Measurement:
    """:func:`eager` in this process: intra-op threads as the config gives the backend, else ``threads`` (one per
    pinned core), else torch's default."""
    module = _in_process(model, config)
    inputs = _feed(model, case.eager_batch)
    latencies: list[float] = []
    run = spec.BackendRun.of(config)
    before = torch.get_num_threads()
    torch.set_num_threads(run.intra_op_threads or threads or before)
    try:
        with torch.inference_mode(), torch.jit.optimized_execution(run.optimized):  # type: ignore[attr-defined]  # no-op for a package
            for _ in range(3):  # the profiling executor's first runs
                module(*inputs)
            began = time.perf_counter()
            while time.perf_counter() - began < seconds or len(latencies) < 10:
                start = time.perf_counter()
                module(*inputs)
                latencies.append(time.perf_counter() - start)
            elapsed = time.perf_counter() - began
    finally:
        torch.set_num_threads(before)
    quantiles = statistics.quantiles([x * 1000 for x in latencies], n=100)
    return Measurement(
        model=model.name,
        case=case.id,
        side="eager",
        batch=case.eager_batch,
        concurrency=1,
        throughput=case.eager_batch * len(latencies) / elapsed,
        p50_ms=quantiles[49],
        p90_ms=quantiles[89],
        p99_ms=quantiles[98],
    )


def _in_process(model: ModelDir, config: ModelConfig) -> Callable[..., object]:
    """The served file, loaded here as its backend loads it: ``torch.jit.load``, or ``aoti_load_package`` called
    by position (``ARGS[i]``) or with keywords (``KWARGS[name]``)."""
    path = model.root / repository.VERSION / repository.default_model_file(config)
    if config.platform != repository.PT2_PLATFORM:
        module: Callable[..., object] = jit.load(path)
        return module
    loaded = torch._inductor.aoti_load_package(str(path))
    names = [t.name for t in config.input]
    if all(n.startswith("KWARGS[") for n in names):
        keys = [n.removeprefix("KWARGS[").removesuffix("]") for n in names]
        return lambda *tensors: loaded(**dict(zip(keys, tensors, strict=True)))
    return loaded


FEWEST_REQUESTS = 20
"""The fewest requests a count window holds, and the fewest a time window is sized for."""


def _wanted(requests: int, batch: int) -> int:
    """Requests a window should hold: ``requests`` samples in requests of ``batch``, at least
    :data:`FEWEST_REQUESTS`."""
    return max(FEWEST_REQUESTS, requests // batch)


def count_windows(count: int) -> list[str]:
    """perf_analyzer windows of ``count`` requests each, until the last three agree within 25 % (at most six)."""
    return [
        "--measurement-mode", "count_windows", "--measurement-request-count", str(count),
        "--stability-percentage", "25", "--max-trials", "6",
    ]  # fmt: skip


def time_windows(milliseconds: int, *, stability: int = 25, trials: int = 4) -> list[str]:
    """perf_analyzer windows of ``milliseconds`` each, until three agree within ``stability`` % (at most
    ``trials``)."""
    return [
        "--measurement-mode", "time_windows", "--measurement-interval", str(milliseconds),
        "--stability-percentage", str(stability), "--max-trials", str(trials),
    ]  # fmt: skip


COUNTED_UP_TO = 500
"""The request rate (requests a second) up to which the bench measures in count windows. perf_analyzer 2.51.0's
count windows last at least a second (it checks the count once a second), and each window's summary takes
its requests out of one vector one erase at a time (``InferenceProfiler::ValidLatencyMeasurement``), so it
costs the square of the requests a window holds; the requests that arrive while it runs make the next window
longer still. Seen here: multi_io at about 5,000 requests a second, concurrency 17 to 32 over HTTP, one window
measured and then perf_analyzer's main thread in that function for minutes while its workers went on sending."""
SHORTEST_WINDOW_MS = 250
LONGEST_COUNT_S = 20
"""A count window holds no more requests than the case's pace brings in this many seconds (at least
:data:`FEWEST_REQUESTS`)."""


def windows_for(requests: int, batch: int, rate: float) -> list[str]:
    """The windows for a case expected at ``rate`` requests a second (:func:`pace`): :func:`count_windows` of
    ``requests`` samples, or of :data:`LONGEST_COUNT_S` at that pace if fewer, up to :data:`COUNTED_UP_TO`
    requests a second; faster, time windows long enough for twice the wanted requests at that pace (at least
    :data:`SHORTEST_WINDOW_MS`), so that a window holds what it needs instead of a second's requests or more."""
    if rate <= COUNTED_UP_TO:
        return count_windows(
            max(FEWEST_REQUESTS, min(_wanted(requests, batch), round(rate * LONGEST_COUNT_S)))
        )
    return time_windows(max(SHORTEST_WINDOW_MS, round(2000 * _wanted(requests, batch) / rate)), trials=6)


def pace(eager: Measurement, case: Case, config: ModelConfig) -> float:
    """Requests a second a served case can at best reach: eager's at the case's batch, and one round of the
    case's concurrency per queue delay where its requests cannot fill what the dynamic batcher sends at once
    (fewer samples than max_batch_size and than every preferred batch size): each then waits the whole delay
    (a delay the tune chose may be most of a second)."""
    rate: float = eager.throughput / case.batch
    batching = config.dynamic_batching
    if not config.HasField("dynamic_batching") or not batching.max_queue_delay_microseconds:
        return rate
    load = case.batch * case.concurrency
    if load >= config.max_batch_size or any(p <= load for p in batching.preferred_batch_size):
        return rate
    return min(rate, case.concurrency * 1e6 / float(batching.max_queue_delay_microseconds))


UNSTABLE = "Failed to obtain stable measurement"
"""What perf_analyzer says (exit 2, no report) when its windows never agreed within the stability percentage."""


def _perf_analyzer_run(
    command: Sequence[str], env: dict[str, str], timeout: float, *, what: str
) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(command, env=env, capture_output=True, text=True, check=False, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        msg = f"perf_analyzer did not finish {what} within {timeout:.0f} s."
        raise BenchError(msg) from exc


def served(
    endpoints: Endpoints,
    protocol: str,
    model: ModelDir,
    config: ModelConfig,
    case: Case,
    *,
    windows: Sequence[str],
    tool: perf_analyzer.Tool,
    timeout: float = 600.0,
    cores: tuple[int, ...] = (),
) -> Measurement:
    """perf_analyzer against the served model, zeros as inputs, measured in ``windows`` (:func:`count_windows`,
    :func:`time_windows`)."""
    binary, env = tool
    shapes = []
    ref = reference.load(model)
    sample = max(ref.cases, key=lambda c: c.batch_size)
    batching = config.max_batch_size > 0
    for tensor, array in zip(config.input, sample.inputs, strict=True):
        if -1 in tensor.dims:
            dims = array.shape[1:] if batching else array.shape
            shapes += ["--shape", f"{tensor.name}:{','.join(str(d) for d in dims)}"]
    with tempfile.TemporaryDirectory(prefix="tritonpt-bench-") as folder:
        report = Path(folder) / "perf.csv"
        pinned = ["taskset", "--cpu-list", ",".join(map(str, cores))] if cores else []
        command = [
            *pinned, str(binary), "-m", model.name, "-u", endpoints.http if protocol == "http" else endpoints.grpc,
            "-i", protocol, "-b", str(case.batch), "--concurrency-range", str(case.concurrency),
            *windows, "--input-data", "zero", *shapes,
            "-f", str(report),
        ]  # fmt: skip
        before = client.statistics(endpoints, model.name)
        done = _perf_analyzer_run(command, env, timeout, what=f"{model.name} {case.id} over {protocol}")
        stable = UNSTABLE not in done.stdout + done.stderr
        if not stable:  # three more windows, taken whatever they say, and marked as unsteady
            relaxed = [*command, "--stability-percentage", "100000", "--max-trials", "3"]
            done = _perf_analyzer_run(relaxed, env, timeout, what=f"{model.name} {case.id} over {protocol}")
        if done.returncode != 0 or not report.is_file():
            tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-6:])
            msg = f"perf_analyzer failed for {model.name} {case.id} over {protocol} (exit {done.returncode}):\n{tail}"
            raise BenchError(msg)
        with report.open(encoding="utf-8") as handle:
            row = next(csv.DictReader(handle))
    formed = batches_formed(before, client.statistics(endpoints, model.name))
    split = {
        "compute_input_us": float(row["Server Compute Input"]),
        "compute_infer_us": float(row["Server Compute Infer"]),
        "compute_output_us": float(row["Server Compute Output"]),
    }
    # A backend that reports its compute timestamps in the wrong order (the stock PT2 path:
    # docs/upstream/pt2-statistics.md) gives a split longer than the requests: no figure, so none is shown.
    shown = split if _fits(split, float(row["p99 latency"])) else {}
    return Measurement(
        model=model.name,
        case=case.id,
        side=protocol,
        batch=case.batch,
        concurrency=case.concurrency,
        throughput=float(row["Inferences/Second"]),
        p50_ms=float(row["p50 latency"]) / 1000,
        p90_ms=float(row["p90 latency"]) / 1000,
        p99_ms=float(row["p99 latency"]) / 1000,
        queue_us=float(row["Server Queue"]),
        compute_input_us=shown.get("compute_input_us"),
        compute_infer_us=shown.get("compute_infer_us"),
        compute_output_us=shown.get("compute_output_us"),
        batch_formed=formed,
        stable=stable,
    )


def batches_formed(before: client.Statistics, after: client.Statistics) -> float | None:
    """Samples an execution between two readings of a model's counters: the batches the server formed (a
    dynamic batcher that splits a load shows here as batches smaller than the clients could fill)."""
    executions = after.executions - before.executions
    return (after.inferences - before.inferences) / executions if executions > 0 else None


def _fits(split: dict[str, float], p99_us: float) -> bool:
    """Whether a request's compute split (perf_analyzer's averages, in us) fits inside its p99 latency: the parts
    are spans between timestamps that fall within each request, unless the backend reports them out of order."""
    return all(v >= 0 for v in split.values()) and sum(split.values()) <= p99_us


# --- The first request after a load ------------------------------------------------------------------------------

WARM_REQUESTS = 10
"""Requests after the first two whose median is the warm latency."""


@dataclass(frozen=True, kw_only=True)
class FirstRequest:
    """Batch-1 request latencies on a freshly loaded model (medians over fresh servers), from one gRPC client
    that connected before the first request (so no channel setup is timed)."""

    model: str
    warmup: bool  # served with the config's model_warmup (True) or with it removed
    servers: int  # fresh servers measured
    load_s: float  # server start to the model ready (warmup runs inside it)
    first_ms: float
    second_ms: float
    warm_ms: float  # median of the next WARM_REQUESTS

    @property
    def cold_over_warm(self) -> float:
        return self.first_ms / self.warm_ms if self.warm_ms else 0.0


def first_requests(
    model: ModelDir, config: ModelConfig, *, warmup: bool, servers: int = 3, pt2_build: Pt2Build = "stock"
) -> FirstRequest:
    """Start ``servers`` fresh servers for ``model`` (``config``, its model_warmup kept or removed) and time the
    first, second and next requests on each."""
    from tritonpt.server import LocalServer, TritonFlags  # noqa: PLC0415

    served_config = ModelConfig()
    served_config.CopyFrom(config)
    if not warmup:
        served_config.ClearField("model_warmup")
    ref = reference.load(model)
    case = min(ref.cases, key=lambda c: c.batch_size)
    rows = slice(0, 1) if config.max_batch_size > 0 else slice(None)
    names = [o.name for o in ref.outputs]
    loads, firsts, seconds, warms = [], [], [], []
    for _ in range(servers):
        with repository.one_model(model, served_config) as folder:
            started = time.perf_counter()
            with LocalServer(
                TritonFlags(model_repository=folder, load_model=(model.name,)), pt2_build=pt2_build
            ) as server:
                server.wait_models_ready([model.name])
                loads.append(time.perf_counter() - started)
                with client.grpc(server.endpoints) as grpc:
                    grpc.is_server_ready()
                    inputs = {
                        t.name: np.ascontiguousarray(a[rows])
                        for t, a in zip(config.input, case.inputs, strict=True)
                    }
                    times = []
                    for _ in range(2 + WARM_REQUESTS):
                        began = time.perf_counter()
                        client.infer_on(grpc, "grpc", model.name, inputs, names)
                        times.append((time.perf_counter() - began) * 1000)
        firsts.append(times[0])
        seconds.append(times[1])
        warms.append(statistics.median(times[2:]))
    return FirstRequest(
        model=model.name,
        warmup=warmup,
        servers=servers,
        load_s=statistics.median(loads),
        first_ms=statistics.median(firsts),
        second_ms=statistics.median(seconds),
        warm_ms=statistics.median(warms),
    )


def write_reports(
    folder: Path, stem: str, json_text: str, markdown: str, plot: Callable[[Path], None]
) -> list[Path]:
    """``<folder>/<stem>.json``, ``.md`` and ``.png`` (drawn by ``plot``); the paths written."""
    folder.mkdir(parents=True, exist_ok=True)
    written = [folder / f"{stem}.json", folder / f"{stem}.md", folder / f"{stem}.png"]
    written[0].write_text(json_text + "\n", encoding="utf-8")
    written[1].write_text(markdown, encoding="utf-8")
    plot(written[2])
    return written
