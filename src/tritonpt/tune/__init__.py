"""Stage "tune": which settings serve one model best, searched on the real backend with perf_analyzer.

Coordinate descent from the model's own config over instance count, batching and the backend's thread and
execution settings (:mod:`~tritonpt.tune.space`); each candidate served by its own tritonserver and measured
(:mod:`~tritonpt.tune.trials`); the winner the highest throughput within the latency budget that still matches
eager PyTorch on every reference case. :mod:`~tritonpt.tune.report` writes ``reports/tune/<model>/``. Here:
:func:`run`, and :func:`apply` (``--apply``), which swaps the winner's config.pbtxt in through export's
staged, validated path.
"""

from __future__ import annotations

import itertools
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from tritonclient.grpc.model_config_pb2 import ModelConfig
from tritonclient.utils import InferenceServerException

from tritonpt import __version__, export, perf_analyzer, repository, validate
from tritonpt.errors import TritonPtError, ValidationError, first_line
from tritonpt.options import Pt2Build
from tritonpt.repository import ModelDir
from tritonpt.tune.report import TuneReport
from tritonpt.tune.space import (
    DIMENSIONS,
    MARGIN,
    Known,
    Measure,
    Settings,
    Trial,
    batch_execution_us,
    confirmed,
    grid_size,
    pareto_front,
    parity_order,
    search,
)
from tritonpt.tune.trials import WINDOW_MS, measure, parity_failures
from tritonpt.versions import VERSIONS

__all__ = [
    "DIMENSIONS",
    "MARGIN",
    "Known",
    "Measure",
    "Settings",
    "Trial",
    "TuneError",
    "TuneReport",
    "apply",
    "confirmed",
    "grid_size",
    "pareto_front",
    "parity_order",
    "run",
    "search",
]

Step = Callable[[str], None]


class TuneError(TritonPtError):
    """A model could not be tuned: it is not in the repository, or its own config could not be measured."""


# --- Applying the winner ------------------------------------------------------------------------------------


def apply(model: ModelDir, config: ModelConfig, *, note: str, pt2_build: Pt2Build = "stock") -> Path:
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
                *validate.validate_model(staged, gpu_available=True, pt2_build=pt2_build),
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
    pt2_build: Pt2Build = "stock",
) -> TuneReport:
    """Search, re-check the winner's parity, and apply it if asked; a PT2 model served, checked and validated for
    the PT2 build ``pt2_build``."""
    model = next((m for m in repository.models(repository_dir) if m.name == name), None)
    if model is None:
        held = ", ".join(m.name for m in repository.models(repository_dir)) or "no models"
        msg = f"Cannot tune {name!r}: {repository_dir} holds {held}. Export it first (`invoke export`)."
        raise TuneError(msg)
    if budget_ms is not None and budget_ms <= 0:
        msg = f"--latency-budget-ms {budget_ms:g}: a budget must be a positive number of milliseconds."
        raise TuneError(msg)
    problems = [
        p
        for p in validate.validate_model(model, gpu_available=True, pt2_build=pt2_build)
        if p.severity == "error"
    ]
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
            model,
            base,
            settings,
            exported=exported,
            varied=varied,
            tool=tool,
            window_ms=window_ms,
            pt2_build=pt2_build,
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
            failures = parity_failures(model, trial.settings.config(base), pt2_build=pt2_build)
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
        applied = apply(model, winner.settings.config(base), note=note, pt2_build=pt2_build)
        export.restamp(model)  # so that the next `invoke export` keeps the tuned config
    import torch  # noqa: PLC0415 - already loaded by validate; named for the report

    return TuneReport(
        model=name,
        budget_ms=budget_ms,
        cores=cores,
        grid=grid_size(exported, cores, batch_us=batch_execution_us(trials[0], exported)),
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
