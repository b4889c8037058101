"""Whether a matrix run ended because Triton crashed on its own, and the one rerun of such a run.

    crash_in(reports)      the Crash that ended it (aborted, its log ending in SIGABRT, SIGSEGV, SIGBUS, SIGFPE or
                           SIGILL, with the backtrace Triton prints after it), else None; findings(log): ASan/UBSan's
    Crash.known            the KNOWN crash it matches, with its reproduction in docs/upstream/, or None: a new one
    describe / keep_crashed / record_run   its paragraph, its copy in <reports>/crashed-run/, the "matrix-runs" part
    after_abort / after_run                the policy: a known crash with a reproduction runs the matrix once more

A failed check, or a server killed from outside, is never a crash (docs/guide/matrix.md: crashes and the hunt).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from tritonpt.reporting.reliability import folder_in, write_part

CRASH_SIGNAL = re.compile(r"^Signal \((?:4|6|7|8|11)\) received\.?$")
"""Triton's own line on a fatal signal: SIGILL, SIGABRT, SIGBUS, SIGFPE or SIGSEGV."""
KEPT = "crashed-run"
KEPT_FILES = ("summary.md", "summary.json", "junit.xml", "tritonserver.log")
CONTEXT_LINES = 2
"""Lines of the log before the signal line that say why (glibc's message, "terminate called after ...")."""


FRAME = re.compile(r"^\s*\d+# ")
"""A frame of the backtrace Triton prints after its signal line."""
BEFORE_LINES = 40
"""Lines of the log before the signal line that a known crash's marks are looked for in."""
SANITIZER_ERROR = re.compile(r"^==\d+==ERROR: \w+Sanitizer: ")
"""The first line of an ASan report ("==123==ERROR: AddressSanitizer: heap-use-after-free on address ...")."""
SANITIZER_SUMMARY = re.compile(r"^SUMMARY: \w+Sanitizer: ")
"""The last line of a sanitizer's report, naming the kind and the code responsible (file:line in function)."""
RUNTIME_ERROR = re.compile(r"^\S+:\d+:\d+: runtime error: ")
"""A UBSan finding ("file.cc:12:34: runtime error: load of misaligned address ...")."""
REPORT_LINES = 40
"""Lines of a sanitizer's report kept in a crash's description (its frames come first)."""


@dataclass(frozen=True)
class Known:
    """A crash seen before: its marks (all found in the log before the signal line or in the backtrace), and the
    reproduction in docs/upstream/ that says why, or None where the cause is not found yet."""

    name: str
    marks: tuple[str, ...]
    reproduction: str | None


KNOWN = (
    Known(
        "pt2-output-dtype-crash",
        ("libtriton_pt2.so", "TRITONBACKEND_ModelInstanceExecute", "std::operator<<"),
        "docs/upstream/pt2-output-dtype-crash.md",
    ),
    Known("core-warmup-failure", ("failed to run warmup sample",), "docs/upstream/core-warmup-failure.md"),
    Known("malloc-consolidate", ("malloc_consolidate(): unaligned fastbin chunk detected",), None),
)
"""Crashes of server 2.51.0 seen here. malloc-consolidate: glibc's abort seen once while the matrix unloaded a
model, cause not found (``nox -s crash-hunt`` counts how often it comes)."""


@dataclass(frozen=True)
class Crash:
    """A server that died of a signal it raised against itself: the lines that say so, the crashing thread's
    backtrace, and the log before them."""

    lines: str
    backtrace: tuple[str, ...]
    before: tuple[str, ...]
    report: tuple[
        str, ...
    ] = ()  # the last sanitizer report (ASan's ERROR line to its SUMMARY), where one ran

    @property
    def known(self) -> Known | None:
        text = "\n".join((*self.before, self.lines, *self.backtrace))
        return next((k for k in KNOWN if all(mark in text for mark in k.marks)), None)

    @property
    def name(self) -> str:
        """Its KNOWN name, else "new"."""
        known = self.known
        return known.name if known else "new"

    @property
    def reproduction(self) -> str | None:
        """Where docs/upstream/ reproduces it, or None (new, or its cause is not found yet)."""
        known = self.known
        return known.reproduction if known else None


