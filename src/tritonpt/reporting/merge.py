"""Stage "merge": the reports of N shards (``--shard K/N``) as the one report an unsharded run writes.

    shard folders -> checked (one split, disjoint models, every shard whole) -> summary.json and summary.md
      of every model -> junit.xml, its checks counted as one unsharded run counts them (:data:`RANK`)

A missing, failed or empty shard is named, the merge still written, and the command exits 1; shards that
overlap or come from different splits are refused before anything is written. Also run as
``invoke merge-reports`` and ``nox -s merge-reports``.
"""

from __future__ import annotations

import argparse
import glob
import json
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from tritonpt.errors import HINT, ShardError, TritonPtError
from tritonpt.options import add_arguments
from tritonpt.reporting import reliability
from tritonpt.reporting.report import Report, ShardState

SUMMARY = "summary.json"
JUNIT = "junit.xml"
TOTALS = ("tests", "failures", "errors", "skipped")
T = TypeVar("T")


@dataclass(kw_only=True)
class Part:
    folder: Path
    report: Report | None  # None: the folder holds no readable summary.json
    junit: ET.Element | None
    problem: str = ""

    @property
    def label(self) -> str:
        shard = self.report.shard if self.report else None
        return f"{shard['index']}/{shard['count']}" if shard else str(self.folder)


@dataclass(kw_only=True)
class Merged:
    report: Report
    junit: ET.Element
    complete: (
        bool  # every shard present, none failed or aborted, every one that ran models recorded its checks
    )
    problems: list[str] = field(default_factory=list)
    probe_folders: dict[str, Path] = field(
        default_factory=dict
    )  # format -> the shard whose probe one run sends to


def read(folder: Path) -> Part:
    summary, junit = folder / SUMMARY, folder / JUNIT
    if not summary.is_file():
        return Part(folder=folder, report=None, junit=None, problem=f"no {SUMMARY} in {folder}")
    try:
        report = Report.from_json(summary.read_text(encoding="utf-8"))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return Part(
            folder=folder, report=None, junit=None, problem=f"{summary} is not a tritonpt report ({exc})"
        )
    tree: ET.Element | None = None
    problem = ""
    if junit.is_file():
        try:
            tree = ET.parse(junit).getroot()  # noqa: S314 - see the import
        except ET.ParseError as exc:
            problem = f"{junit} does not parse ({exc})"
    else:
        problem = f"no {JUNIT} in {folder}" + (" (the run was aborted)" if report.aborted else "")
    return Part(folder=folder, report=report, junit=tree, problem=problem)


def _check_one_split(parts: Sequence[Part]) -> int:
    """The shard count all parts share; ``ShardError`` when they are not shards of one split."""
    shards = [p.report.shard for p in parts if p.report is not None and p.report.shard is not None]
    unsharded = [p.folder for p in parts if p.report is not None and p.report.shard is None]
    if unsharded:
        msg = (
            f"Cannot merge {', '.join(map(str, unsharded))}: not a shard's report (summary.json has no shard).\n"
            f"{HINT} merge the reports of runs made with --shard K/N."
        )
        raise ShardError(msg)
    counts = {s["count"] for s in shards}
    digests = {s["costs_digest"] for s in shards}
    if len(counts) > 1 or len(digests) > 1:
        msg = (
            f"Cannot merge shards of different splits: shard counts {sorted(counts)}, costs digests "
            f"{sorted(digests)}.\n{HINT} run every shard with the same N and the same --shard-costs file."
        )
        raise ShardError(msg)
    seen: dict[int, Path] = {}
    owner: dict[str, str] = {}
    for part in parts:
        if part.report is None or part.report.shard is None:
            continue
        index = part.report.shard["index"]
        if index in seen:
            msg = f"Cannot merge: shard {index} appears twice ({seen[index]} and {part.folder})."
            raise ShardError(msg)
        seen[index] = part.folder
        for model in part.report.shard["models"]:
            if model in owner:
                msg = (
                    f"Cannot merge: model {model} ran in shard {owner[model]} and in shard {index}, so the shards "
                    f"are not one split.\n{HINT} run every shard on the same repository with the same --shard-costs."
                )
                raise ShardError(msg)
            owner[model] = str(index)
    return counts.pop() if counts else 0


