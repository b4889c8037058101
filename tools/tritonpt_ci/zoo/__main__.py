"""``python -m tritonpt_ci.zoo``: the command line (see the package docstring)."""

from __future__ import annotations

import argparse
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

from tritonpt.options import add_arguments
from tritonpt_ci.program import say, work
from tritonpt_ci.zoo import PAGE, chosen, run


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tritonpt_ci.zoo", description=__doc__)
    add_arguments(parser.add_argument, ("smoke", "reports"), defaults={"reports": "reports/zoo"})
    parser.add_argument("--only", action="append", default=[], help="only this architecture (repeatable)")
    parser.add_argument(
        "--page", type=Path, help=f"write the table between the zoo markers of this page ({PAGE})"
    )
    options = parser.parse_args(argv)

    architectures = chosen(smoke=options.smoke, only=options.only)
    shutil.rmtree(options.reports / "repository", ignore_errors=True)  # each run exports afresh
    with work("zoo"):
        report = run(architectures, reports=options.reports, step=say)
    written = report.write(options.reports)
    if options.page:
        report.into_page(options.page)
        written.append(options.page)
    print(report.to_markdown())
    say("written: " + ", ".join(str(p) for p in written))
    for problem in report.problems():
        say(f"zoo: {problem}")
    return 1 if report.problems() else 0


if __name__ == "__main__":
    sys.exit(main())
