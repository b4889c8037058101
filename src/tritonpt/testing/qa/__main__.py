"""``python -m tritonpt.testing.qa``: Triton's own QA tests of the pytorch backend against our builds."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from tritonpt import stopping
from tritonpt.backend.serving import PT2_NAME
from tritonpt.errors import TritonPtError
from tritonpt.testing.qa import report
from tritonpt.testing.qa.plan import PLANS
from tritonpt.testing.qa.run import control_held, run_plan


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tritonpt.testing.qa", description=__doc__)
    parser.add_argument("--reports", type=Path, default=Path("reports"))
    refs = [plan.suite.source.ref for plan in PLANS]
    parser.add_argument(
        "--suite",
        action="append",
        default=[],
        choices=refs,
        help=f"run only this suite ({', '.join(refs)}; repeatable)",
    )
    parser.add_argument(
        "--pt2-build",
        action="append",
        default=[],
        choices=("stock", "patched"),
        help="the PT2 build(s) the r26.05 suite runs against (repeatable; default both: stock, where our tests "
        "of the fixes must fail, and patched, where every test must pass)",
    )
    options = parser.parse_args(argv)

    def say(line: str) -> None:
        print(f"triton-qa: {line}", file=sys.stderr, flush=True)

    started = time.monotonic()
    results, controls = [], []
    try:
        with stopping.stop_signals_interrupt():
            for plan in PLANS:
                if options.suite and plan.suite.source.ref not in options.suite:
                    continue
                pt2 = plan.suite.backend == PT2_NAME
                for build in (options.pt2_build or ["stock", "patched"]) if pt2 else ["stock"]:
                    ran, checked = run_plan(plan, reports=options.reports, step=say, pt2_build=build)
                    results += ran
                    controls += checked
    except KeyboardInterrupt as interrupt:
        say("interrupted; the running test's processes were stopped and no report was written")
        return stopping.exit_code(interrupt)
    except TritonPtError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    seconds = time.monotonic() - started
    written = report.write(results, options.reports, seconds, controls)
    print(report.to_markdown(results, seconds, controls))
    say("written: " + ", ".join(str(p) for p in written))
    failed = [
        f"{r.test}{' (' + r.pt2_build + ')' if r.pt2_build else ''}" for r in results if not r.as_it_must
    ]
    if failed:
        print(f"error: Triton's own QA tests failed on our build: {', '.join(failed)}.", file=sys.stderr)
    broken = [r.test for r in controls if not control_held(r)]
    if broken:
        print(
            f"error: the negative control of {', '.join(broken)} did not fail by exactly one check, so the check "
            "count cannot be trusted; its logs say what ran (reports/triton-qa/logs/).",
            file=sys.stderr,
        )
    return 1 if failed or broken else 0


if __name__ == "__main__":
    sys.exit(main())
