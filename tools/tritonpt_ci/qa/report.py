"""``reports/triton-qa.md`` and ``.json``: a row per upstream test, run or not, the negative controls, and the
adaptations in full; the ``triton-qa`` part of the reliability report.

A check counts as passed only when it was seen to run and hold (:mod:`~tritonpt_ci.qa.ledger`): "27/27" is
27 checks seen, not a number granted on exit 0."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from tritonpt.reporting import reliability as parts
from tritonpt_ci.qa import adapt
from tritonpt_ci.qa.plan import PLANS
from tritonpt_ci.qa.run import EXPECTED, QaResult, control_held


def claim(results: Sequence[QaResult], prefix: str = "L0_libtorch", pt2_build: str = "") -> str:
    """The QA page's sentence (docs/reference/qa.md): the checks seen to hold, of those the plan counts for the
    tests that ran, for the tests named ``prefix*`` (and run on the PT2 build ``pt2_build``, where given)."""
    ran = [
        r
        for r in results
        if r.test.startswith(prefix) and r.status != "not run" and (not pt2_build or r.pt2_build == pt2_build)
    ]
    if not ran:
        return "not run"
    passed = sum(r.checks_passed for r in ran)
    return f"{passed}/{sum(r.checks for r in ran)} checks in {sum(r.passed for r in ran)}/{len(ran)} tests"


def _upstream(results: Sequence[QaResult], build: str) -> str:
    return claim([r for r in results if r.test == "L0_torch_aoti"], "L0_torch_aoti", build)


def _on_stock(r: QaResult) -> bool:
    """One of ours (a test of a PT2 fix) on the stock build, where it must fail."""
    return r.pt2_build == "stock" and r.test.startswith("L0_torch_aoti_")


def _ours(results: Sequence[QaResult]) -> str:
    ours = [r for r in results if r.test.startswith("L0_torch_aoti_")]
    if not ours:
        return "not run"
    stock = [r for r in ours if r.pt2_build == "stock"]
    patched = [r for r in ours if r.pt2_build == "patched"]
    return (
        f"{sum(r.passed for r in patched)}/{len(patched)} pass on the patched build "
        f"({claim(patched, 'L0_torch_aoti_')}), {sum(r.status == EXPECTED for r in stock)}/{len(stock)} fail on "
        "stock as they must"
    )


def to_markdown(results: Sequence[QaResult], seconds: float, controls: Sequence[QaResult] = ()) -> str:
    lines = [
        "# Triton's own QA tests against our builds",
        "",
        f"NVIDIA's L0_libtorch tests on the r25.10 build: {claim(results)}; L0_torch_aoti on the stock PT2 build: "
        f"{_upstream(results, 'stock')}, on the patched one: {_upstream(results, 'patched')}; our tests of the "
        f"PT2 fixes (docs/upstream/qa/): {_ours(results)}. {seconds:.0f} s in all.",
        "",
        "| suite | test | build | checks held / planned | result | unittest cases (failed) | seconds | adaptations |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        cases = (
            f"{r.unittest['total']} ({r.unittest['failures'] + r.unittest['errors']})" if r.unittest else "-"
        )
        result = r.status if r.as_it_must else f"**{r.status}** (exit {r.exit_code})"
        result += f" on a second run (the first lost {r.rerun})" if r.rerun else ""
        lines.append(
            f"| {r.ref} | {r.test} | {r.build} | {_held(r)} | {result} | {cases} | "
            f"{r.seconds:.1f} | {', '.join(r.adaptations) or '-'} |"
        )
    lines += ["", "## How the checks are counted, and what does not run", ""]
    for r in results:
        lines.append(f"- `{r.test}`: {r.how_counted}." + (f" **Not run:** {r.reason}." if r.reason else ""))
    failed = [r for r in results if not r.as_it_must]
    if failed:
        lines += ["", "## Failures", ""]
        for r in failed:
            lines.append(f"- `{r.test}` ({r.status}, exit {r.exit_code}); logs in `{r.log}`:")
            lines += [f"    - {line}" for line in r.said] or ["    - (no failure line printed)"]
    if controls:
        lines += ["", "## Negative controls", ""]
        lines += ["A copy of a test with one check made to fail: it must fail, one check short.", ""]
        for r in controls:
            verdict = "held" if control_held(r) else "**did not hold**"
            lines.append(
                f"- `{r.test}` ({r.control}): {r.status}, exit {r.exit_code}, {r.checks_passed} of {r.checks} "
                f"checks held: {verdict}."
            )
    lines += ["", "## Adaptations", "", "Applied at run time to a scratch copy of the pinned files:", ""]
    lines += ["| key | suite | file | replaces | count | why |", "|---|---|---|---|---|---|"]
    for s in adapt.SUBSTITUTIONS:
        files = "<br>".join(f"`qa/{f}`" for f in s.files)
        old = s.old.strip().replace("|", "\\|").replace("\n", " ")
        lines.append(f"| {s.key} | {s.ref} | {files} | `{old}` | {s.count} | {s.why} |")
    lines += ["", "Around the files:", ""]
    lines += [f"- **{a.key}** ({a.tests}): {a.what}. Why: {a.why}." for a in adapt.AROUND]
    sources = ", ".join(f"{p.suite.source.ref} `{p.suite.source.commit[:7]}`" for p in PLANS)
    lines += ["", f"Pinned files: the server repository's qa/ at {sources} (versions.toml `[[qa]]`).", ""]
    return "\n".join(lines)


def _held(r: QaResult) -> str:
    return "-" if r.status == "not run" else f"{r.checks_passed} / {r.checks}"


def write(
    results: Sequence[QaResult], reports: Path, seconds: float, controls: Sequence[QaResult] = ()
) -> list[Path]:
    reports.mkdir(parents=True, exist_ok=True)
    markdown, data = reports / "triton-qa.md", reports / "triton-qa.json"
    markdown.write_text(to_markdown(results, seconds, controls), encoding="utf-8")
    body = {
        "claim": claim(results),
        "torch_aoti": {b: _upstream(results, b) for b in ("stock", "patched")},
        "torch_aoti_fixes": _ours(results),
        "seconds": round(seconds, 1),
        "tests": [asdict(r) for r in results],
        "controls": [{**asdict(r), "held": control_held(r)} for r in controls],
        "substitutions": [asdict(s) for s in adapt.SUBSTITUTIONS],
        "around": [asdict(a) for a in adapt.AROUND],
    }
    data.write_text(json.dumps(body, indent=2) + "\n", encoding="utf-8")
    # Ours on the stock build must fail (each shows its bug): the part counts them as controls, not as tests.
    rows = [
        {
            "test": r.test,
            "suite": r.ref + (f" {r.pt2_build}" if r.pt2_build else ""),
            "checks": r.checks,
            "checks_passed": r.checks_passed,
            "status": r.status,
            "seconds": r.seconds,
        }
        for r in results
        if not _on_stock(r)
    ]
    held = [{"test": r.test, "suite": r.ref, "held": control_held(r)} for r in controls]
    held += [
        {"test": r.test, "suite": f"{r.ref} stock", "held": r.status == EXPECTED}
        for r in results
        if _on_stock(r)
    ]
    part = parts.write_part(
        "triton-qa",
        {"tests": rows, "controls": held, "tracebacks": 0},
        reports / parts.PARTS.relative_to("reports"),
    )
    return [markdown, data, part]
