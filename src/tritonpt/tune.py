"""Stage "tune": which settings serve one model best, searched on the real backend with perf_analyzer.

    the space      instance count, max_batch_size, preferred_batch_size, max_queue_delay_microseconds,
                   the backend's INTRA_OP_THREAD_COUNT and INTER_OP_THREAD_COUNT, and its optimized execution
    the search     coordinate descent from the model's own config: one dimension at a time, each of its values
                   with the others at the best found so far; a value wins only if it is faster by MARGIN
                   (two shared cores measure with a few percent of noise). About 13 candidates instead of the
                   grid's hundreds (:func:`grid_size`).
    a candidate    its own tritonserver on a one-model repository (model.pt linked, the candidate's
                   config.pbtxt): thread counts are process-wide in libtorch (``at::set_num_threads``, and
                   ``set_num_interop_threads`` may be called once), so candidates never share a server.
                   A config Triton refuses is a trial with the server's reason, not a hole in the table.
                   perf_analyzer (gRPC, batch-1 requests) at concurrency 1 and at the load that fills every
                   instance's batch.
    the winner     the highest throughput whose p99 fits the latency budget; before it is reported it is
                   served again and every reference case must match eager PyTorch; the next best is taken
                   if it does not.
    --apply        the winner's config.pbtxt replaces the model's through the same staged, validated path as
                   export (the folder is built aside, validated, then swapped in).

Reports: ``reports/tune/<model>/tune.{json,md,png}``: every trial, the Pareto front (throughput against p99),
the winner, how many candidates were measured and how long it took.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from tritonclient.grpc.model_config_pb2 import ModelConfig
from tritonclient.utils import InferenceServerException

from tritonpt import (
    __version__,
    bench,
    checks,
    client,
    export,
    perf_analyzer,
    reference,
    repository,
    spec,
    validate,
)
from tritonpt.client import Array
from tritonpt.errors import ModelLoadError, TritonPtError, ValidationError, first_line
from tritonpt.repository import ModelDir
from tritonpt.versions import VERSIONS

MARGIN = 0.03
"""How much faster a value must measure to replace the current one."""
WINDOW_MS = 1000
"""perf_analyzer's measurement window. Three windows make a measurement; they need only agree within a factor
of two (``--stability-percentage 100``), because on a busy 2-core machine the default 10 % makes perf_analyzer
give up ("Failed to obtain stable measurement") more often than it helps. MARGIN absorbs the noise instead."""
STABILITY = 100
TIMEOUT_S = 60.0
"""The most one load level may take (perf_analyzer never needs more than its three windows and a warm-up)."""
WARMUP_REQUESTS = 3
"""Requests sent before measuring: the first ones after a load run the TorchScript profiling passes."""

Step = Callable[[str], None]


class TuneError(TritonPtError):
    """A model could not be tuned: it is not in the repository, or its own config could not be measured."""


# --- The space ----------------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Settings:
    """One point of the space; ``None`` leaves a backend parameter to the backend's default."""

    instances: int
    max_batch_size: int
    preferred: tuple[int, ...] = ()
    queue_delay_us: int | None = None  # None: no dynamic batching
    intra_op_threads: int | None = None
    inter_op_threads: int | None = None
    optimized: bool = True  # DISABLE_OPTIMIZED_EXECUTION false

    @classmethod
    def of(cls, config: ModelConfig) -> Settings:
        """The settings a config.pbtxt has now."""
        batching = config.dynamic_batching if config.HasField("dynamic_batching") else None
        run = spec.BackendRun.of(config)
        return cls(
            instances=sum(group.count or 1 for group in config.instance_group) or 1,
            max_batch_size=config.max_batch_size,
            preferred=tuple(batching.preferred_batch_size) if batching else (),
            queue_delay_us=batching.max_queue_delay_microseconds if batching else None,
            intra_op_threads=run.intra_op_threads,
            inter_op_threads=run.inter_op_threads,
            optimized=run.optimized,
        )

    def config(self, base: ModelConfig) -> ModelConfig:
        """``base`` with these settings; every other field as it was (the first instance group carries the
        count, further groups are dropped; dynamic batching's other fields stay)."""
        config = ModelConfig()
        config.CopyFrom(base)
        config.max_batch_size = self.max_batch_size
        if not config.instance_group:
            config.instance_group.add()
        del config.instance_group[1:]
        config.instance_group[0].count = self.instances
        if self.queue_delay_us is None:
            config.ClearField("dynamic_batching")
        else:
            config.dynamic_batching.max_queue_delay_microseconds = self.queue_delay_us
            del config.dynamic_batching.preferred_batch_size[:]
            config.dynamic_batching.preferred_batch_size.extend(self.preferred)
        for key, value in (
            ("INTRA_OP_THREAD_COUNT", self.intra_op_threads),
            ("INTER_OP_THREAD_COUNT", self.inter_op_threads),
        ):
            if value is None:
                config.parameters.pop(key, None)
            else:
                config.parameters[key].string_value = str(value)
        config.parameters["DISABLE_OPTIMIZED_EXECUTION"].string_value = "false" if self.optimized else "true"
        return config

    def label(self) -> str:
        def threads(value: int | None) -> str:
            return "default" if value is None else str(value)

        batching = (
            "no dynamic batching"
            if self.queue_delay_us is None
            else f"delay {self.queue_delay_us} µs"
            + (f", preferred {list(self.preferred)}" if self.preferred else "")
        )
        return (
            f"{self.instances} instance(s), max batch {self.max_batch_size}, {batching}, "
            f"intra-op {threads(self.intra_op_threads)}, inter-op {threads(self.inter_op_threads)}, "
            f"optimized {'on' if self.optimized else 'off'}"
        )

    @property
    def filling(self) -> int:
        """The concurrency that fills every instance's batch."""
        return max(1, self.max_batch_size) * self.instances

    def load_levels(self, exported: Settings) -> tuple[int, ...]:
        """Concurrencies measured: one request at a time, the exported config's filling load (the levels every
        candidate is compared at), and this candidate's own filling load (for the Pareto front)."""
        return tuple(sorted({1, exported.filling, self.filling}))


