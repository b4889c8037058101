"""One reliability report from the parts the reliability tiers write (`nox -s reliability`, run last).

    python -m tritonpt_ci.reliability [--reports reports]

reports/reliability/parts/<part>.json, one per tier (tritonpt.parts.write_part), each read against its contract
(tritonpt_ci.contracts), merged into reports/reliability.md and .json: faults injected and survived with their
times to exit and leftovers, soak requests sent and lost, fuzz cases, tracebacks seen, the goals met, the parts
not run. A part that breaks its contract is named and makes the command exit 1. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tritonpt.options import add_arguments
from tritonpt.reporting.reliability import folder_in
from tritonpt_ci.contracts import CONTRACTS, LEFTOVER_KINDS, PartError, read_part

PARTS = tuple(CONTRACTS)
"""The parts the report knows, in the order it shows them."""
DEFAULT_REPORTS = Path("reports")


# --- the merge -----------------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Goal:
    """One line of the report's summary: what was measured, its value, the goal, and whether it was met."""

    what: str
    value: str
    goal: str
    met: bool

    @classmethod
    def every(cls, what: str, held: int, total: int, *, each: str = "case") -> Goal:
        """A goal that every one of ``total`` cases holds: "held of total"."""
        return cls(what=what, value=f"{held} of {total}", goal=f"every {each}", met=held == total)


@dataclass(kw_only=True)
class Reliability:
    """The merged report."""

    parts_run: list[str] = field(default_factory=list)
    parts_not_run: list[str] = field(default_factory=list)
    unreadable: dict[str, str] = field(default_factory=dict)  # file -> what is wrong with it
    written: dict[str, str] = field(default_factory=dict)  # part -> when its file was written (UTC)
    tracebacks: dict[str, int] = field(default_factory=dict)  # part -> tracebacks seen
    faults: list[dict[str, Any]] = field(default_factory=list)
    faults_collected: int = 0
    faults_pytest_exit: int | None = None
    leftovers: dict[str, int] = field(default_factory=dict)  # kind -> total over every fault
    soak: dict[str, Any] | None = None
    fuzz: dict[str, Any] | None = None
    export_contract: list[dict[str, Any]] = field(default_factory=list)
    bad_requests: list[dict[str, Any]] = field(default_factory=list)
    lockdown: list[dict[str, Any]] = field(default_factory=list)
    triton_qa: list[dict[str, Any]] = field(default_factory=list)
    triton_qa_controls: list[dict[str, Any]] = field(default_factory=list)
    matrix_runs: list[dict[str, Any]] = field(default_factory=list)
    other: dict[str, dict[str, Any]] = field(default_factory=dict)  # parts this module does not know
    goals: list[Goal] = field(default_factory=list)

    @property
    def all_met(self) -> bool:
        return all(goal.met for goal in self.goals) and not self.unreadable


