"""Showing a report: one table row per check, the fixes below it."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from tritonpt.doctor.results import Report, Status

# --- Showing it ---------------------------------------------------------------------------------------------

_STYLE = {Status.OK: "green", Status.WARN: "yellow", Status.FAIL: "bold red", Status.SKIP: "dim"}


def render(report: Report, console: Console | None = None) -> None:
    """The report as a table (check, status, finding, fix) and a one-line summary."""
    console = console or Console(highlight=False, soft_wrap=False)
    table = Table(
        title=f"tritonpt doctor: image {report.image or '(none)'}, repository {report.repository}",
        show_lines=True,
        expand=False,
    )
    table.add_column("check", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("finding", overflow="fold")
    table.add_column("fix", overflow="fold")
    for result in report:
        style = _STYLE[result.status]
        table.add_row(
            escape(result.name),
            f"[{style}]{result.status.value.upper()}[/{style}]",
            escape(result.finding),
            escape(result.fix) if result.status is not Status.OK else "",
        )
    console.print(table)
    counts = ", ".join(f"{report.count(s)} {s.value}" for s in Status)
    verdict = "[bold red]problems found[/bold red]" if report.exit_code else "[green]no failures[/green]"
    console.print(f"{counts}: {verdict}")
