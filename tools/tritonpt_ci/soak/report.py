"""The counters and the report: soak.json, soak.md and the reliability part `soak`."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tritonpt.reporting.reliability import PARTS, count_tracebacks, write_part
from tritonpt_ci.soak.plan import RSS_BOUND_MB

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
        """The reliability part ``soak`` (the fields tritonpt_ci.reliability reads, plus the verdict and the time)."""
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
