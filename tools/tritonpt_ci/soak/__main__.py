"""``python -m tritonpt_ci.soak``: the command line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from tritonpt.export.builtin_set import export_builtin_set
from tritonpt.options import add_arguments
from tritonpt.reporting.reliability import PARTS
from tritonpt_ci.program import say, work
from tritonpt_ci.soak import CONCURRENCY, REQUESTS, SMOKE_REQUESTS, soak


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m tritonpt_ci.soak``: exit 0 only when nothing was lost, wrong or leaked."""
    parser = argparse.ArgumentParser(prog="python -m tritonpt_ci.soak", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--requests",
        type=int,
        default=None,
        help=f"requests to send (default {REQUESTS}; --smoke {SMOKE_REQUESTS})",
    )
    parser.add_argument(
        "--concurrency", type=int, default=CONCURRENCY, help=f"threads sending (default {CONCURRENCY})"
    )
    add_arguments(
        parser.add_argument,
        ("repository", "export_builtin", "reports", "smoke"),
        defaults={"reports": "reports/soak"},
    )
    parser.add_argument(
        "--parts", type=Path, default=PARTS, help=f"where the reliability part goes (default {PARTS})"
    )
    parser.add_argument("--seed", type=int, default=0, help="seeds the batch sizes and rows drawn")
    options = parser.parse_args(argv)
    requests = (
        options.requests if options.requests is not None else SMOKE_REQUESTS if options.smoke else REQUESTS
    )
    if requests < 1 or not 1 <= options.concurrency <= CONCURRENCY * 4:
        parser.error(f"--requests must be at least 1 and --concurrency between 1 and {CONCURRENCY * 4}")

    with work("soak"):
        if options.export_builtin:
            export_builtin_set(Path(options.repository), pt2_build="stock", step=say)
        report = soak(
            Path(options.repository),
            requests=requests,
            concurrency=options.concurrency,
            smoke=options.smoke,
            reports=options.reports,
            parts=options.parts,
            seed=options.seed,
            say=say,
        )
        written = report.write(options.reports, options.parts)
    print(report.to_markdown())
    say("written: " + ", ".join(str(p) for p in written))
    for problem in report.problems():
        say(f"soak failed: {problem}")
    return 0 if report.passed else 1


if __name__ == "__main__":
    sys.exit(main())
