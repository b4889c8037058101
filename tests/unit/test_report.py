"""The matrix's report keeps its findings: what the checks noticed that Triton does by its rules and a team may not
expect (a dynamic batcher with nothing to combine), told in summary.md and summary.json, never a failure."""

from __future__ import annotations

from tritonpt.reporting.report import Report

SAID = (
    "48 concurrent requests ran as 48 executions: the dynamic batcher combined none (every response had parity): "
    "with no max_queue_delay_microseconds a request is scheduled as soon as an instance is free"
)


def test_findings_are_told_in_the_page_and_kept_in_the_json() -> None:
    report = Report(findings={"tokens": [SAID]}, outcomes={"passed": 3})
    page = report.to_markdown()
    assert "## Findings (not failures)" in page
    assert f"- tokens: {SAID}" in page
    again = Report.from_json(report.to_json())
    assert again.findings == {"tokens": [SAID]}
    assert "## Findings" not in Report(outcomes={"passed": 3}).to_markdown()
