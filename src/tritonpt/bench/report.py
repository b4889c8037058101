"""The bench's report: the measurements and first requests of one run, as JSON, Markdown and a plot."""

from __future__ import annotations

import json
import statistics
from dataclasses import asdict, dataclass
from pathlib import Path

from tritonpt.bench.measure import SIDES, FirstRequest, Measurement, write_reports


@dataclass(frozen=True, kw_only=True)
class BenchReport:
    environment: dict[str, str]
    measurements: tuple[Measurement, ...]
    first_requests: tuple[FirstRequest, ...] = ()

    def _eager_runs(self, model: str, batch: int) -> list[float]:
        """The throughput of every eager run of the model at ``batch``: before and after the served sides, and
        those of other cases at the same batch (b8-c1 and b1-c8 both run eager at batch 8)."""
        return [
            m.throughput for m in self.measurements if (m.model, m.side, m.batch) == (model, "eager", batch)
        ]

    def baseline(self, model: str, case: str) -> float | None:
        """The mean of :meth:`_eager_runs` at the batch this case's eager side runs."""
        mine = (m.batch for m in self.measurements if (m.model, m.case, m.side) == (model, case, "eager"))
        runs = self._eager_runs(model, batch) if (batch := next(mine, None)) is not None else []
        return statistics.fmean(runs) if runs else None

    def ratio(self, model: str, case: str, side: str) -> float | None:
        """served / eager: a served side's throughput over :meth:`baseline`."""
        base = self.baseline(model, case)
        mine = (m.throughput for m in self.measurements if (m.model, m.case, m.side) == (model, case, side))
        throughput = next(mine, None)
        return throughput / base if base and throughput is not None else None

    def spreads(self) -> list[str]:
        """A line for each model and eager batch measured more than once: its range, against which a ratio is
        read."""
        lines = []
        for model, batch in sorted({(m.model, m.batch) for m in self.measurements if m.side == "eager"}):
            runs = self._eager_runs(model, batch)
            if len(runs) > 1 and min(runs) > 0:
                lines.append(
                    f"- {model}, eager at batch {batch}: {min(runs):.1f}-{max(runs):.1f} inferences/s over "
                    f"{len(runs)} runs ({max(runs) / min(runs) - 1:.0%} apart)"
                )
        return lines

    def to_json(self) -> str:
        rows = []
        for m in self.measurements:  # served / eager; for an eager run, how far it sits from the mean
            base = self.baseline(m.model, m.case)
            rows.append({**asdict(m), "ratio_to_eager": m.throughput / base if base else None})
        first = [{**asdict(f), "cold_over_warm": f.cold_over_warm} for f in self.first_requests]
        return json.dumps(
            {"environment": self.environment, "measurements": rows, "first_requests": first}, indent=2
        )

    def to_markdown(self) -> str:
        lines = ["# Served vs eager", "", "| | |", "|---|---|"]
        lines += [f"| {k} | {v} |" for k, v in self.environment.items()]
        lines += [
            "",
            "| model | case | side | inferences/s | served / eager | p50 ms | p90 ms | p99 ms | queue µs | compute in / infer / out µs | batch formed |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for m in self.measurements:
            ratio = self.ratio(m.model, m.case, m.side) if m.side != "eager" else None
            side = "eager, after" if m.after else m.side
            split = (
                f"{m.compute_input_us:.0f} / {m.compute_infer_us:.0f} / {m.compute_output_us:.0f}"
                if m.compute_infer_us is not None
                else ""
            )
            lines.append(
                f"| {m.model} | {m.case} | {side} | {m.throughput:.1f}{'' if m.stable else ' (unsteady)'} | {f'{ratio:.2f}' if ratio else ''} | "
                f"{m.p50_ms:.2f} | {m.p90_ms:.2f} | {m.p99_ms:.2f} | "
                f"{'' if m.queue_us is None else f'{m.queue_us:.0f}'} | {split} | "
                f"{'' if m.batch_formed is None else f'{m.batch_formed:.1f}'} |"
            )
        if spreads := self.spreads():
            lines += [
                "",
                "served / eager is against the mean of every eager run at the case's eager batch (before and after"
                " the served sides); how far those runs lay apart:",
                "",
                *spreads,
            ]
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