def merge(reports: Path) -> Reliability:
    """Read every part under ``reports/reliability/parts/`` into one :class:`Reliability`."""
    result = Reliability()
    folder = folder_in(reports)
    found = sorted(folder.glob("*.json")) if folder.is_dir() else []
    parts: dict[str, dict[str, Any]] = {}
    for path in found:
        if path.name.startswith("."):
            continue  # a part being written
        try:
            parts[path.stem] = read_part(path)
        except PartError as exc:
            result.unreadable[str(path)] = str(exc)
            continue
        written = time.gmtime(path.stat().st_mtime)
        result.written[path.stem] = time.strftime("%Y-%m-%d %H:%M:%S UTC", written)
    known = [name for name in PARTS if name in parts]
    result.parts_run = known + sorted(set(parts) - set(PARTS))
    result.parts_not_run = [
        name
        for name in PARTS
        if name not in parts and not any(Path(f).stem == name for f in result.unreadable)
    ]
    result.tracebacks = {name: int(parts[name]["tracebacks"]) for name in result.parts_run}
    for name in sorted(set(parts) - set(PARTS)):
        result.other[name] = parts[name]
    if "faults" in parts:
        result.faults = list(parts["faults"]["faults"])
        result.faults_collected = int(parts["faults"]["collected"])
        result.faults_pytest_exit = int(parts["faults"]["pytest_exit"])
        result.leftovers = {
            kind: sum(int(row["leftovers"][kind]) for row in result.faults) for kind in LEFTOVER_KINDS
        }
    if "soak" in parts:
        result.soak = {
            key: value for key, value in parts["soak"].items() if key not in ("part", "tracebacks")
        }
    if "fuzz" in parts:
        result.fuzz = {"cases": dict(parts["fuzz"]["cases"]), "crashes": parts["fuzz"]["crashes"]}
    result.export_contract = list(parts.get("export-contract", {}).get("cases", []))
    result.bad_requests = list(parts.get("bad-requests", {}).get("cases", []))
    result.lockdown = list(parts.get("lockdown", {}).get("checks", []))
    result.triton_qa = list(parts.get("triton-qa", {}).get("tests", []))
    result.triton_qa_controls = list(parts.get("triton-qa", {}).get("controls", []))
    result.matrix_runs = list(parts.get("matrix-runs", {}).get("runs", []))
    result.goals = _goals(result)
    return result


def _fault_goals(result: Reliability) -> list[Goal]:
    """Every collected fault injected and survived, pytest passing, at least 20 of them; 0 leftovers; each exit
    within its bound."""
    rows = result.faults
    ran = [row for row in rows if row["ran"]]
    survived = sum(bool(row["passed"]) for row in rows)
    collected = result.faults_collected
    exit_status = result.faults_pytest_exit
    whole = collected >= 20 and len(rows) == collected and survived == collected and exit_status == 0
    left = sum(result.leftovers.values())
    slowest = max((float(row["exit_s"]) for row in ran), default=0.0)
    return [
        Goal(
            what="faults collected / injected / survived",
            value=f"{collected} / {len(ran)} / {survived}, pytest exit {exit_status}",
            goal="at least 20, every one injected and survived, pytest passed",
            met=whole,
        ),
        Goal(what="leftovers after the faults", value=str(left), goal="0", met=left == 0),
        Goal(
            what="slowest time to exit",
            value=f"{slowest:.1f} s",
            goal="within each fault's bound",
            met=bool(ran) and all(bool(row["passed"]) for row in ran),
        ),
    ]


