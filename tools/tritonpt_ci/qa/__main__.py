"""``python -m tritonpt_ci.qa``: Triton's own QA tests of the pytorch backend against our builds."""

from __future__ import annotations

import argparse
import concurrent.futures
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from tritonpt import stopping
from tritonpt.backend.serving import PT2_NAME
from tritonpt.errors import TritonPtError
from tritonpt.options import add_arguments
from tritonpt_ci.qa import report, run
from tritonpt_ci.qa.plan import PLANS, Plan
from tritonpt_ci.qa.run import QaResult, control_held, run_plan


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tritonpt_ci.qa", description=__doc__)
    add_arguments(parser.add_argument, ("reports",))
    refs = [plan.suite.source.ref for plan in PLANS]
    parser.add_argument(
        "--suite",
        action="append",
        default=[],
        choices=refs,
        help=f"run only this suite ({', '.join(refs)}; repeatable)",
    )
    # the PT2 build(s) the r26.05 suite runs against; default both: stock, where our tests of the fixes must fail,
    # and patched, where every test must pass
    add_arguments(parser.add_argument, ("pt2_build",), many=("pt2_build",))
    options = parser.parse_args(argv)

    def say(line: str) -> None:
        print(f"triton-qa: {line}", file=sys.stderr, flush=True)

    started = time.monotonic()
    legs = [
        (plan, build)
        for plan in PLANS
        if not options.suite or plan.suite.source.ref in options.suite
        for build in (
            (options.pt2_build or ["stock", "patched"]) if plan.suite.backend == PT2_NAME else ["stock"]
        )
    ]
    results, controls = [], []
    try:
        with stopping.stop_signals_interrupt():
            for ran, checked in _side_by_side(legs, reports=options.reports, step=say):
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


LEGS_AT_ONCE = 2
"""Legs (a suite against one build) run at once, each in its own scratch copy of qa/ with its own server ports:
their test.sh scripts mostly wait (for a server to load, a client to run), so two fill a 2-core machine."""


def _side_by_side(
    legs: Sequence[tuple[Plan, str]], *, reports: Path, step: Callable[[str], None]
) -> list[tuple[list[QaResult], list[QaResult]]]:
    """Every leg's results, in the legs' order. A stop (or a leg's error) sets :data:`run.STOP`, so that the
    other legs end their running test and leave nothing running, before it is raised here."""
    for (
        plan,
        build,
    ) in legs:  # the builds first, here: two legs must not build the same one at once (cold cache)
        run.builds(plan, step, build)
    with concurrent.futures.ThreadPoolExecutor(LEGS_AT_ONCE) as pool:
        running = [
            pool.submit(run_plan, plan, reports=reports, step=step, pt2_build=build) for plan, build in legs
        ]
        try:
            concurrent.futures.wait(running, return_when=concurrent.futures.FIRST_EXCEPTION)
            return [future.result() for future in running]
        except BaseException:
            run.STOP.set()
            for future in running:
                future.cancel()
            raise


if __name__ == "__main__":
    sys.exit(main())
