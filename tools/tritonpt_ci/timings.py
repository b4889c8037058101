"""What a run of ``nox`` (or of ``.ci/run``) spent its time on: each session's seconds and the caches' hits.

    Run.current()               this run: $TRITONPT_RUN (.ci/run sets it for its two noxes), else this nox's pid
    record(run, name, ...)      one session's row, appended to reports/timings/sessions.jsonl
    table(run) -> str           the rows of this run, slowest first, and a line per cache (tritonpt.caches)

noxfile.py times every session and ends ``nox`` with the ``timings`` session, which prints the table and writes
reports/timings/timings.md. Read by noxfile.py before any install, so this module uses the standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from tritonpt import caches
from tritonpt.options import add_arguments

RUN_ENV = "TRITONPT_RUN"
FOLDER = Path("reports") / "timings"
ROWS = "sessions.jsonl"


@dataclass(frozen=True, kw_only=True)
class Row:
    """One session of a run: how it ended and how long it took (its install included)."""

    run: str
    session: str
    status: str  # "success", "failed", "skipped", "interrupted"
    seconds: float
    started: float


@dataclass(frozen=True, kw_only=True)
class Run:
    """A run of nox, or of several noxes under one .ci/run: its id and the cache ledger its processes share."""

    id: str
    folder: Path

    @classmethod
    def current(cls, folder: Path = FOLDER) -> Run:
        """This run, its ledger set in the environment (inherited by every process below, act's jobs included)
        unless an outer run set one already."""
        run = os.environ.get(RUN_ENV) or f"nox-{os.getpid()}-{int(time.time())}"
        os.environ[RUN_ENV] = run
        folder = folder.absolute()
        os.environ.setdefault(caches.LEDGER_ENV, str(folder / f"cache-{run}.jsonl"))
        return cls(id=run, folder=folder)

    @property
    def ledger(self) -> Path:
        return Path(os.environ.get(caches.LEDGER_ENV) or self.folder / f"cache-{self.id}.jsonl")

    def record(self, session: str, *, status: str, seconds: float, started: float) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        row = Row(run=self.id, session=session, status=status, seconds=round(seconds, 1), started=started)
        with (self.folder / ROWS).open("a", encoding="utf-8") as stream:
            stream.write(json.dumps(asdict(row), sort_keys=True) + "\n")

    def rows(self) -> list[Row]:
        try:
            lines = (self.folder / ROWS).read_text(encoding="utf-8").splitlines()
        except OSError:
            return []
        found = []
        for line in lines:
            try:
                row = Row(**json.loads(line))
            except (ValueError, TypeError):
                continue
            if row.run == self.id:
                found.append(row)
        return found

    def table(self) -> str:
        """Markdown: each session of this run with its seconds, in the order they ran, the total, the caches."""
        rows = sorted(self.rows(), key=lambda r: r.started)
        total = sum(r.seconds for r in rows)
        lines = [
            f"## Run {self.id}: {len(rows)} session(s), {_clock(total)}",
            "",
            "| session | status | seconds | share |",
            "|---|---|---:|---:|",
        ]
        lines += [
            f"| {r.session} | {r.status} | {r.seconds:.0f} | {f'{r.seconds / total:.0%}' if total else '-'} |"
            for r in rows
        ]
        lines += ["", "```", *caches.summary(caches.read(self.ledger), shared=caches.root()), "```", ""]
        return "\n".join(lines)


def _clock(seconds: float) -> str:
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest:02d} s"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tritonpt_ci.timings", description=__doc__.splitlines()[0]
    )
    add_arguments(parser.add_argument, ("reports",), defaults={"reports": str(FOLDER.parent)})
    parser.add_argument("--record", metavar="NAME", help="record a step of the run that is not a session")
    parser.add_argument("--seconds", type=float, default=0.0, help="with --record: how long it took")
    options = parser.parse_args(argv)
    run = Run.current(options.reports / FOLDER.name)
    if options.record:
        run.record(
            options.record, status="success", seconds=options.seconds, started=time.time() - options.seconds
        )
        return 0
    text = run.table()
    (run.folder / "timings.md").write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