def crash_in_log(log: list[str]) -> Crash | None:
    """The last crash in a server log's lines, else None."""
    for index in range(len(log) - 1, -1, -1):
        if CRASH_SIGNAL.match(log[index].strip()):
            frames = []
            for line in log[index + 1 :]:
                if not FRAME.match(line):
                    break
                frames.append(line.strip())
            return Crash(
                lines="\n".join(line.strip() for line in log[max(0, index - CONTEXT_LINES) : index + 1]),
                backtrace=tuple(frames),
                before=tuple(log[max(0, index - BEFORE_LINES) : index]),
                report=sanitizer_report(log[:index]),
            )
    return None


def sanitizer_report(log: list[str]) -> tuple[str, ...]:
    """The last ASan (or other sanitizer) report in a log's lines: its ERROR line, its frames, up to its SUMMARY
    (at most REPORT_LINES lines), else ()."""
    starts = [i for i, line in enumerate(log) if SANITIZER_ERROR.match(line.strip())]
    if not starts:
        return ()
    report: list[str] = []
    for line in log[starts[-1] :]:
        report.append(line.rstrip())
        if SANITIZER_SUMMARY.match(line.strip()) or len(report) >= REPORT_LINES:
            break
    return tuple(report)


def findings(log: list[str]) -> tuple[str, ...]:
    """Every sanitizer finding a server log holds, once each: ASan's SUMMARY lines and UBSan's runtime errors
    (a UBSan finding does not stop the server; an ASan one aborts it)."""
    found = (
        line.strip()
        for line in log
        if SANITIZER_SUMMARY.match(line.strip()) or RUNTIME_ERROR.match(line.strip())
    )
    return tuple(dict.fromkeys(found))


def crash_in(reports: Path) -> Crash | None:
    """The crash that ended the run in ``reports`` (its summary says aborted, its server log ends in a signal the
    server raised), else None."""
    try:
        summary = json.loads((reports / "summary.json").read_text(encoding="utf-8"))
        log = (reports / "tritonserver.log").read_text(encoding="utf-8", errors="replace").splitlines()
    except (OSError, ValueError):
        return None
    if not isinstance(summary, dict) or not summary.get("aborted"):
        return None
    return crash_in_log(log)


def crash_of(reports: Path) -> str | None:
    """The log lines showing that the run in ``reports`` ended because the server crashed on its own, else None."""
    crash = crash_in(reports)
    return None if crash is None else crash.lines


def describe(crash: Crash, kept: Path) -> str:
    """One paragraph on a crash: what it matched (or that it is new), its lines, the backtrace, where it is kept."""
    known = crash.known
    if known is None:
        what = "a crash that matches no known one (tritonpt.matrix.crash.KNOWN): a new bug to find"
    elif known.reproduction is None:
        what = f"the known crash {known.name!r}, whose cause is not found yet"
    else:
        what = f"the known crash {known.name!r}, reproduced in {known.reproduction}"
    frames = (
        "\n".join(crash.backtrace)
        if crash.backtrace
        else "(the log holds no backtrace after the signal line)"
    )
    report = ("\nThe sanitizer's report before it:\n" + "\n".join(crash.report)) if crash.report else ""
    return (
        f"Triton crashed on its own: {what}.\n{crash.lines}\n{frames}{report}\n"
        f"Its run (log, summary, junit.xml) is kept in {kept}."
    )


def reruns(crash: Crash) -> bool:
    """Whether CI may run the matrix once more after ``crash``: only for a known crash with an upstream
    reproduction (its cause is upstream's and unpatched); a new crash, or one whose cause is not found, fails."""
    known = crash.known
    return known is not None and known.reproduction is not None


