"""Reports of an integration run: the environment, a parity table, timings; as Markdown and JSON.

JUnit XML comes from pytest itself (``--junitxml``). The integration tests add rows to a
:class:`Report` while they run; at the end it is written to the reports folder, printed, and appended to
the GitHub Actions job summary when ``GITHUB_STEP_SUMMARY`` is set.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, NotRequired, TypedDict

from tritonpt.backend import PT2_LIBRARY, Origin
from tritonpt.shards import Costs, Shard

if TYPE_CHECKING:  # the report reads with the standard library alone (nox -s merge-reports installs nothing)
    from tritonpt.parity import Comparison


class ShardIdentity(TypedDict):
    """Which part of a split a sharded run was (:func:`shard_identity`)."""

    index: int
    count: int
    models: list[str]
    total: int  # models in the whole split, every shard's together
    balanced_by: str
    costs_digest: str


def shard_identity(shard: Shard, names: Sequence[str], total: int, costs: Costs | None) -> ShardIdentity:
    """What a shard's report says of it (``names``: its models, of ``total`` in the split), for merge-reports."""
    return {
        "index": shard.index,
        "count": shard.count,
        "models": sorted(names),
        "total": total,
        "balanced_by": f"measured costs ({costs.source}, digest {costs.digest})"
        if costs and costs.seconds
        else "a stable hash of the names",
        "costs_digest": costs.digest if costs else "",
    }


