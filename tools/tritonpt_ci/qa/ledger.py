"""What each of Triton's QA tests checked, seen as it ran, and those checks held against the plan.

    shims(at, grep=...)     the ``python``, ``python3`` and ``grep`` shims that record each run in the ledger
    server_line()           the server wrapper's line that records the file its log goes to
    tally(test, entries)    the checks seen (unittest cases, greps of a server's log) held to the plan's
    main(argv)              ``python -m tritonpt_ci.qa.ledger python|grep ARGS...``: what the shims exec

The ledger is one JSON object a line, at ``$TRITONPT_QA_LEDGER``. `nox -s triton-qa` runs the tests.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tritonpt_ci.qa.plan import UpstreamTest

LEDGER_ENV = "TRITONPT_QA_LEDGER"
GREP_ENV = "TRITONPT_QA_GREP"  # the real grep the shim runs
RESULTS = "test_results.txt"  # what upstream's TestResultCollector writes in the client's folder
SHIMMED = ("python", "python3", "grep")


def shims(at: Path, *, grep: str) -> dict[str, str]:
    """Write the ``python``, ``python3`` and ``grep`` shims into ``at``; the environment they need."""
    for name in SHIMMED:
        tool = "grep" if name == "grep" else "python"
        shim = at / name
        shim.write_text(
            "#!/bin/sh\n"
            "# tritonpt: records what Triton's QA test checks (tritonpt_ci.qa.ledger), then does as asked.\n"
            f'exec {_quoted(sys.executable)} -m tritonpt_ci.qa.ledger {tool} "$@"\n',
            encoding="utf-8",
        )
        shim.chmod(0o755)
    return {GREP_ENV: grep}


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def server_line() -> str:
    """The wrapper's line (bash, before it execs the server): the file its stdout goes to."""
    return (
        f'[ -n "${LEDGER_ENV}" ] && printf \'{{"kind": "server", "log": "%s"}}\\n\' '
        f'"$(readlink -f /proc/$$/fd/1)" >> "${LEDGER_ENV}"\n'
    )


def _append(entry: dict[str, Any]) -> None:
    path = os.environ.get(LEDGER_ENV)
    if path:
        with Path(path).open("a", encoding="utf-8") as ledger:
            ledger.write(json.dumps(entry) + "\n")


def _results_stamp() -> int | None:
    try:
        return Path(RESULTS).stat().st_mtime_ns
    except OSError:
        return None


def run_python(args: Sequence[str]) -> int:
    """The real Python with ``args``; then the client's line, with its test_results.txt if it wrote one."""
    before = _results_stamp()
    code = subprocess.run([sys.executable, *args], check=False).returncode
    results = None
    if _results_stamp() not in (None, before):
        try:
            results = json.loads(Path(RESULTS).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            results = None
    _append({"kind": "client", "argv": list(args), "exit": code, "results": results})
    return code


def _operands(args: Sequence[str]) -> tuple[str, list[str]]:
    """grep's pattern and its files, from its arguments as upstream's tests give them (options first)."""
    words = [a for a in args if not a.startswith("-")]
    return (words[0] if words else ""), words[1:]


def run_grep(args: Sequence[str]) -> int:
    """The real grep with ``args``, its output passed on; then its line, with what it found: the count it printed
    (``-c``), 1 or 0 (``-q``), else the lines it printed."""
    real = os.environ.get(GREP_ENV, "/usr/bin/grep")
    done = subprocess.run([real, *args], check=False, stdout=subprocess.PIPE)
    sys.stdout.buffer.write(done.stdout)
    sys.stdout.flush()
    pattern, files = _operands(args)
    if files:
        text = done.stdout.decode(errors="replace")
        words = text.split()
        count: int | None
        if "-c" in args:
            count = int(words[0]) if words and words[0].isdigit() else None
        elif "-q" in args:
            count = int(done.returncode == 0)
        else:
            count = len(text.splitlines())
        _append(
            {
                "kind": "grep",
                "argv": list(args),
                "pattern": pattern,
                "files": [str((Path.cwd() / f).resolve()) for f in files],
                "exit": done.returncode,
                "count": count,
            }
        )
    return done.returncode


def read(path: Path) -> list[dict[str, Any]]:
    """The ledger's entries, in the order they were written (a line that does not parse is left out)."""
    entries = []
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict):
            entries.append(entry)
    return entries


@dataclass(kw_only=True)
class Tally:
    """A test's checks as they ran: how many, how many held, and what did not."""

    ran: int = 0
    held: int = 0
    said: list[str] = field(default_factory=list)


def tally(test: UpstreamTest, entries: Sequence[dict[str, Any]]) -> Tally:
    """Count the checks the ledger saw and hold them to the plan: every unittest case a client reported (held unless
    it failed or erred), and every grep of a server's log, the n-th against the plan's n-th log check."""
    found = Tally()
    for entry in entries:
        results = entry.get("results") if entry.get("kind") == "client" else None
        if isinstance(results, dict):
            total = int(results.get("total", 0))
            bad = int(results.get("errors", 0)) + int(results.get("failures", 0))
            found.ran += total
            found.held += max(0, total - bad)
            if bad:
                found.said.append(
                    f"{' '.join(entry.get('argv', []))}: {bad} of {total} unittest case(s) failed"
                )
    logs = {entry.get("log") for entry in entries if entry.get("kind") == "server"}
    greps = [
        entry
        for entry in entries
        if entry.get("kind") == "grep" and any(f in logs for f in entry.get("files", []))
    ]
    for index, grep in enumerate(greps):
        found.ran += 1
        wanted = test.log_checks[index] if index < len(test.log_checks) else None
        if wanted is None:
            found.said.append(f"a grep of the server's log the plan does not count: {grep.get('pattern')!r}")
        elif grep.get("pattern") != wanted.pattern:
            found.said.append(
                f"grep {index + 1} looked for {grep.get('pattern')!r}, the plan's {wanted.pattern!r}"
            )
        elif not wanted.holds(grep.get("count"), int(grep.get("exit", 2))):
            found.said.append(
                f"the server's log held {grep.get('count')} x {wanted.pattern!r}: {wanted.describe()}"
            )
        else:
            found.held += 1
    return found


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] not in ("python", "grep"):
        print("usage: python -m tritonpt_ci.qa.ledger python|grep ARGS...", file=sys.stderr)
        return 2
    return run_python(args[1:]) if args[0] == "python" else run_grep(args[1:])


if __name__ == "__main__":
    sys.exit(main())