def _failed_checks(junit: ET.Element | None) -> list[str]:
    """The ids of the checks a shard's junit.xml records as failed or in error (``test_parity[multi_io-http]``)."""
    if junit is None:
        return []
    return [
        case.get("name", "?")
        for case in junit.iter("testcase")
        if case.find("failure") is not None or case.find("error") is not None
    ]


def merge(folders: Sequence[Path], *, expect: int | None = None) -> Merged:
    """The shards' reports as one; ``expect``: how many shards the split has (a CI plan's count), so that shards
    with no folder at all are named missing too, and shards of another split are refused."""
    parts = [read(f) for f in folders]
    count = _check_one_split(parts)
    if expect is not None:
        if count and count != expect:
            msg = (
                f"Cannot merge: the shards are {count} of a split, but {expect} were expected.\n"
                f"{HINT} pass the same count to --shard K/N and to --expect."
            )
            raise ShardError(msg)
        count = expect
    merged = Report()
    problems: list[str] = [p.problem for p in parts if p.problem]
    present = {
        p.report.shard["index"]: p for p in parts if p.report is not None and p.report.shard is not None
    }
    complete = not any(p.report is None for p in parts)
    envs: dict[str, dict[str, str]] = {}
    for index in range(1, count + 1):
        part = present.get(index)
        if part is None or part.report is None or part.report.shard is None:
            merged.shards.append(
                {"shard": f"{index}/{count}", "models": "?", "state": "**missing**: no report"}
            )
            among = f"among {', '.join(map(str, folders))}" if folders else "(no shard's folder was given)"
            problems.append(f"shard {index}/{count}: no report {among}")
            complete = False
            continue
        report = part.report
        failed = report.outcomes.get("failed", 0) + report.outcomes.get("error", 0)
        state = (
            f"**aborted**: {report.aborted.splitlines()[0]}"
            if report.aborted
            else f"**failed**: {failed} check(s)"
            if failed
            else "passed"
        )
        if report.aborted or failed or part.junit is None:
            complete = False
        if failed:
            names = _failed_checks(part.junit)
            listed = "".join(f"\n  {name}" for name in names)
            problems.append(
                f"shard {index}/{count}: {failed} check(s) failed" + (f":{listed}" if names else "")
            )
        row: ShardState = {
            "shard": f"{index}/{count}",
            "models": len(part.report.shard["models"]),
            "state": state,
        }
        if report.server_memory_mb is not None:
            row["server_memory_mb"] = report.server_memory_mb
            merged.server_memory_mb = max(merged.server_memory_mb or 0.0, report.server_memory_mb)
        merged.shards.append(row)
        for key, value in report.environment.items():
            envs.setdefault(key, {})[str(index)] = value
        merged.runtimes.update(report.runtimes)
        merged.devices.update(report.devices)
        merged.requests.update(report.requests)
        merged.costs.update(report.costs)
        merged.held_to.update(report.held_to)
        merged.findings.update(report.findings)
        merged.parity += report.parity
        merged.backend = merged.backend or report.backend
        merged.pt2_backend = merged.pt2_backend or report.pt2_backend
        for key, n in report.outcomes.items():
            merged.outcomes[key] = merged.outcomes.get(key, 0) + n
        for label, seconds in report.timings.items():
            merged.timings[f"shard {index}: {label}"] = seconds
        if report.aborted:
            merged.aborted += f"shard {index}/{count}: {report.aborted}\n"
    totals = {p.report.shard["total"] for p in present.values() if p.report is not None and p.report.shard}
    if len(totals) > 1:
        msg = (
            f"Cannot merge shards of different repositories: they split {sorted(totals)} models.\n"
            f"{HINT} run every shard on the same repository."
        )
        raise ShardError(msg)
    ran = {
        m
        for p in present.values()
        if p.report is not None and p.report.shard
        for m in p.report.shard["models"]
    }
    if totals and len(ran) < (total := totals.pop()):
        problems.append(f"{total - len(ran)} of the split's {total} models are in no shard's report")
        complete = False
    for key, by_shard in envs.items():
        values = set(by_shard.values())
        merged.environment[key] = (
            values.pop() if len(values) == 1 else "; ".join(f"{v} (shard {k})" for k, v in by_shard.items())
        )
    merged.aborted = merged.aborted.rstrip("\n")
    reports = {i: p.report for i, p in present.items() if p.report is not None}
    silent = [f"{i}/{count}" for i, r in reports.items() if r.shard and r.shard["models"] and not r.checks]
    if silent:
        problems.append(
            f"shard {', '.join(silent)} ran models, but its summary.json records no checks (an older report, or a "
            "run that ended before its first check), so its checks cannot be counted once each"
        )
        complete = False
    deciding = probe_shards(reports)
    merged.probes = {fmt: reports[index].probes[fmt] for fmt, index in deciding.items()}
    merged.probe_checks = {k: v for r in reports.values() for k, v in r.probe_checks.items()}
    rules = Rules(deciding=deciding, probe_checks=merged.probe_checks)
    merged.checks = rules.choose({i: r.checks for i, r in reports.items()}, lambda kinds: kinds)
    merged.outcomes = _counted(merged.checks)
    junit = _merged_junit(parts, rules)
    chosen = {kind: present[index].folder for kind, index in deciding.items()}
    return Merged(report=merged, junit=junit, complete=complete, problems=problems, probe_folders=chosen)


