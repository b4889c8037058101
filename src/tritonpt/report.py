"""Reports of an integration run: the environment, a parity table, timings; as Markdown and JSON.

JUnit XML comes from pytest itself (``--junitxml``). The integration tests add rows to a
:class:`Report` while they run; at the end it is written to the reports folder, printed, and appended to
the GitHub Actions job summary when ``GITHUB_STEP_SUMMARY`` is set.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tritonpt.backend import Origin
from tritonpt.parity import Comparison


@dataclass(frozen=True, kw_only=True)
class ParityRow:
    model: str
    protocol: str
    case: str
    batch_size: int
    output: str
    ok: bool
    max_abs_error: float
    max_rel_error: float
    atol: float
    rtol: float
    detail: str

    @classmethod
    def of(
        cls, *, model: str, protocol: str, case: str, batch_size: int, comparison: Comparison
    ) -> ParityRow:
        return cls(
            model=model,
            protocol=protocol,
            case=case,
            batch_size=batch_size,
            output=comparison.name,
            ok=comparison.ok,
            max_abs_error=comparison.max_abs_error,
            max_rel_error=comparison.max_rel_error,
            atol=comparison.tolerance.atol,
            rtol=comparison.tolerance.rtol,
            detail="" if comparison.ok else comparison.describe(),
        )


@dataclass(kw_only=True)
class Report:
    """Collected while the matrix runs; rendered at the end."""

    environment: dict[str, str] = field(default_factory=dict)
    runtimes: dict[str, str] = field(default_factory=dict)  # model -> runtime that served it
    backend: Origin | None = None  # where the server's libtriton_pytorch.so came from, when known
    devices: dict[str, str] = field(default_factory=dict)  # model -> cpu | gpu
    timings: dict[str, float] = field(default_factory=dict)  # label -> seconds
    requests: dict[str, int] = field(default_factory=dict)  # model -> inference requests the server counted
    parity: list[ParityRow] = field(default_factory=list)
    outcomes: dict[str, int] = field(default_factory=dict)  # passed / failed / skipped / error
    aborted: str = ""  # why the run stopped before the end (the server died), else ""

    def to_json(self) -> str:
        return json.dumps(
            {
                "aborted": self.aborted or None,
                "environment": self.environment,
                "models": {
                    model: {
                        "runtime": runtime,
                        "device": self.devices.get(model, "?"),
                        "pytorch_backend": asdict(self.backend) if self.backend is not None else None,
                    }
                    for model, runtime in sorted(self.runtimes.items())
                },
                "timings_s": {k: round(v, 3) for k, v in self.timings.items()},
                "requests": self.requests,
                "outcomes": self.outcomes,
                "parity": [asdict(row) for row in self.parity],
            },
            indent=2,
        )

    def to_markdown(self) -> str:
        lines = ["# Triton integration report", ""]
        if self.aborted:
            lines += ["**The run was aborted:**", "", "```", self.aborted, "```", ""]
        if self.outcomes:
            lines += [", ".join(f"{n} {k}" for k, n in sorted(self.outcomes.items())), ""]
        lines += ["## Environment", "", "| | |", "|---|---|"]
        lines += [f"| {key} | {value} |" for key, value in self.environment.items()]
        if self.runtimes:
            origin = self.backend
            lines += [
                "",
                "## Models",
                "",
                "| model | runtime | pytorch_backend | commit | built against torch | device |",
                "|---|---|---|---|---|---|",
            ]
            for model, runtime in sorted(self.runtimes.items()):
                ref, commit, torch = (origin.ref, origin.commit, origin.torch) if origin else ("?", "?", "?")
                lines.append(
                    f"| {model} | `{runtime}` | {ref} | `{commit}` | {torch} | {self.devices.get(model, '?')} |"
                )
        if self.parity:
            lines += [
                "",
                "## Parity: eager PyTorch vs Triton",
                "",
                "| model | protocol | case | output | result | max abs error | max rel error | atol / rtol |",
                "|---|---|---|---|---|---|---|---|",
            ]
            for row in sorted(self.parity, key=lambda r: (r.model, r.case, r.protocol, r.output)):
                verdict = "ok" if row.ok else "**MISMATCH**"
                lines.append(
                    f"| {row.model} | {row.protocol} | {row.case} | {row.output} | {verdict} | "
                    f"{row.max_abs_error:.3g} | {row.max_rel_error:.3g} | {row.atol:g} / {row.rtol:g} |"
                )
            failures = [row.detail for row in self.parity if not row.ok]
            if failures:
                lines += ["", "### Mismatches", ""] + [f"- {detail}" for detail in failures]
        if self.timings:
            lines += ["", "## Timings", "", "| step | seconds |", "|---|---|"]
            lines += [f"| {label} | {seconds:.2f} |" for label, seconds in self.timings.items()]
        return "\n".join(lines) + "\n"

    def write(self, folder: Path) -> tuple[Path, Path]:
        folder.mkdir(parents=True, exist_ok=True)
        markdown, data = folder / "summary.md", folder / "summary.json"
        markdown.write_text(self.to_markdown(), encoding="utf-8")
        data.write_text(self.to_json() + "\n", encoding="utf-8")
        summary = os.environ.get("GITHUB_STEP_SUMMARY")
        if summary:
            with Path(summary).open("a", encoding="utf-8") as handle:
                handle.write(self.to_markdown())
        return markdown, data