def keep_crashed(reports: Path) -> Path:
    """Copy the crashed run's files into ``<reports>/crashed-run/`` (replacing an earlier copy); return it."""
    kept = reports / KEPT
    shutil.rmtree(kept, ignore_errors=True)
    kept.mkdir(parents=True)
    for name in KEPT_FILES:
        if (reports / name).is_file():
            shutil.copy2(reports / name, kept / name)
    return kept


RUNS_PART = "matrix-runs"
"""The reliability part that names every matrix session's run, and each crash and rerun it had."""


@dataclass(frozen=True)
class Run:
    """One matrix session's run as the reliability report shows it: ``first`` is "passed" or "crashed"; a crash
    is named (its KNOWN name, else "new") with its reproduction ("" where none) and where it was kept; ``rerun``
    is "" where none ran, else how the second run ended ("passed", "failed")."""

    reports: str
    first: str
    crash: str = ""
    reproduction: str = ""
    kept: str = ""
    rerun: str = ""

    @classmethod
    def crashed(cls, reports: Path, crash: Crash, kept: Path, rerun: str = "") -> Run:
        return cls(
            reports=str(reports),
            first="crashed",
            crash=crash.name,
            reproduction=crash.reproduction or "",
            kept=str(kept),
            rerun=rerun,
        )


def record_run(run: Run, folder: Path | None = None) -> Path:
    """Add ``run`` to the "matrix-runs" part (replacing an earlier run of the same reports folder), beside the
    matrix's own parts in ``<reports>/reliability/parts`` unless ``folder`` says where (`nox -s merge-reports` joins
    the shards')."""
    folder = folder_in(Path(run.reports)) if folder is None else folder
    try:
        held = json.loads((folder / f"{RUNS_PART}.json").read_text(encoding="utf-8")).get("runs", [])
    except (OSError, ValueError, AttributeError):
        held = []
    runs = [r for r in held if isinstance(r, dict) and r.get("reports") != run.reports]
    return write_part(RUNS_PART, {"runs": [*runs, asdict(run)], "tracebacks": 0}, folder)


RERUN_MARK = "TRITONPT_MATRIX_RERUN"
"""Set in the rerun's environment: the first run's crash (a Run, as JSON), so that a second crash ends it."""


def after_abort(reports: Path, command: Sequence[str] | None, *, say: Callable[[str], None]) -> None:
    """The matrix's policy on a run the watchdog aborted, once its reports are written and its server stopped.

    A crash of the server on its own is kept and said. A known crash with an upstream reproduction (``reruns``)
    runs the matrix once more: ``command`` (the matrix's own command line) replaces this process, with the crash
    in its environment; anything else (no crash, a new one, a second one, or no ``command``: reruns off, or the
    matrix not started by its command) returns, and the run ends with exit 1."""
    crashed = crash_in(reports)
    if crashed is None:
        return
    kept = keep_crashed(reports)
    said = describe(crashed, kept)
    first = os.environ.get(RERUN_MARK)
    if first:
        record_run(replace(Run(**json.loads(first)), rerun="failed"))
        say(f"{said}\nIt crashed again on its second run: this fails the run.")
        return
    run = Run.crashed(reports, crashed, kept)
    if command is None or not reruns(crashed):
        record_run(run)
        say(said)
        return
    say(
        f"{said}\nRunning the matrix once more (a known crash with an upstream reproduction); a second crash fails."
    )
    sys.stdout.flush()
    os.execve(command[0], list(command), {**os.environ, RERUN_MARK: json.dumps(asdict(run))})  # noqa: S606


def after_run(reports: Path, code: int) -> None:
    """Record a run that ended by itself: the rerun after a known crash, passed or failed; a first run, where it
    passed."""
    first = os.environ.get(RERUN_MARK)
    if first:
        record_run(replace(Run(**json.loads(first)), rerun="passed" if code == 0 else "failed"))
    elif code == 0:
        record_run(Run(reports=str(reports), first="passed"))