def probe_shards(reports: dict[int, Report]) -> dict[str, int]:
    """For each model format, the shard whose probe (matrix.probe_model: the first model of that format that
    batches, else the first, by name) is the one an unsharded run of the split's models would pick: the first by
    name among the shards' probes that batch, else among all of them. Only that shard holds it, so only its
    probe checks are what one run reports."""
    deciding: dict[str, int] = {}
    formats = {fmt for r in reports.values() for fmt in r.probes}
    for fmt in sorted(formats):
        held = [
            (bool(r.probes[fmt]["batches"]), str(r.probes[fmt]["model"]), i)
            for i, r in reports.items()
            if fmt in r.probes
        ]
        batching = [h for h in held if h[0]] or held
        deciding[fmt] = min(batching, key=lambda h: h[1])[2]
    return deciding


RANK = {"failure": 3, "error": 3, "failed": 3, "passed": 2, "xpassed": 2, "skipped": 1, "xfailed": 1}
"""A check that ran in several shards (one that takes no model: health) is taken from one of them: a shard where
it failed; else one where it passed (a shard without a model the check needs skips it); else one where it was
skipped. Within that shard, everything it reported for the check counts. Two kinds of check follow rules of
their own (:class:`Rules`): a check sent to a probe model, and a check with an empty parameter set."""
COUNTED = ("passed", "failed", "skipped", "error")
"""The outcomes a run's summary counts, as pytest's terminal summary does (xfailed and xpassed are left out)."""
NOTSET = "NOTSET"
"""pytest's id for the parameter of an empty parameter set (a shard with no model of the kind a check takes)."""


def outcome(case: ET.Element) -> str:
    for kind in ("failure", "error", "skipped"):
        if case.find(kind) is not None:
            return kind
    return "passed"


def _worst(kinds: Sequence[str]) -> int:
    return max((RANK.get(k, 0) for k in kinds), default=0)


def junit_key(node_id: str) -> str:
    """A node id as junit.xml names the case: ``classname::name`` (``tritonpt.matrix.test_x::test_y[a-b]``)."""
    path, *rest = node_id.split("::")
    return "::".join([".".join([path.removesuffix(".py").replace("/", "."), *rest[:-1]]), *rest[-1:]])


def _empty_set(key: str) -> bool:
    return NOTSET in key.partition("[")[2].rstrip("]").split("-")


@dataclass(frozen=True, kw_only=True)
class Rules:
    """How each check is chosen from the shards, so that the counts are one unsharded run's.

    - A check sent to a probe model (a bad request: ``probe_checks``) is taken from the one shard whose probe one
      run would pick (``deciding``, :func:`probe_shards`), whatever it reported: another shard's probe is another
      model, whose answers one run never sees.
    - A check with an empty parameter set (``test_x[NOTSET]``: the shard has no model of its kind) counts only
      when no shard ran that check on a model, as one run has it only when no model of the split is of that kind.
    - Every other check: :data:`RANK`.
    """

    deciding: dict[str, int]
    probe_checks: dict[str, str]  # node id -> format

    def choose(self, per_shard: dict[int, dict[str, list[T]]], kinds: Callable[[list[T]], list[str]], *,
               junit: bool = False) -> dict[str, list[T]]:  # fmt: skip
        """For each key, the entries of the one shard that decides it (ties: the first shard)."""
        probes = {junit_key(k) if junit else k: fmt for k, fmt in self.probe_checks.items()}
        chosen: dict[str, list[T]] = {}
        for index, entries in sorted(per_shard.items()):
            for key, found in entries.items():
                fmt = probes.get(key)
                if fmt in self.deciding:
                    if index == self.deciding[fmt]:
                        chosen[key] = found
                    continue
                held = chosen.get(key)
                if held is None or _worst(kinds(found)) > _worst(kinds(held)):
                    chosen[key] = found
        ran = {key.partition("[")[0] for key in chosen if not _empty_set(key)}
        return {k: v for k, v in chosen.items() if not (_empty_set(k) and k.partition("[")[0] in ran)}


