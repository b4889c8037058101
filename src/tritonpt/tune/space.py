"""The space the tune searches, and how it searches it: coordinate descent from the model's own config.

Settings     one point: instances, max_batch_size, preferred_batch_size, the queue delay, the backend's
             thread counts and optimized execution; rendered into a config
DIMENSIONS   the values of each, threads first
search       one dimension at a time, each value with the others at the best so far; a value wins only if
             it is faster by MARGIN (two shared cores measure with a few percent of noise)
confirmed, parity_order, pareto_front   what is done with the trials afterwards
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from tritonclient.grpc.model_config_pb2 import ModelConfig

from tritonpt import bench, spec

MARGIN = 0.03
"""How much faster a value must measure to replace the current one."""
BATCH_DELAY = 1.25
"""The queue delay tried beside the fixed ones, in batch executions as the exported config's trial measured them."""


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
class Known:
    """What a dimension's values are chosen from: the model's own settings, the best found so far, the cores,
    and how long the exported config's trial took to execute a batch at its filling load (None: not measured)."""

    exported: Settings
    current: Settings
    cores: int
    batch_us: float | None = None


@dataclass(frozen=True, kw_only=True)
class Dimension:
    name: str  # a field of Settings
    values: Callable[[Known], Sequence[object]]


def _instances(known: Known) -> Sequence[object]:
    return [n for n in (1, 2, 4) if n <= max(2, known.cores)]


def _threads(known: Known) -> Sequence[object]:
    return list(dict.fromkeys([None, 1, known.cores]))


def _batches(known: Known) -> Sequence[object]:
    """Up to the exported max_batch_size only: the reference cases, which the winner's parity is checked on,
    go no further."""
    largest = known.exported.max_batch_size
    return list(dict.fromkeys([max(1, largest // 4), max(1, largest // 2), largest])) if largest > 0 else []


def _delays(known: Known) -> Sequence[object]:
    """Fixed delays, and one of a batch execution and a quarter. Triton's dynamic batcher closes the next batch
    once its oldest request has waited the delay, also while the instance is still busy, and that batch then
    waits for the instance whole: under a steady load of max_batch_size clients the requests settle into groups
    that take turns and never merge (traced: 1 and 7, 2 and 6, at concurrency 8; docs/figures/bench.md). Two
    groups merge once the delay outlasts the shorter one's execution, which is at most a half batch's; the
    request-weighted compute infer the trial measured is at least that, and the quarter is room for the spread
    of the clients' resends (500 ms, 1.03 executions of a batch of 8, filled every batch). What it costs a
    request without company is the delay itself, which the trial's concurrency-1 point shows."""
    if known.exported.queue_delay_us is None:
        return []
    fixed: list[object] = [0, 100, 1000, 5000]
    return [*fixed, round(BATCH_DELAY * known.batch_us)] if known.batch_us else fixed


def _preferred(known: Known) -> Sequence[object]:
    if known.exported.queue_delay_us is None or known.current.max_batch_size <= 1:
        return []
    return [(), (known.current.max_batch_size,)]


# Threads first: on a CPU they decide more than anything else; then how work is spread and batched.
DIMENSIONS: tuple[Dimension, ...] = (
    Dimension(name="intra_op_threads", values=_threads),
    Dimension(name="inter_op_threads", values=lambda _: [None, 1]),
    Dimension(name="optimized", values=lambda _: [True, False]),
    Dimension(name="instances", values=_instances),
    Dimension(name="queue_delay_us", values=_delays),
    Dimension(name="max_batch_size", values=_batches),
    Dimension(name="preferred", values=_preferred),
)


def grid_size(exported: Settings, cores: int, *, batch_us: float | None = None) -> int:
    """How many candidates a full grid of the same values would measure."""
    known = Known(exported=exported, current=exported, cores=cores, batch_us=batch_us)
    total = 1
    for dimension in DIMENSIONS:
        total *= max(1, len(dimension.values(known)))
    return total


def normalized(settings: Settings) -> Settings:
    """Preferred batch sizes above max_batch_size would make Triton refuse the config: drop them."""
    return replace(settings, preferred=tuple(b for b in settings.preferred if b <= settings.max_batch_size))


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


Measure = Callable[[Settings, str], Trial]


def search(
    exported: Settings, measure_one: Measure, *, budget_ms: float | None, cores: int
) -> tuple[list[Trial], Trial]:
    """Coordinate descent from ``exported`` (see the module docstring): every trial in the order measured, and
    the best (a trial replaces it only when faster by MARGIN, so noise never wins)."""
    trials = [measure_one(exported, "exported")]
    best = trials[0]
    seen = {exported}
    batch_us = batch_execution_us(trials[0], exported)
    for dimension in DIMENSIONS:
        current = best.settings
        for value in dimension.values(
            Known(exported=exported, current=current, cores=cores, batch_us=batch_us)
        ):
            changed: dict[str, Any] = {dimension.name: value}
            candidate = normalized(replace(current, **changed))
            if candidate in seen:
                continue
            seen.add(candidate)
            trial = measure_one(candidate, dimension.name)
            trials.append(trial)
            if trial.score(budget_ms) > best.score(budget_ms) * (1 + MARGIN):
                best = trial
    return trials, best


def batch_execution_us(trial: Trial, settings: Settings) -> float | None:
    """A batch's execution as the server reported it at ``settings``' filling load (compute infer a request is
    its batch's), if the trial measured that load."""
    return next(
        (
            p.compute_infer_us
            for p in trial.points
            if p.concurrency == settings.filling and p.compute_infer_us
        ),
        None,
    )


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
