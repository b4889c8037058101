"""``python -m tritonpt_ci.workflows``: one workflow run under act, its report in reports/workflows/<lane>/."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from tritonpt import stopping
from tritonpt.errors import TritonPtError
from tritonpt.options import add_arguments
from tritonpt_ci.workflows import actions
from tritonpt_ci.workflows.runner import Lane, run


def _pairs(values: Sequence[str], separator: str, option: str) -> dict[str, str]:
    pairs = {}
    for value in values:
        key, found, rest = value.partition(separator)
        if not found or not key:
            msg = f"error: {option} {value!r}: expected KEY{separator}VALUE."
            raise SystemExit(msg)
        pairs[key] = rest
    return pairs


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tritonpt_ci.workflows", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--workflow", type=Path, required=True, help="a file of .github/workflows/ (ci.yml, gpu.yml)"
    )
    parser.add_argument("--job", help="run this job and the jobs it needs (act -j)")
    parser.add_argument(
        "--matrix", action="append", default=[], help="KEY:VALUE, only these matrix entries (repeatable)"
    )
    parser.add_argument(
        "--input", action="append", default=[], help="KEY=VALUE, a workflow_dispatch input (repeatable)"
    )
    parser.add_argument("--event", default="", help="the event (default: the workflow's first trigger)")
    parser.add_argument(
        "--concurrent-jobs", type=int, help="jobs at once (default: act's, the number of CPUs)"
    )
    add_arguments(parser.add_argument, ("reports",), defaults={"reports": "reports/workflows"})
    parser.add_argument("--timeout", type=float, help="cancel the run after this many seconds")
    parser.add_argument(
        "--repo", type=Path, default=Path(), help="the checkout whose workflows run (default: here)"
    )
    options = parser.parse_args(argv)
    stopping.install_stop_signals()
    workflow = options.workflow if options.workflow.suffix else Path(f"{options.workflow}.yml")
    if len(workflow.parts) == 1:
        workflow = Path(".github/workflows") / workflow
    lane = Lane(
        workflow=workflow,
        event=options.event,
        job=options.job,
        matrix=tuple(options.matrix),
        inputs=_pairs(options.input, "=", "--input"),
        concurrent_jobs=options.concurrent_jobs,
    )
    try:
        result = run(
            lane,
            repo=options.repo.resolve(),
            reports=options.reports.resolve(),
            actions_folder=actions.folder(options.repo),
            timeout=options.timeout,
        )
    except TritonPtError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(result.report.to_markdown())
    print(f"written: {result.folder / 'report.md'}, {result.folder / 'report.json'}", file=sys.stderr)
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