def _by_case(root: ET.Element) -> dict[str, list[ET.Element]]:
    grouped: dict[str, list[ET.Element]] = {}
    for case in root.iter("testcase"):
        grouped.setdefault(f"{case.get('classname', '')}::{case.get('name', '')}", []).append(case)
    return grouped


def cases(root: ET.Element) -> dict[str, list[str]]:
    """Each check of a junit.xml: ``classname::name`` -> the outcomes its test cases record."""
    return {key: [outcome(c) for c in found] for key, found in _by_case(root).items()}


def outcomes_of(checks: Sequence[dict[str, list[str]]]) -> dict[str, int]:
    """The summary's counts for the shards' recorded checks (node id -> pytest's outcome categories), each check
    taken from the one shard that decides it (:class:`Rules`, without probes): what one unsharded run counts."""
    rules = Rules(deciding={}, probe_checks={})
    return _counted(rules.choose(dict(enumerate(checks, start=1)), lambda kinds: kinds))


def _counted(chosen: dict[str, list[str]]) -> dict[str, int]:
    counted = [kind for kinds in chosen.values() for kind in kinds if kind in COUNTED]
    return {kind: counted.count(kind) for kind in COUNTED if counted.count(kind)}


def _merged_junit(parts: Sequence[Part], rules: Rules) -> ET.Element:
    """One test suite of every check, each from the one shard that decides it, its totals counted from them."""
    per_shard = {
        part.report.shard["index"] if part.report and part.report.shard else -n: _by_case(part.junit)
        for n, part in enumerate(parts, start=1)
        if part.junit is not None
    }
    chosen = rules.choose(per_shard, lambda found: [outcome(c) for c in found], junit=True)
    suite = ET.Element("testsuite", {"name": "tritonpt merged shards"})
    seconds = 0.0
    counts = dict.fromkeys(TOTALS, 0)
    for found in chosen.values():
        for case in found:
            suite.append(case)
            seconds += float(case.get("time", "0"))
            counts["tests"] += 1
            kind = outcome(case)
            if kind != "passed":
                counts["failures" if kind == "failure" else "errors" if kind == "error" else "skipped"] += 1
    for key, value in counts.items():
        suite.set(key, str(value))
    suite.set("time", f"{seconds:.3f}")
    root = ET.Element("testsuites", {key: suite.get(key, "0") for key in (*TOTALS, "time")})
    root.append(suite)
    return root


def merged_parts(
    folders: Sequence[Path], probe_folders: Mapping[str, Path] | None = None
) -> dict[str, dict[str, object]]:
    """The reliability parts the shards wrote (``<shard>/reliability/parts/<part>.json``), one per part: lists
    (cases, checks) joined, counts (tracebacks) summed, anything else as the first shard has it. A row that names
    its probe (``"probe": kind``, a bad request's) is kept only from the shard ``probe_folders`` names for that
    kind, as its check is (:func:`probe_shards`)."""
    combined: dict[str, dict[str, object]] = {}
    chosen = dict(probe_folders or {})

    def theirs(row: object, folder: Path) -> bool:
        kind = row.get("probe") if isinstance(row, dict) else None
        return isinstance(kind, str) and kind in chosen and chosen[kind] != folder

    for folder in folders:
        for path in sorted(reliability.folder_in(folder).glob("*.json")):
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if not isinstance(data, dict):
                continue
            into = combined.setdefault(path.stem, {})
            for key, given in data.items():
                held = into.get(key)
                value = (
                    [row for row in given if not theirs(row, folder)] if isinstance(given, list) else given
                )
                if isinstance(value, list) and isinstance(held, list):
                    into[key] = _rows(held + value)
                elif isinstance(value, int) and not isinstance(value, bool) and isinstance(held, int):
                    into[key] = held + value
                else:
                    into.setdefault(key, value)
    return combined