def _goals(result: Reliability) -> list[Goal]:
    goals: list[Goal] = []
    total_tracebacks = sum(result.tracebacks.values())
    goals.append(
        Goal(what="tracebacks seen", value=str(total_tracebacks), goal="0", met=total_tracebacks == 0)
    )
    if "faults" in result.parts_run:
        goals += _fault_goals(result)
    if result.soak is not None:
        soak = result.soak
        lost = int(soak["failures"]) + int(soak["mismatches"])
        exact = all(
            c["request_success"] == c["sent"] and c["inference_count"] == c["expected_inference_count"]
            for c in soak["counts"].values()
        )
        growth = float(soak["rss_end_mb"]) - float(soak["rss_start_mb"])
        kind = "soak smoke" if soak["smoke"] else "soak"
        goals.append(
            Goal(
                what=f"{kind}: requests sent / lost",
                value=f"{soak['requests_sent']} / {lost}",
                goal="lost 0",
                met=lost == 0,
            )
        )
        goals.append(
            Goal(
                what=f"{kind}: server counters", value="exact" if exact else "differ", goal="exact", met=exact
            )
        )
        goals.append(
            Goal(
                what=f"{kind}: RSS growth",
                value=f"{growth:+.0f} MB",
                goal=f"at most {soak['rss_bound_mb']:.0f} MB",
                met=growth <= float(soak["rss_bound_mb"]),
            )
        )
    if result.fuzz is not None:
        tried = sum(int(n) for n in result.fuzz["cases"].values())
        crashes = int(result.fuzz["crashes"])
        goals.append(
            Goal(
                what="fuzz cases tried / crashes",
                value=f"{tried} / {crashes}",
                goal="0 crashes",
                met=crashes == 0,
            )
        )
    if "export-contract" in result.parts_run:
        cases = result.export_contract
        clear = sum(c["exit"] == 1 and c["one_paragraph"] and c["repository_unchanged"] for c in cases)
        goals.append(Goal.every("export contract: clear errors, repository unchanged", clear, len(cases)))
    if "bad-requests" in result.parts_run:
        cases = result.bad_requests
        kept = sum(c["live_after"] and c["parity_after"] for c in cases)
        goals.append(Goal.every("bad requests: live and correct after", kept, len(cases)))
    if "lockdown" in result.parts_run:
        checks = result.lockdown
        held = sum(bool(c["passed"]) for c in checks)
        goals.append(Goal.every("lockdown checks held", held, len(checks), each="check"))
    if "triton-qa" in result.parts_run:
        ran = [t for t in result.triton_qa if t["status"] != "not run"]
        passed = sum(t["status"] == "passed" for t in ran)
        passed_checks = sum(int(t["checks_passed"]) for t in ran)
        planned = sum(int(t["checks"]) for t in ran)
        goals.append(
            Goal(
                what="Triton's own QA tests passed (their checks, seen to hold)",
                value=f"{passed} / {len(ran)} ({passed_checks} / {planned})",
                goal="every one that runs on a CPU, every check",
                met=bool(ran) and passed == len(ran) and passed_checks == planned,
            )
        )
        controls = result.triton_qa_controls
        goals.append(
            Goal(
                what="Triton's QA: negative controls failed one check short",
                value=f"{sum(bool(c.get('held')) for c in controls)} of {len(controls)}",
                goal="every one, at least one",
                met=bool(controls) and all(c.get("held") is True for c in controls),
            )
        )
    if "matrix-runs" in result.parts_run:
        runs = result.matrix_runs
        crashed = [r for r in runs if r["first"] == "crashed"]
        reran = [r for r in crashed if r["rerun"]]
        named = ", ".join(f"{r['reports']}: {r['crash']}" for r in crashed)
        goals.append(
            Goal(
                what="matrix runs / crashed on their own / rerun",
                value=f"{len(runs)} / {len(crashed)} / {len(reran)}" + (f" ({named})" if named else ""),
                goal="no crash, or a known one with its reproduction whose rerun passed",
                met=all(r["reproduction"] and r["rerun"] == "passed" for r in crashed),
            )
        )
    return goals


# --- rendering -----------------------------------------------------------------------------------------------


def _table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell).replace("|", "\\|") for cell in row) + " |" for row in rows]
    return [*lines, ""]