@dataclass(frozen=True, kw_only=True)
class Dimension:
    name: str  # a field of Settings
    values: Callable[[Settings, Settings, int], Sequence[object]]  # (exported, current, cores) -> values


def _instances(_: Settings, __: Settings, cores: int) -> Sequence[object]:
    return [n for n in (1, 2, 4) if n <= max(2, cores)]


def _threads(_: Settings, __: Settings, cores: int) -> Sequence[object]:
    return list(dict.fromkeys([None, 1, cores]))


def _batches(exported: Settings, _: Settings, __: int) -> Sequence[object]:
    """Up to the exported max_batch_size only: the reference cases, which the winner's parity is checked on,
    go no further."""
    largest = exported.max_batch_size
    return list(dict.fromkeys([max(1, largest // 4), max(1, largest // 2), largest])) if largest > 0 else []


def _delays(exported: Settings, _: Settings, __: int) -> Sequence[object]:
    return [0, 100, 1000, 5000] if exported.queue_delay_us is not None else []


def _preferred(exported: Settings, current: Settings, _: int) -> Sequence[object]:
    if exported.queue_delay_us is None or current.max_batch_size <= 1:
        return []
    return [(), (current.max_batch_size,)]


# Threads first: on a CPU they decide more than anything else; then how work is spread and batched.
DIMENSIONS: tuple[Dimension, ...] = (
    Dimension(name="intra_op_threads", values=_threads),
    Dimension(name="inter_op_threads", values=lambda *_: [None, 1]),
    Dimension(name="optimized", values=lambda *_: [True, False]),
    Dimension(name="instances", values=_instances),
    Dimension(name="queue_delay_us", values=_delays),
    Dimension(name="max_batch_size", values=_batches),
    Dimension(name="preferred", values=_preferred),
)


def grid_size(exported: Settings, cores: int) -> int:
    """How many candidates a full grid of the same values would measure."""
    total = 1
    for dimension in DIMENSIONS:
        total *= max(1, len(dimension.values(exported, exported, cores)))
    return total


def _normalized(settings: Settings) -> Settings:
    """Preferred batch sizes above max_batch_size would make Triton refuse the config: drop them."""
    return replace(settings, preferred=tuple(b for b in settings.preferred if b <= settings.max_batch_size))


# --- Trials -----------------------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Trial:
    settings: Settings
    varied: str  # the dimension being explored ("exported" for the model's own config)
    seconds: float
    points: tuple[bench.Measurement, ...] = ()
    error: str | None = None  # why it did not serve ("refused: ...") or could not be measured ("failed: ...")
    compared: tuple[int, ...] = ()  # the concurrencies candidates are compared at (empty: every point)

    def best(self, budget_ms: float | None) -> bench.Measurement | None:
        """The fastest compared load level whose p99 fits the budget."""
        fitting = [
            p
            for p in self.points
            if (budget_ms is None or p.p99_ms <= budget_ms)
            and (not self.compared or p.concurrency in self.compared)
        ]
        return max(fitting, key=lambda p: p.throughput, default=None)

    def score(self, budget_ms: float | None) -> float:
        best = self.best(budget_ms)
        return best.throughput if best else 0.0


@contextmanager
def serving(model: ModelDir, config: ModelConfig) -> Iterator[client.Endpoints]:
    """One tritonserver with the official backend, serving ``config`` for ``model``; its endpoints."""
    from tritonpt.server import LocalServer, TritonFlags  # noqa: PLC0415

    with (
        repository.one_model(model, config) as folder,
        LocalServer(TritonFlags(model_repository=folder, load_model=(model.name,))) as server,
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
) -> Trial:
    """Serve one candidate and measure it at each load level; a refusal or a failed run is the trial's error."""
    started = time.perf_counter()
    config = settings.config(base)
    points = []
    error: str | None = None
    try:
        with serving(model, config) as endpoints:
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


Measure = Callable[[Settings, str], Trial]


def search(
    exported: Settings, measure_one: Measure, *, budget_ms: float | None, cores: int
) -> tuple[list[Trial], Trial]:
    """Coordinate descent from ``exported`` (see the module docstring): every trial in the order measured, and
    the best (a trial replaces it only when faster by MARGIN, so noise never wins)."""
    trials = [measure_one(exported, "exported")]
    best = trials[0]
    seen = {exported}
    for dimension in DIMENSIONS:
        current = best.settings
        for value in dimension.values(exported, current, cores):
            changed: dict[str, Any] = {dimension.name: value}
            candidate = _normalized(replace(current, **changed))
            if candidate in seen:
                continue
            seen.add(candidate)
            trial = measure_one(candidate, dimension.name)
            trials.append(trial)
            if trial.score(budget_ms) > best.score(budget_ms) * (1 + MARGIN):
                best = trial
    return trials, best


def confirmed(
    exported: Trial, best: Trial, exported_again: Trial, best_again: Trial, *, budget_ms: float | None
) -> Trial:
    """The search's best only if, over both of its measurements, it is still faster than the exported config
    by MARGIN: a machine's noise can make one measurement of the same settings a quarter faster."""
    mine = (best.score(budget_ms) + best_again.score(budget_ms)) / 2
    theirs = (exported.score(budget_ms) + exported_again.score(budget_ms)) / 2
    return best if mine > theirs * (1 + MARGIN) else exported


PARITY_TRIES = 3
"""How many winners in turn are re-checked for parity before the tune gives up and names no winner."""


def parity_order(trials: Sequence[Trial], best: Trial, budget_ms: float | None) -> list[Trial]:
    """Who is re-checked for parity, in turn: the search's best, then others faster than the exported config
    by MARGIN, fastest first, then the exported config itself (at most PARITY_TRIES)."""
    exported = trials[0]
    floor = exported.score(budget_ms) * (1 + MARGIN)
    faster = sorted(
        (t for t in trials if t is not best and t is not exported and t.score(budget_ms) > floor),
        key=lambda t: -t.score(budget_ms),
    )
    order = [t for t in (best, *faster, exported) if t.score(budget_ms) > 0]
    return list(dict.fromkeys(order))[:PARITY_TRIES]


def pareto_front(trials: Sequence[Trial]) -> list[tuple[Trial, bench.Measurement]]:
    """Points no other point beats on both throughput (higher) and p99 (lower), by p99."""
    points = [(t, p) for t in trials for p in t.points]
    front = [
        (t, p)
        for t, p in points
        if not any(
            q.throughput >= p.throughput
            and q.p99_ms <= p.p99_ms
            and (q.throughput, q.p99_ms) != (p.throughput, p.p99_ms)
            for _, q in points
        )
    ]
    return sorted(front, key=lambda tp: tp[1].p99_ms)


# --- Parity of the winner -----------------------------------------------------------------------------------


def parity_failures(model: ModelDir, config: ModelConfig) -> list[str]:
    """Serve ``config`` and send every reference case over HTTP and gRPC (in requests of at most
    max_batch_size rows); what disagrees with eager PyTorch, one line each."""
    ref = reference.load(model)
    names = [tensor.name for tensor in config.input]
    outputs = [info.name for info in ref.outputs]
    largest = max(1, config.max_batch_size)
    failures = []
    with serving(model, config) as endpoints:
        gpu = checks.served_on_gpu(config)
        for case in ref.cases:
            rows = case.batch_size if config.max_batch_size > 0 else 0
            chunks = [(0, None)] if rows == 0 else [(i, i + largest) for i in range(0, rows, largest)]
            for protocol in client.PROTOCOLS:
                parts: list[list[Array]] = []
                for start, stop in chunks:
                    inputs = {n: a[start:stop] for n, a in zip(names, case.inputs, strict=True)}
                    parts.append(client.infer(endpoints, protocol, model.name, inputs, outputs))
                got = [np.concatenate(pieces) if rows else pieces[0] for pieces in zip(*parts, strict=True)]
                comparisons = checks.compare_outputs(ref.outputs, got, case.outputs, gpu=gpu)
                failures += [f"{case.id} over {protocol}: {line}" for line in checks.mismatches(comparisons)]
    return failures


# --- The report -------------------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class TuneReport:
    model: str
    budget_ms: float | None
    cores: int
    grid: int
    seconds: float
    trials: tuple[Trial, ...]
    winner: Trial | None
    rejected: tuple[tuple[Trial, str], ...] = ()  # faster candidates that failed the parity re-check
    applied: Path | None = None
    environment: dict[str, str] = field(default_factory=dict)

    @property
    def exported(self) -> Trial:
        return self.trials[0]

    def speedup(self) -> float | None:
        base = self.exported.score(self.budget_ms)
        return self.winner.score(self.budget_ms) / base if self.winner and base else None

    def to_json(self) -> str:
        def trial(t: Trial) -> dict[str, object]:
            best = t.best(self.budget_ms)
            return {**asdict(t), "label": t.settings.label(), "best": asdict(best) if best else None}

        data = {
            "model": self.model,
            "latency_budget_ms": self.budget_ms,
            "cores": self.cores,
            "candidates_measured": len(self.trials),
            "grid_size": self.grid,
            "seconds": round(self.seconds, 1),
            "winner": trial(self.winner) if self.winner else None,
            "speedup_over_exported": self.speedup(),
            "rejected_for_parity": [{"trial": trial(t), "why": why} for t, why in self.rejected],
            "applied": str(self.applied) if self.applied else None,
            "pareto_front": [
                {
                    "label": t.settings.label(),
                    "concurrency": p.concurrency,
                    "throughput": p.throughput,
                    "p99_ms": p.p99_ms,
                }
                for t, p in pareto_front(self.trials)
            ],
            "trials": [trial(t) for t in self.trials],
            "environment": self.environment,
        }
        return json.dumps(data, indent=2)

    def to_markdown(self) -> str:
        budget = f"p99 ≤ {self.budget_ms:g} ms" if self.budget_ms is not None else "no latency budget"
        lines = [
            f"# Tuning {self.model}",
            "",
            f"{len(self.trials)} candidates measured ({self.grid} in the full grid of the same values) in "
            f"{self.seconds:.0f} s on {self.cores} cores; {budget}; load from perf_analyzer over gRPC, batch-1 "
            "requests.",
            "",
        ]
        if self.winner:
            best = self.winner.best(self.budget_ms)
            speedup = self.speedup()
            lines += [
                f"**Winner:** {self.winner.settings.label()}: {best.throughput:.1f} inferences/s at concurrency "
                f"{best.concurrency}, p99 {best.p99_ms:.1f} ms"
                + (f" ({speedup:.2f} times the exported config's)" if speedup else "")
                + "; every reference case matches eager PyTorch over HTTP and gRPC."
                if best
                else "",
                "",
            ]
        else:
            lines += ["**No winner:** no candidate served within the budget and kept parity.", ""]
        for trial, why in self.rejected:
            lines += [f"Rejected for parity: {trial.settings.label()}: {why}", ""]
        front = pareto_front(self.trials)
        lines += [
            "## The Pareto front (no other point is both faster and quicker)",
            "",
            "| settings | concurrency | inferences/s | p99 ms |",
            "|---|---|---|---|",
            *(
                f"| {t.settings.label()} | {p.concurrency} | {p.throughput:.1f} | {p.p99_ms:.1f} |"
                for t, p in front
            ),
            "",
            "## Every candidate",
            "",
        ]
        if self.applied:
            lines += [f"Applied to {self.applied} (staged, validated, swapped in).", ""]
        lines += [
            "| # | varied | settings | concurrency | inferences/s | p50 ms | p99 ms | queue µs | infer µs | on the front |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        on_front = {(id(t), p.concurrency) for t, p in front}
        for number, trial in enumerate(self.trials, 1):
            if trial.error:
                lines.append(
                    f"| {number} | {trial.varied} | {trial.settings.label()} | | {trial.error.replace('|', '/')} | | | | | |"
                )
            for p in trial.points:
                lines.append(
                    f"| {number} | {trial.varied} | {trial.settings.label()} | {p.concurrency} | {p.throughput:.1f} | "
                    f"{p.p50_ms:.1f} | {p.p99_ms:.1f} | {p.queue_us or 0:.0f} | {p.compute_infer_us or 0:.0f} | "
                    f"{'yes' if (id(trial), p.concurrency) in on_front else ''} |"
                )
        return "\n".join(lines) + "\n"

    def plot(self, path: Path) -> None:
        """Every measured point, throughput against p99, with the Pareto front and the budget."""
        import matplotlib  # noqa: PLC0415 - only the reports draw

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415

        figure, axes = plt.subplots(figsize=(8, 5))
        for trial in self.trials:
            for p in trial.points:
                axes.scatter(
                    p.p99_ms,
                    p.throughput,
                    color="tab:blue" if trial.varied != "exported" else "tab:orange",
                    s=18,
                )
        front = pareto_front(self.trials)
        if front:
            axes.plot(
                [p.p99_ms for _, p in front],
                [p.throughput for _, p in front],
                color="tab:green",
                label="Pareto front",
            )
        if self.winner and (best := self.winner.best(self.budget_ms)):
            axes.scatter(
                best.p99_ms, best.throughput, marker="*", s=220, color="tab:red", label="winner", zorder=3
            )
        if self.budget_ms is not None:
            axes.axvline(self.budget_ms, linestyle=":", color="grey", label="latency budget")
        axes.scatter([], [], color="tab:orange", s=18, label="exported config")
        axes.set(
            xlabel="p99 latency (ms)",
            ylabel="inferences/s",
            title=f"{self.model}: {len(self.trials)} candidates",
        )
        axes.legend(fontsize="small")
        figure.tight_layout()
        figure.savefig(path, dpi=110)
        plt.close(figure)

    def write(self, folder: Path) -> list[Path]:
        return bench.write_reports(folder, "tune", self.to_json(), self.to_markdown(), self.plot)


# --- Applying the winner ------------------------------------------------------------------------------------


def apply(model: ModelDir, config: ModelConfig, *, note: str) -> Path:
    """Replace the model's config.pbtxt with ``config``: the folder is copied aside, the config written and the
    copy validated as export validates, then swapped in (on any error the model stays as it was)."""
    with repository.staged_model(model.root.parent, model.name) as staged:
        shutil.copytree(model.root, staged.root, dirs_exist_ok=True, symlinks=True)
        staged.config.write_text(
            f"# Tuned by `invoke tune` (tritonpt {__version__}): {note}\n" + repository.render_config(config),
            encoding="utf-8",
        )
        others = [m for m in repository.models(model.root.parent) if m.name != model.name]
        validate.refuse_staged(
            staged,
            model.root,
            [
                *validate.validate_model(staged, gpu_available=True),
                *validate.process_wide_problems([staged, *others]),
            ],
        )
    return model.config


# --- The run ------------------------------------------------------------------------------------------------------


def run(
    repository_dir: Path,
    name: str,
    *,
    budget_ms: float | None = None,
    apply_winner: bool = False,
    window_ms: int = WINDOW_MS,
    step: Step = lambda _: None,
) -> TuneReport:
    """Search, re-check the winner's parity, and apply it if asked."""
    model = next((m for m in repository.models(repository_dir) if m.name == name), None)
    if model is None:
        held = ", ".join(m.name for m in repository.models(repository_dir)) or "no models"
        msg = f"Cannot tune {name!r}: {repository_dir} holds {held}. Export it first (`invoke export`)."
        raise TuneError(msg)
    if budget_ms is not None and budget_ms <= 0:
        msg = f"--latency-budget-ms {budget_ms:g}: a budget must be a positive number of milliseconds."
        raise TuneError(msg)
    problems = [p for p in validate.validate_model(model, gpu_available=True) if p.severity == "error"]
    if problems:
        raise ValidationError(problems)
    tool = perf_analyzer.locate(step)
    base = repository.read_config(model.config)
    exported = Settings.of(base)
    cores = len(os.sched_getaffinity(0))
    started = time.perf_counter()
    counter = itertools.count(1)

    def measure_one(settings: Settings, varied: str) -> Trial:
        number = next(counter)
        step(f"[{name}] candidate {number} ({varied}): {settings.label()}")
        trial = measure(
            model, base, settings, exported=exported, varied=varied, tool=tool, window_ms=window_ms
        )
        best = trial.best(budget_ms)
        outcome = (
            trial.error
            if trial.error
            else f"{best.throughput:.1f}/s at concurrency {best.concurrency}, p99 {best.p99_ms:.1f} ms"
            if best
            else "no load level within the budget"
        )
        step(f"[{name}] candidate {number}: {outcome} ({trial.seconds:.1f} s)")
        return trial

    trials, best_trial = search(exported, measure_one, budget_ms=budget_ms, cores=cores)
    if trials[0].error and trials[0].error.startswith("failed"):
        msg = f"Cannot tune {name!r}: its own config could not be measured ({trials[0].error})."
        raise TuneError(msg)
    if best_trial is not trials[0]:
        step(f"[{name}] confirming: the exported config and the best, each measured once more")
        again = [measure_one(exported, "confirm exported"), measure_one(best_trial.settings, "confirm best")]
        trials += again
        best_trial = confirmed(trials[0], best_trial, *again, budget_ms=budget_ms)
    winner, rejected = None, []
    for trial in parity_order(trials, best_trial, budget_ms):
        step(f"[{name}] re-checking parity: {trial.settings.label()}")
        try:
            failures = parity_failures(model, trial.settings.config(base))
        except (TritonPtError, InferenceServerException) as exc:
            failures = [f"it did not serve again: {first_line(exc)}"]
        if not failures:
            winner = trial
            break
        rejected.append((trial, "; ".join(failures[:3])))
    applied = None
    if winner and apply_winner and winner.settings == exported:
        step(f"[{name}] the exported config is the winner: {model.config} stays as it is")
    elif winner and apply_winner:
        best = winner.best(budget_ms)
        note = (
            f"{winner.settings.label()}; {best.throughput:.1f} inferences/s at concurrency {best.concurrency}, "
            f"p99 {best.p99_ms:.1f} ms on {cores} cores"
            if best
            else winner.settings.label()
        )
        step(f"[{name}] applying the winner to {model.config}")
        applied = apply(model, winner.settings.config(base), note=note)
        export.restamp(model)  # so that the next `invoke export` keeps the tuned config
    import torch  # noqa: PLC0415 - already loaded by validate; named for the report

    return TuneReport(
        model=name,
        budget_ms=budget_ms,
        cores=cores,
        grid=grid_size(exported, cores),
        seconds=time.perf_counter() - started,
        trials=tuple(trials),
        winner=winner,
        rejected=tuple(rejected),
        applied=applied,
        environment={
            "torch": torch.__version__,
            "perf_analyzer": f"tritonclient {VERSIONS.bench.tritonclient}",
        },
    )
