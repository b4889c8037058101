"""The validator's rule reference, written from :data:`~tritonpt.validate.rules.RULES`.

Each rule declares its code, title, why and example beside its checks (as ruff's rules carry their docs);
this module renders them as one Markdown page, grouped by family in the book's order. The committed page,
docs/reference/validator.md, is this module's output and nothing else's (a unit test holds them equal):

    python -m tritonpt.validate.reference              # rewrite docs/reference/validator.md
    python -m tritonpt.validate.reference --check      # exit 1 when the committed page is stale
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import tritonpt.validate  # noqa: F401 - importing the package declares every family's rules
from tritonpt import pages
from tritonpt.validate.rules import FAMILIES, RULES, Rule

PAGE = Path("docs/reference/validator.md")  # relative to the repository root
REGENERATE = "python -m tritonpt.validate.reference"

_CODE_SPAN = re.compile(r"(`[^`]*`)")


def _escaped(text: str) -> str:
    """Text outside code spans with Markdown's active characters escaped (``<name>__<index>`` stays as is)."""
    parts = _CODE_SPAN.split(text)
    for i in range(0, len(parts), 2):  # the even parts are outside code spans
        parts[i] = parts[i].replace("\\", "\\\\").replace("<", "&lt;").replace("_", "\\_").replace("*", "\\*")
    return "".join(parts)


def _section(found: Rule) -> list[str]:
    return [
        f"### {found.code}",
        "",
        f"**Catches:** {_escaped(found.title)}",
        "",
        f"**Why:** {_escaped(found.why)}",
        "",
        "**Example:**",
        "",
        "```text",
        found.example,
        "```",
        "",
    ]


def render(rules: dict[str, Rule] | None = None) -> str:
    """The rule reference page, one section per rule, grouped by family in :data:`FAMILIES`' order."""
    rules = RULES if rules is None else rules
    lines = [
        "# Validator rule reference",
        "",
        f"<!-- Written by `{REGENERATE}` from the rules' declarations in src/tritonpt/validate/. "
        "Do not edit by hand. -->",
        "",
        "`invoke validate` (and `invoke export`, which runs it) predicts what Triton Inference Server and its",
        "pytorch backend will do with a model repository. Every problem it reports names one of the rules below",
        "(`[C005]`); `nox -s differential` holds each prediction against the real server. A rule's *why* starts",
        "with the severity the validator reports and says what the server does with such a model; its example",
        "is a config.pbtxt fragment or a repository that breaks the rule.",
        "",
    ]
    for letter, family in FAMILIES.items():
        members = sorted((r for r in rules.values() if r.code[0] == letter), key=lambda r: r.code)
        if not members:
            continue
        lines += [f"## {letter}: {family}", "", "| rule | catches |", "|---|---|"]
        lines += [f"| [{r.code}](#{r.code.lower()}) | {_escaped(r.title)} |" for r in members]
        lines.append("")
        for found in members:
            lines += _section(found)
    return "\n".join(lines).rstrip("\n") + "\n"


def write(page: Path = PAGE) -> bool:
    """Write the page; whether it changed."""
    return pages.write(page, render())


def main(argv: list[str] | None = None) -> int:
    return pages.main(
        argv,
        prog=REGENERATE,
        description=__doc__.splitlines()[0],
        page=PAGE,
        render=render,
        what=f"{len(RULES)} rules",
    )


if __name__ == "__main__":
    sys.exit(main())
