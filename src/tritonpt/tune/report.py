"""The tune's report: every trial, the Pareto front (throughput against p99), the winner; JSON, Markdown, a plot."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tritonpt import bench
from tritonpt.tune.space import Trial, pareto_front

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