def _rows(rows: list[object]) -> list[object]:
    """A part's rows from several shards, each case once (the same probe runs in every shard): where the shards
    disagree, the row with a check that did not hold (a false) is kept."""
    kept: dict[str, object] = {}
    for row in rows:
        if not isinstance(row, dict):
            kept[json.dumps(row, sort_keys=True)] = row
            continue
        key = json.dumps(
            {k: v for k, v in row.items() if not isinstance(v, bool | int | float)}, sort_keys=True
        )
        held = kept.get(key)
        if held is None or (False in row.values() and isinstance(held, dict) and False not in held.values()):
            kept[key] = row
    return list(kept.values())


def write(merged: Merged, into: Path, parts: dict[str, dict[str, object]] | None = None) -> list[Path]:
    """summary.md and summary.json (through Report.write, so the GitHub job summary gets it too), junit.xml,
    and the shards' reliability parts, merged."""
    markdown, data = merged.report.write(into)
    junit = into / JUNIT
    ET.ElementTree(merged.junit).write(junit, encoding="utf-8", xml_declaration=True)
    written = [markdown, data, junit]
    for name, body in (parts or {}).items():
        folder = reliability.folder_in(into)
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / f"{name}.json"
        target.write_text(json.dumps(body, indent=2) + "\n", encoding="utf-8")
        written.append(target)
    return written


SHARD_FOLDERS = "reports/shard-*-of-*"
"""Where `nox -s integration -- --shard K/N` writes each shard's reports: what a merge takes by default."""
MERGED = Path("reports/merged")
"""Where the merge goes unless --into says where."""


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m tritonpt.reporting.merge` (what `nox -s merge-reports` runs before any install): the same door as
    `tritonpt merge-reports`, :func:`gather`."""
    parser = argparse.ArgumentParser(
        prog="python -m tritonpt.reporting.merge", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "folders", nargs="*", help=f"the shards' report folders or globs (default: {SHARD_FOLDERS})"
    )
    add_arguments(parser.add_argument, ("into",), defaults={"into": str(MERGED)})
    parser.add_argument(
        "--expect",
        type=int,
        metavar="N",
        help="the split's shard count (a CI plan's): shards with no folder are named missing",
    )
    options = parser.parse_args(argv)
    if options.expect is not None and options.expect < 1:
        parser.error(f"--expect {options.expect}: a split has at least 1 shard")
    return gather(options.folders or [SHARD_FOLDERS], options.into, expect=options.expect)


def gather(patterns: Sequence[str], into: Path, *, expect: int | None = None) -> int:
    """Merge the folders that ``patterns`` (folders or globs) match into ``into``; the exit status. No folder at
    all is an error, unless ``expect`` names the split, whose every shard is then missing."""
    found: set[Path] = set()
    for pattern in patterns:
        if any(char in pattern for char in "*?["):
            found |= {Path(p) for p in glob.glob(pattern) if Path(p).is_dir()}  # noqa: PTH207 - absolute ones too
        else:
            found.add(Path(pattern))  # as given: a folder that is not there is named by the merge
    folders = sorted(found)
    if not folders and expect is None:
        print(
            f"error: Cannot merge: no report folders match {', '.join(patterns)}.\n{HINT} give the shards' report "
            "folders (reports/shard-1-of-2 reports/shard-2-of-2) or a glob, after running "
            "`nox -s integration -- --shard K/N`; a CI plan gives --expect N.",
            file=sys.stderr,
        )
        return 1
    return run(folders, into, expect=expect)


def run(folders: Sequence[Path], into: Path, *, expect: int | None = None) -> int:
    try:
        merged = merge(folders, expect=expect)
    except TritonPtError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    written = write(merged, into, merged_parts(folders, merged.probe_folders))
    print(merged.report.to_markdown())
    print("written: " + ", ".join(map(str, written)), file=sys.stderr)
    for problem in merged.problems:
        print(f"error: {problem}", file=sys.stderr)
    if not merged.complete:
        print("error: the merged report is incomplete or holds failures (above).", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
