"""The README's two commands: exactly two, and CI runs the second as written.

"The two commands" is the README's first promise: on a fresh machine, the first sets up and runs the main job,
the second runs the tests. The command lines are read from the README's code block (tritonpt_ci.stock), not
copied here. The first runs as written on a stock Debian in tests/docker/test_readme_stock.py; the second,
`nox`, runs everything, that test included, so it is not run from here: ``.ci/run``, which CI runs on every
change, must run it as written.
"""

from __future__ import annotations

import shlex

from tritonpt_ci import stock

from ..helpers import ROOT

CI_RUN = ROOT / ".ci" / "run"


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