def to_markdown(result: Reliability) -> str:
    lines = ["# Reliability", ""]
    verdict = "every goal met" if result.all_met else "**goals not met** (below)"
    lines += [f"Parts merged: {', '.join(result.parts_run) or 'none'}; {verdict}.", ""]
    lines += _table(
        ("measure", "value", "goal", "met"),
        [(g.what, g.value, g.goal, "yes" if g.met else "**no**") for g in result.goals],
    )
    if result.unreadable:
        lines += ["## Parts that could not be read", ""]
        lines += [f"- {problem}" for problem in result.unreadable.values()]
        lines.append("")
    if result.parts_not_run:
        lines += ["## Parts not run", ""]
        lines += [f"- `{name}`: no reports/reliability/parts/{name}.json" for name in result.parts_not_run]
        lines.append("")
    lost = [row for row in result.faults if not row["passed"]]
    if lost:
        lines += ["## Faults that did not run or did not survive", ""]
        lines += [f"- {row['fault']} ({row['stage']}): {row['exit']}" for row in lost]
        lines.append("")
    if result.faults:
        lines += ["## Faults", ""]
        rows = [
            (
                row["fault"],
                row["stage"],
                "-"
                if not row["ran"]
                else f"{float(row['exit_s']):.2f} s"
                + (f" (bound {row['bound_s']:g} s)" if "bound_s" in row else ""),
                row["exit"],
                ", ".join(
                    f"{kind} {row['leftovers'][kind]}" for kind in LEFTOVER_KINDS if row["leftovers"][kind]
                )
                or "none",
                "yes" if row["passed"] else "**no**",
            )
            for row in result.faults
        ]
        lines += _table(("fault", "stage", "time to exit", "exit", "leftovers", "survived"), rows)
    if result.soak is not None:
        soak = result.soak
        lines += [f"## Soak{' (smoke)' if soak['smoke'] else ''}", ""]
        lines += [
            f"{soak['requests_sent']} requests sent, {soak['failures']} failures, {soak['mismatches']} mismatches; "
            f"server RSS {soak['rss_start_mb']:.0f} MB at the start, {soak['rss_end_mb']:.0f} MB at the end "
            f"(bound: {soak['rss_bound_mb']:.0f} MB of growth).",
            "",
        ]
        lines += _table(
            ("model", "sent", "request_success", "inference_count", "expected inference_count"),
            [
                (m, c["sent"], c["request_success"], c["inference_count"], c["expected_inference_count"])
                for m, c in sorted(soak["counts"].items())
            ],
        )
    if result.fuzz is not None:
        lines += ["## Fuzz", ""]
        lines += _table(("input", "cases"), sorted(result.fuzz["cases"].items()))
    for title, cases, columns in (
        (
            "Export contract",
            result.export_contract,
            ("case", "exit", "one_paragraph", "repository_unchanged"),
        ),
        ("Bad requests", result.bad_requests, ("case", "protocol", "status", "live_after", "parity_after")),
        ("Lockdown", result.lockdown, ("check", "passed")),
        ("Triton's own QA tests", result.triton_qa, ("suite", "test", "checks", "status", "seconds")),
        ("Matrix runs", result.matrix_runs, ("reports", "first", "crash", "reproduction", "kept", "rerun")),
    ):
        if cases:
            lines += [f"## {title}", ""]
            lines += _table(columns, [[case[c] for c in columns] for case in cases])
    if result.tracebacks:
        lines += ["## Tracebacks seen, per part", ""]
        lines += _table(
            ("part", "tracebacks", "written"),
            [(n, t, result.written.get(n, "")) for n, t in result.tracebacks.items()],
        )
    return "\n".join(lines).rstrip("\n") + "\n"


def to_json(result: Reliability) -> dict[str, Any]:
    data = asdict(result)
    data["all_met"] = result.all_met
    return data


def write(result: Reliability, reports: Path) -> tuple[Path, Path]:
    """``reports/reliability.md`` and ``reports/reliability.json``, each written atomically."""
    reports.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in (
        ("reliability.md", to_markdown(result)),
        ("reliability.json", json.dumps(to_json(result), indent=2) + "\n"),
    ):
        target = reports / name
        staged = reports / f".{name}.partial"
        staged.write_text(text, encoding="utf-8")
        staged.replace(target)
        written.append(target)
    return written[0], written[1]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tritonpt_ci.reliability",
        description="Merge reports/reliability/parts/*.json into reports/reliability.md and .json.",
    )
    add_arguments(parser.add_argument, ("reports",))
    options = parser.parse_args(argv)
    reports = Path(options.reports)
    result = merge(reports)
    markdown, data = write(result, reports)
    print(to_markdown(result), end="")
    print(f"written: {markdown}, {data}")
    if result.unreadable:
        files = "; ".join(result.unreadable.values())
        print(
            f"error: {len(result.unreadable)} reliability part(s) could not be merged: {files}. Hint: rerun the "
            "tier that writes it, or delete the file if that tier no longer exists.",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
