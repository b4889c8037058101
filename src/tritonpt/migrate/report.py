"""The migration's report: ``migrate.json`` (every figure, typed) and ``migrate.md`` (what a team reads before a
deploy: the name changes its clients must make, what the config lost, how close and how fast)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from tritonpt.migrate.proof import ORIGINAL, Agreement
from tritonpt.migrate.run import Outcome

JSON = "migrate.json"
MARKDOWN = "migrate.md"


def _plain(value: Any) -> Any:  # noqa: ANN401 - whatever the dataclasses hold
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value) if f.name != "original"
        }
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value


def write(outcome: Outcome, folder: Path) -> Path:
    """Both files into ``folder``; returns the Markdown one."""
    folder.mkdir(parents=True, exist_ok=True)
    data = _plain(outcome)
    data["exit_code"] = outcome.exit_code
    (folder / JSON).write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    page = folder / MARKDOWN
    page.write_text(render(outcome), encoding="utf-8")
    return page


def render(outcome: Outcome) -> str:
    proofs = {p.name: p for p in outcome.proofs}
    lines = [
        f"# Moving {outcome.repository} off TorchScript",
        "",
        f"Into {outcome.into} as `torch_aoti` (PT2), for the {outcome.pt2_build} PT2 build: "
        f"{len(outcome.migrated)} moved, {len(outcome.refused)} refused, {len(outcome.left)} not TorchScript "
        "(left as they are).",
        "",
        "Each moved model was served beside its original on one server (pytorch_backend r26.05 serves both "
        f"platforms; the original as `{ORIGINAL.format(name='NAME')}`), the same requests sent to both, and both",
        "held to the TorchScript file run in-process. This proves the migrated package answers as the file does",
        "on these inputs, at batch 1 and the largest batch; it does not prove inputs never sent, nor a GPU.",
        "",
    ]
    for one in outcome.migrated:
        proof = proofs.get(one.name)
        lines += [f"## {one.name}: moved ({one.how})", ""]
        if one.renamed:
            lines.append("**Clients must change these names** (the PT2 path takes no other):")
            lines += [f"- {r.kind} `{r.before}` -> `{r.after}`" for r in one.renamed]
        else:
            lines.append("Every input and output name stays what clients send today.")
        lines += [f"- {note}" for note in one.notes]
        lines += [
            "",
            "| output | in-process: package vs file, max abs | served: migrated vs original, max abs | "
            "served vs file, migrated / original | tolerance (atol, rtol) |",
            "|---|---|---|---|---|",
        ]
        served: dict[str, Agreement] = {}
        for agreement in proof.agreements if proof else ():
            worst = served.get(agreement.output)
            if worst is None or agreement.migrated_vs_file_abs > worst.migrated_vs_file_abs:
                served[agreement.output] = agreement
        names = {r.after: r.before for r in one.renamed}
        for held in one.held:
            original = names.get(held.output, held.output)
            a = served.get(original)
            between = _figure(a.migrated_vs_original_abs) if a else "not served"
            to_file = (
                f"{a.migrated_vs_file_abs:.3g} / {_figure(a.original_vs_file_abs)}" if a else "not served"
            )
            lines.append(
                f"| {original} | {held.max_abs_error:.3g} | {between} | {to_file} | {held.atol:g}, {held.rtol:g} |"
            )
        if proof and proof.original_error:
            lines += [
                "",
                f"The original, on pytorch_libtorch: {proof.original_error}. The migrated model was held to the "
                "TorchScript file in-process alone.",
            ]
        if proof and proof.speeds:
            lines += [
                "",
                "| case | original (inferences/s, p99 ms) | migrated | migrated / original |",
                "|---|---|---|---|",
            ]
            lines += [
                f"| {s.case} | {s.original_per_s:.1f}, {s.original_p99_ms:.1f} | {s.migrated_per_s:.1f}, "
                f"{s.migrated_p99_ms:.1f} | {s.ratio:.2f}x |"
                for s in proof.speeds
            ]
        elif proof and proof.speed_error:
            lines += ["", f"Speed not measured: {proof.speed_error}"]
        lines.append("")
    for refused in outcome.refused:
        lines += [
            f"## {refused.name}: refused",
            "",
            f"- why: {refused.reason}",
            f"- what to do: {refused.fix}",
            "",
        ]
    for name, what in outcome.left:
        lines += [f"## {name}: left as it is ({what})", ""]
    return "\n".join(lines)


def _figure(value: float | None) -> str:
    return "not served" if value is None else f"{value:.3g}"
