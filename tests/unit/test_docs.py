"""The README and the site's shape: the README short, with exactly two commands, the second the one CI runs as
written; the site's home links every page.

"The two commands" is the README's first promise: on a fresh machine, the first sets up and runs the main job,
the second runs the tests. The command lines are read from the README's code block (tritonpt_ci.stock), not
copied here. The first runs as written on a stock Debian in tests/system/test_readme_stock.py; the second,
`nox`, runs everything, that test included, so it is not run from here: ``.ci/run``, which CI runs on every
change, must run it as written.
"""

from __future__ import annotations

import re
import shlex

from tritonpt_ci import stock

from ..helpers import ROOT

CI_RUN = ROOT / ".ci" / "run"
DOCS = ROOT / "docs"
README_LINES = 80
"""What it is, the two commands, what each does, where to read on: the rest lives in docs/."""


def test_the_readme_is_short() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_LINES, (
        f"README.md has {len(lines)} lines; move what is past {README_LINES} to docs/"
    )


def test_the_sites_home_links_every_page() -> None:
    """A page that docs/index.md does not link is found only by those who know it is there."""
    home = (DOCS / "index.md").read_text(encoding="utf-8")
    linked = {(DOCS / target).resolve() for target in re.findall(r"\]\(([^)#\s]+\.md)(?:#[^)]*)?\)", home)}
    pages = {p.resolve() for p in DOCS.rglob("*.md") if p.name != "index.md"}
    unlinked = sorted(str(p.relative_to(DOCS.resolve())) for p in pages - linked)
    assert not unlinked, f"docs/index.md links none of {unlinked}"


def test_the_readme_gives_two_commands() -> None:
    commands = stock.the_two_commands(ROOT / "README.md")
    assert len(commands) == 2, commands


def test_ci_runs_the_second_command_as_written() -> None:
    second = shlex.split(stock.the_two_commands(ROOT / "README.md")[1])
    runs = []
    for line in CI_RUN.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            words = shlex.split(line)
            runs.append(words[1:] if words[:1] == ["exec"] else words)
    assert second in runs, f"{CI_RUN} does not run `{shlex.join(second)}`: {runs}"