class ShardState(TypedDict):
    """One shard in a merged report."""

    shard: str  # "2/4"
    models: int | str  # how many it ran; "?" when it is missing
    state: str
    server_memory_mb: NotRequired[float]  # its server's resident memory at the end, where it was read


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
    pt2_backend: Origin | None = None  # the PT2 build serving torch_aoti models under the second name, if any
    devices: dict[str, str] = field(default_factory=dict)  # model -> cpu | gpu
    timings: dict[str, float] = field(default_factory=dict)  # label -> seconds
    requests: dict[str, int] = field(default_factory=dict)  # model -> inference requests the server counted
    parity: list[ParityRow] = field(default_factory=list)
    outcomes: dict[str, int] = field(default_factory=dict)  # passed / failed / skipped / error
    aborted: str = ""  # why the run stopped before the end (the server died), else ""
    costs: dict[str, dict[str, float]] = field(default_factory=dict)  # model -> export_s, load_s, matrix_s
    shard: ShardIdentity | None = None  # shard_identity() of a sharded run
    server_memory_mb: float | None = None  # the server's resident memory at the end, where it can be read
    shards: list[ShardState] = field(default_factory=list)  # a merged report: each shard and its state
    checks: dict[str, list[str]] = field(
        default_factory=dict
    )  # node id -> pytest's outcome categories (merge)
    probes: dict[str, dict[str, str | bool]] = field(
        default_factory=dict
    )  # model format -> {"model": the model bad requests go to, "batches": whether it batches} (merge)
    probe_checks: dict[str, str] = field(
        default_factory=dict
    )  # node id -> the format of the probe it was sent to
    # model -> what its outputs were held to: {"held_to": words, "source": "export" | "in-process", "torch": ...,
    # "tolerances": {output: {"atol", "rtol"}}}, or {"held_to": "nothing", "error": why} (tritonpt.matrix.models)
    held_to: dict[str, dict[str, object]] = field(default_factory=dict)
    # model -> what the checks noticed that Triton does as its rules say but a team may not expect (a dynamic
    # batcher with nothing to combine): told in the report, never a failure
    findings: dict[str, list[str]] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(
            {
                "aborted": self.aborted or None,
                "environment": self.environment,
                "models": {
                    model: {
                        "runtime": runtime,
                        "device": self.devices.get(model, "?"),
                        "pytorch_backend": asdict(origin) if (origin := self.origin_of(runtime)) else None,
                    }
                    for model, runtime in sorted(self.runtimes.items())
                },
                "timings_s": {k: round(v, 3) for k, v in self.timings.items()},
                "requests": self.requests,
                "outcomes": self.outcomes,
                "costs": {m: {k: round(v, 3) for k, v in c.items()} for m, c in sorted(self.costs.items())},
                "server_memory_mb": self.server_memory_mb,
                "shard": self.shard,
                "shards": self.shards,
                "checks": self.checks,
                "probes": self.probes,
                "probe_checks": self.probe_checks,
                "held_to": self.held_to,
                "findings": self.findings,
                "parity": [asdict(row) for row in self.parity],
            },
            indent=2,
        )

    def to_markdown(self) -> str:
        lines = ["# Triton integration report", ""]
        if self.aborted:
            lines += ["**The run was aborted:**", "", "```", self.aborted, "```", ""]
        if self.shard is not None:
            shard = self.shard
            lines += [
                f"Shard {shard['index']} of {shard['count']}: {len(shard['models'])} model(s), "
                f"balanced by {shard['balanced_by']}.",
                "",
            ]
        if self.shards:
            lines += ["## Shards", "", "| shard | models | state | server memory |", "|---|---|---|---|"]
            lines += [
                f"| {s['shard']} | {s['models']} | {s['state']} | {_megabytes(s.get('server_memory_mb'))} |"
                for s in self.shards
            ]
            lines.append("")
        if self.outcomes:
            lines += [", ".join(f"{n} {k}" for k, n in sorted(self.outcomes.items())), ""]
        lines += ["## Environment", "", "| | |", "|---|---|"]
        lines += [f"| {key} | {value} |" for key, value in self.environment.items()]
        if self.runtimes:
            lines += [
                "",
                "## Models",
                "",
                "| model | runtime | pytorch_backend | commit | built against torch | device |",
                "|---|---|---|---|---|---|",
            ]
            for model, runtime in sorted(self.runtimes.items()):
                origin = self.origin_of(runtime)
                ref, commit, torch = (origin.ref, origin.commit, origin.torch) if origin else ("?", "?", "?")
                lines.append(
                    f"| {model} | `{runtime}` | {ref} | `{commit}` | {torch} | {self.devices.get(model, '?')} |"
                )
        if self.held_to:
            lines += [
                "",
                "## What each model was held to",
                "",
                "| model | held to | tolerance |",
                "|---|---|---|",
            ]
            for model, held in sorted(self.held_to.items()):
                tolerances = held.get("tolerances")
                said = (
                    ", ".join(
                        f"{name}: atol {t['atol']:g}, rtol {t['rtol']:g}"
                        for name, t in tolerances.items()
                        if isinstance(t, dict)
                    )
                    if isinstance(tolerances, dict)
                    else "-"
                )
                what = f"**nothing**: {held.get('error')}" if held.get("error") else held.get("held_to")
                lines.append(f"| {model} | {what} | {said} |")
        if self.findings:
            lines += ["", "## Findings (not failures)", ""]
            lines += [
                f"- {model}: {said}" for model, found in sorted(self.findings.items()) for said in found
            ]
        if self.parity:
            lines += [
                "",
                "## Parity: served outputs against the reference",
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
        if self.server_memory_mb is not None:
            whose = " (the largest of the shards' servers)" if self.shards else ""
            lines += ["", f"Server resident memory at the end: {self.server_memory_mb:.0f} MB{whose}."]
        if self.costs:
            lines += [
                "",
                "## Seconds per model",
                "",
                "| model | export | load | matrix |",
                "|---|---|---|---|",
            ]
            lines += [
                f"| {m} | {c.get('export_s', 0):.2f} | {c.get('load_s', 0):.2f} | {c.get('matrix_s', 0):.2f} |"
                for m, c in sorted(self.costs.items())
            ]
        return "\n".join(lines) + "\n"

    def origin_of(self, runtime: str) -> Origin | None:
        """The build behind a model's runtime: the PT2 one for ``libtriton_pt2.so``, else the pytorch one."""
        if self.pt2_backend is not None and runtime == PT2_LIBRARY:
            return self.pt2_backend
        return self.backend

    @classmethod
    def from_json(cls, text: str) -> Report:
        """A report as :meth:`to_json` wrote it (what ``merge-reports`` reads); ``ValueError`` when it is not one."""
        data = json.loads(text)
        models = data.get("models", {})

        def origin(pt2: bool) -> Origin | None:  # each model records the build behind its runtime
            found = (
                m["pytorch_backend"]
                for m in models.values()
                if m.get("pytorch_backend") and (m["runtime"] == PT2_LIBRARY) == pt2
            )
            return next((Origin(**o) for o in found), None)

        return cls(
            environment=dict(data.get("environment", {})),
            runtimes={name: m["runtime"] for name, m in models.items()},
            devices={name: m.get("device", "?") for name, m in models.items()},
            backend=origin(pt2=False),
            pt2_backend=origin(pt2=True),
            timings=dict(data.get("timings_s", {})),
            requests=dict(data.get("requests", {})),
            parity=[ParityRow(**row) for row in data.get("parity", [])],
            outcomes=dict(data.get("outcomes", {})),
            aborted=data.get("aborted") or "",
            costs=dict(data.get("costs", {})),
            shard=data.get("shard"),
            server_memory_mb=data.get("server_memory_mb"),
            shards=list(data.get("shards", [])),
            checks={str(k): list(v) for k, v in data.get("checks", {}).items()},
            probes={str(k): dict(v) for k, v in data.get("probes", {}).items()},
            probe_checks={str(k): str(v) for k, v in data.get("probe_checks", {}).items()},
            held_to={str(k): dict(v) for k, v in data.get("held_to", {}).items()},
            findings={str(k): list(v) for k, v in data.get("findings", {}).items()},
        )

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


def _megabytes(value: float | None) -> str:
    return "not read" if value is None else f"{value:.0f} MB"
