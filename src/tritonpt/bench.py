"""Stage "bench": what serving costs against eager PyTorch, measured side by side with NVIDIA's perf_analyzer.

    for each model of the repository (or those named):
      cases   b1-c1: batch 1, one request at a time | bN-c1: the largest batch | b1-cN: batch-1 requests at
              concurrency N (the largest batch), which the dynamic batcher combines
      sides   eager: the same model.pt in this process with the backend's settings for its config (intra-op
              threads, optimized execution), at the case's batch (b1-cN: at batch N, the best the batcher can form)
              http, grpc: the model served by the official backend, load from perf_analyzer
      -> inferences/s, p50/p90/p99 latency, the server's split (queue, compute input, infer, output)
      -> served / eager ratios in reports/bench/bench.json, bench.md and bench.png
      the first request after a load, with and without the config's model_warmup, against warm ones

One process tree: this process measures eager, then starts one tritonserver (the built backend) and runs
perf_analyzer against it, one side at a time so that no two sides share the cores. ``--pin 1:0`` separates
them for good: the server (and eager) on one core, perf_analyzer on another. perf_analyzer comes from the
tritonclient wheel pinned in versions.toml [bench], fetched into the cache on first use (:mod:`tritonpt.perf_analyzer`).
"""

from __future__ import annotations

import argparse
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

from tritonpt import client, perf_analyzer, reference, repository, scratch, spec
from tritonpt.client import PROTOCOLS, Endpoints
from tritonpt.errors import TritonPtError
from tritonpt.repository import ModelDir
from tritonpt.versions import VERSIONS

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
    stable: bool = True  # False: the windows never agreed within 25 %; three more were taken as they came


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
    """The model file in this process at the case's eager batch, for about ``seconds``: the TorchScript file with
    the thread count and optimized execution the config gives the backend, or a PT2 package through
    ``aoti_load_package`` (AOTInductor eager); on ``cores`` only, when given."""
    module = _in_process(model, config)
    inputs = _feed(model, case.eager_batch)
    latencies: list[float] = []
    run = spec.BackendRun.of(config)
    before = torch.get_num_threads(), os.sched_getaffinity(0)
    if cores:
        os.sched_setaffinity(0, cores)
    torch.set_num_threads(run.intra_op_threads or len(cores) or before[0])
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
        torch.set_num_threads(before[0])
        os.sched_setaffinity(0, before[1])
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
        module: Callable[..., object] = torch.jit.load(str(path), map_location="cpu").eval()
        return module
    loaded = torch._inductor.aoti_load_package(str(path))
    names = [t.name for t in config.input]
    if all(n.startswith("KWARGS[") for n in names):
        keys = [n.removeprefix("KWARGS[").removesuffix("]") for n in names]
        return lambda *tensors: loaded(**dict(zip(keys, tensors, strict=True)))
    return loaded


