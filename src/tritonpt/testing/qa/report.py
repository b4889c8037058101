"""``reports/triton-qa.md`` and ``.json``: a row per upstream test, run or not, and the adaptations in full; the
``triton-qa`` part of the reliability report."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from tritonpt.testing import parts
from tritonpt.testing.qa import adapt
from tritonpt.testing.qa.plan import PLANS
from tritonpt.testing.qa.run import QaResult


def claim(results: Sequence[QaResult], prefix: str = "L0_libtorch") -> str:
    """The README's sentence: checks passed of the tests that ran, for the tests named ``prefix*``."""
    ran = [r for r in results if r.test.startswith(prefix) and r.status != "not run"]
    if not ran:
        return "not run"
    passed = sum(r.checks for r in ran if r.passed)
    return f"{passed}/{sum(r.checks for r in ran)} checks in {sum(r.passed for r in ran)}/{len(ran)} tests"


def to_markdown(results: Sequence[QaResult], seconds: float) -> str:
    lines = [
        "# Triton's own QA tests against our builds",
        "",
        f"NVIDIA's L0_libtorch tests on the r25.10 build: {claim(results)}; L0_torch_aoti on the PT2 build: "
        f"{claim(results, 'L0_torch_aoti')}. {seconds:.0f} s in all.",
        "",
        "| suite | test | build | checks | result | unittest cases (failed) | seconds | adaptations |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        cases = (
            f"{r.unittest['total']} ({r.unittest['failures'] + r.unittest['errors']})" if r.unittest else "-"
        )
        result = r.status if r.passed or r.status == "not run" else f"**{r.status}** (exit {r.exit_code})"
        lines.append(
            f"| {r.ref} | {r.test} | {r.build} | {r.checks} | {result} | {cases} | "
            f"{r.seconds:.1f} | {', '.join(r.adaptations) or '-'} |"
        )
    lines += ["", "## How the checks are counted, and what does not run", ""]
    for r in results:
        lines.append(f"- `{r.test}`: {r.how_counted}." + (f" **Not run:** {r.reason}." if r.reason else ""))
    failed = [r for r in results if r.status not in ("passed", "not run")]
    if failed:
        lines += ["", "## Failures", ""]
        for r in failed:
            lines.append(f"- `{r.test}` ({r.status}, exit {r.exit_code}); logs in `{r.log}`:")
            lines += [f"    - {line}" for line in r.said] or ["    - (no failure line printed)"]
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


def write(results: Sequence[QaResult], reports: Path, seconds: float) -> list[Path]:
    reports.mkdir(parents=True, exist_ok=True)
    markdown, data = reports / "triton-qa.md", reports / "triton-qa.json"
    markdown.write_text(to_markdown(results, seconds), encoding="utf-8")
    body = {
        "claim": claim(results),
        "torch_aoti": claim(results, "L0_torch_aoti"),
        "seconds": round(seconds, 1),
        "tests": [asdict(r) for r in results],
        "substitutions": [asdict(s) for s in adapt.SUBSTITUTIONS],
        "around": [asdict(a) for a in adapt.AROUND],
    }
    data.write_text(json.dumps(body, indent=2) + "\n", encoding="utf-8")
    rows = [
        {"test": r.test, "suite": r.ref, "checks": r.checks, "status": r.status, "seconds": r.seconds}
        for r in results
    ]
    part = parts.write_part(
        "triton-qa", {"tests": rows, "tracebacks": 0}, reports / parts.PARTS.relative_to("reports")
    )
    return [markdown, data, part]