def count_windows(requests: int, batch: int) -> list[str]:
    """perf_analyzer windows of ``requests`` samples each (at least 20 requests), until the last three agree
    within 25 % (at most six)."""
    return [
        "--measurement-mode", "count_windows", "--measurement-request-count", str(max(20, requests // batch)),
        "--stability-percentage", "25", "--max-trials", "6",
    ]  # fmt: skip


def time_windows(milliseconds: int, *, stability: int = 25, trials: int = 4) -> list[str]:
    """perf_analyzer windows of ``milliseconds`` each, until three agree within ``stability`` % (at most
    ``trials``)."""
    return [
        "--measurement-mode", "time_windows", "--measurement-interval", str(milliseconds),
        "--stability-percentage", str(stability), "--max-trials", str(trials),
    ]  # fmt: skip


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
        # The PT2 path reports its compute timestamps in the wrong order (docs/upstream/pt2-statistics.md):
        # its split of a request is no figure, so none is shown.
        **(
            {}
            if config.platform == repository.PT2_PLATFORM
            else {
                "compute_input_us": float(row["Server Compute Input"]),
                "compute_infer_us": float(row["Server Compute Infer"]),
                "compute_output_us": float(row["Server Compute Output"]),
            }
        ),
        stable=stable,
    )


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


def first_requests(model: ModelDir, config: ModelConfig, *, warmup: bool, servers: int = 3) -> FirstRequest:
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
            with LocalServer(TritonFlags(model_repository=folder, load_model=(model.name,))) as server:
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


# --- The run and its report ---------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class BenchReport:
    environment: dict[str, str]
    measurements: tuple[Measurement, ...]
    first_requests: tuple[FirstRequest, ...] = ()

    def ratio(self, model: str, case: str, side: str) -> float | None:
        """served / eager throughput for one model and case."""
        by = {(m.model, m.case, m.side): m for m in self.measurements}
        base, other = by.get((model, case, "eager")), by.get((model, case, side))
        return other.throughput / base.throughput if base and other and base.throughput else None

    def to_json(self) -> str:
        rows = [
            {**asdict(m), "ratio_to_eager": self.ratio(m.model, m.case, m.side) if m.side != "eager" else 1.0}
            for m in self.measurements
        ]
        first = [{**asdict(f), "cold_over_warm": f.cold_over_warm} for f in self.first_requests]
        return json.dumps(
            {"environment": self.environment, "measurements": rows, "first_requests": first}, indent=2
        )

    def to_markdown(self) -> str:
        lines = ["# Served vs eager", "", "| | |", "|---|---|"]
        lines += [f"| {k} | {v} |" for k, v in self.environment.items()]
        lines += [
            "",
            "| model | case | side | inferences/s | served / eager | p50 ms | p90 ms | p99 ms | queue µs | compute in / infer / out µs |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for m in self.measurements:
            ratio = self.ratio(m.model, m.case, m.side) if m.side != "eager" else None
            split = (
                f"{m.compute_input_us:.0f} / {m.compute_infer_us:.0f} / {m.compute_output_us:.0f}"
                if m.compute_infer_us is not None
                else ""
            )
            lines.append(
                f"| {m.model} | {m.case} | {m.side} | {m.throughput:.1f}{'' if m.stable else ' (unsteady)'} | {f'{ratio:.2f}' if ratio else ''} | "
                f"{m.p50_ms:.2f} | {m.p90_ms:.2f} | {m.p99_ms:.2f} | "
                f"{'' if m.queue_us is None else f'{m.queue_us:.0f}'} | {split} |"
            )
        if self.first_requests:
            lines += [
                "",
                "## The first request after a load",
                "",
                "Batch-1 requests from one connected gRPC client, medians over fresh servers.",
                "",
                "| model | model_warmup | servers | start to ready s | first ms | second ms | warm ms | first / warm |",
                "|---|---|---|---|---|---|---|---|",
            ]
            lines += [
                f"| {f.model} | {'yes' if f.warmup else 'no'} | {f.servers} | {f.load_s:.2f} | {f.first_ms:.1f} | "
                f"{f.second_ms:.1f} | {f.warm_ms:.1f} | {f.cold_over_warm:.1f} |"
                for f in self.first_requests
            ]
        return "\n".join(lines) + "\n"

    def plot(self, path: Path) -> None:
        """Throughput against concurrency (batch-1 requests) and the latency percentiles, per model."""
        import matplotlib  # noqa: PLC0415 - only the bench draws

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415

        models = sorted({m.model for m in self.measurements})
        figure, axes = plt.subplots(len(models), 2, figsize=(11, 3.2 * len(models)), squeeze=False)
        for row, model in enumerate(models):
            mine = [m for m in self.measurements if m.model == model]
            left, right = axes[row]
            for side in SIDES:
                points = sorted(
                    (m.concurrency, m.throughput) for m in mine if m.side == side and m.batch == 1
                )
                if side != "eager" and points:
                    left.plot(*zip(*points, strict=True), marker="o", label=side)
            for m in mine:
                if m.side == "eager":
                    left.axhline(m.throughput, linestyle=":", color="grey")
            left.set(
                title=f"{model}: batch-1 requests (dotted: eager)",
                xlabel="concurrency",
                ylabel="inferences/s",
            )
            left.set_yscale("log")
            left.legend(fontsize="small")
            labels = [f"{m.case}\n{m.side}" for m in mine]
            for offset, (name, key) in enumerate((("p50", "p50_ms"), ("p90", "p90_ms"), ("p99", "p99_ms"))):
                right.bar(
                    [i + offset * 0.27 for i in range(len(mine))],
                    [getattr(m, key) for m in mine],
                    width=0.27,
                    label=name,
                )
            right.set_xticks(range(len(mine)), labels, fontsize="x-small")
            right.set(title=f"{model}: latency", ylabel="ms")
            right.legend(fontsize="small")
        figure.tight_layout()
        figure.savefig(path, dpi=110)
        plt.close(figure)

    def write(self, folder: Path) -> list[Path]:
        return write_reports(folder, "bench", self.to_json(), self.to_markdown(), self.plot)


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


def run(
    repository_dir: Path,
    *,
    names: Sequence[str] = (),
    eager_seconds: float = 3.0,
    requests: int = 200,
    servers: int = 3,
    pin: Pinning | None = None,
    step: Callable[[str], None] = lambda _: None,
) -> BenchReport:
    """Measure every case of every chosen model: eager first, then one server for the served sides."""
    from tritonpt.server import LocalServer, TritonFlags  # noqa: PLC0415

    chosen = [m for m in repository.models(repository_dir) if not names or m.name in names]
    missing = sorted(set(names) - {m.name for m in chosen})
    if missing or not chosen:
        msg = f"Cannot benchmark {', '.join(missing) or 'anything'}: {repository_dir} holds {', '.join(m.name for m in repository.models(repository_dir)) or 'no models'}."
        raise BenchError(msg)
    tool = perf_analyzer.locate(step)  # fetched on first use; fails before anything is measured
    configs = {m.name: repository.read_config(m.config) for m in chosen}
    measured: list[Measurement] = []
    for model in chosen:
        for case in cases_for(configs[model.name]):
            step(f"[{model.name}] {case.id}: eager at batch {case.eager_batch}")
            measured.append(
                eager(
                    model,
                    case,
                    seconds=eager_seconds,
                    config=configs[model.name],
                    cores=pin.server if pin else (),
                )
            )
    with LocalServer(TritonFlags(model_repository=repository_dir), cpus=pin.server if pin else ()) as server:
        server.wait_models_ready([m.name for m in chosen])
        for model in chosen:
            for case in cases_for(configs[model.name]):
                for protocol in PROTOCOLS:
                    step(f"[{model.name}] {case.id}: {protocol} (perf_analyzer)")
                    measured.append(
                        served(
                            server.endpoints,
                            protocol,
                            model,
                            configs[model.name],
                            case,
                            windows=count_windows(requests, case.batch),
                            tool=tool,
                            cores=pin.client if pin else (),
                        )
                    )
        origin, pt2 = server.backend_origin(), server.pt2_origin()
        version = server.install.version if server.install else "unknown"
    cold = []
    for model in chosen:
        for warmup in (False, True) if configs[model.name].model_warmup else (False,):
            step(f"[{model.name}] first request after a load, {'with' if warmup else 'without'} model_warmup")
            cold.append(first_requests(model, configs[model.name], warmup=warmup, servers=servers))
    environment = {
        "torch": torch.__version__,
        "eager": "the config's INTRA_OP_THREAD_COUNT (else "
        + (
            f"one thread per pinned core, {len(pin.server)}"
            if pin
            else f"torch's default, {torch.get_num_threads()}"
        )
        + ") and its optimized execution, as the backend runs it",
        "cores": str(os.cpu_count()),
        "pinning": f"server and eager on cores {list(pin.server)}, perf_analyzer on {list(pin.client)}"
        if pin
        else "none (server, perf_analyzer and eager share every core)",
        "perf_analyzer": f"tritonclient {VERSIONS.bench.tritonclient}",
        "server": f"tritonserver {version}",
        "pytorch backend": origin.describe() if origin else "the server's own",
        **({"pt2 backend": f"{pt2.describe()}, as backends/pt2/"} if pt2 else {}),
    }
    return BenchReport(environment=environment, measurements=tuple(measured), first_requests=tuple(cold))


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m tritonpt.bench``: served vs eager, with ratios; or install perf_analyzer from its wheel."""
    parser = argparse.ArgumentParser(prog="python -m tritonpt.bench", description=__doc__.splitlines()[0])
    parser.add_argument("--repository", type=Path, default=repository.DEFAULT_REPOSITORY)
    parser.add_argument("--model", action="append", default=[], help="benchmark only this model (repeatable)")
    parser.add_argument("--reports", type=Path, default=Path("reports/bench"))
    parser.add_argument(
        "--smoke", action="store_true", help="short windows: checks that the bench runs, not how fast"
    )
    parser.add_argument(
        "--pin",
        metavar="SERVER:CLIENT",
        help="pin the server (and eager) and perf_analyzer to separate cores with taskset, e.g. 1:0",
    )
    parser.add_argument(
        "--install-perf-analyzer",
        type=Path,
        metavar="WHEEL",
        help="install perf_analyzer from this wheel (the pinned tritonclient's) and stop; otherwise it is fetched on first use",
    )
    options = parser.parse_args(argv)

    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    try:
        with scratch.stop_signals_interrupt():
            return _main(options, say)
    except KeyboardInterrupt as interrupt:
        say("bench: interrupted; the server was stopped and no report was written")
        return scratch.exit_code(interrupt)


def _main(options: argparse.Namespace, say: Callable[[str], None]) -> int:
    try:
        if options.install_perf_analyzer:
            say(f"perf_analyzer installed at {perf_analyzer.install(options.install_perf_analyzer)}")
            return 0
        report = run(
            options.repository,
            names=options.model,
            eager_seconds=0.5 if options.smoke else 3.0,
            requests=20 if options.smoke else 200,
            servers=1 if options.smoke else 3,
            pin=Pinning.parse(options.pin) if options.pin else None,
            step=say,
        )
        written = report.write(options.reports)
    except TritonPtError as exc:
        say(f"error: {exc}")
        return 1
    print(report.to_markdown())
    say("written: " + ", ".join(str(p) for p in written))
    return 0


if __name__ == "__main__":
    sys.exit(main())
