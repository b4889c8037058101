"""How often Triton crashes on its own under the matrix: the same matrix run N times, each crash kept and described.

    python -m tritonpt_ci.crash_hunt [--runs 50] [--sanitize address|undefined] [MATRIX OPTIONS ...]

`nox -s crash-hunt` runs it. Each run is ``python -m tritonpt.matrix`` in ``<reports>/run-NNN/``, kept only
when it failed (a crash with its backtrace, sanitizer findings too); crash-hunt.md and .json give the crashes
per 100 runs and each crash's known name or "new". Exit 0 only when every run passed with no finding.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from tritonpt import stopping
from tritonpt.errors import TritonPtError
from tritonpt.export.builtin_set import export_builtin_set
from tritonpt.matrix.crash import crash_in, findings
from tritonpt.matrix.settings import parse
from tritonpt.options import add_arguments

DEFAULT_RUNS = 50
DEFAULT_REPORTS = Path("reports/crash-hunt")
RUN_TIMEOUT_S = 1800.0
"""A run that takes longer is stopped and counted as hung (the matrix's own watchdog stops sooner)."""


@dataclass(frozen=True)
class Run:
    index: int
    exit: int
    seconds: float
    outcome: str  # passed, crashed, failed, hung
    crash: str | None = None  # the known crash's name, "new", or None
    reproduction: str | None = None
    kept: str | None = None
    findings: tuple[str, ...] = ()  # the sanitizer's findings in the server log (--sanitize), once each


def _one(index: int, folder: Path, matrix_args: Sequence[str]) -> Run:
    shutil.rmtree(folder, ignore_errors=True)
    command = [
        sys.executable,
        "-m",
        "tritonpt.matrix",
        "--reports",
        str(folder),
        "-q",
        "--no-rerun",
        *matrix_args,
    ]
    started = time.perf_counter()
    log = folder.parent / f"{folder.name}.out"
    folder.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        try:
            code = process.wait(timeout=RUN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.terminate()
            code = process.wait(timeout=60)
            outcome = "hung"
        except BaseException:
            process.wait(timeout=60)  # Ctrl-C reached it too: let the matrix stop its server
            raise
        else:
            outcome = "passed" if code == 0 else "failed"
    seconds = round(time.perf_counter() - started, 1)
    folder.mkdir(parents=True, exist_ok=True)
    log.replace(folder / "matrix.out")
    server_log = folder / "tritonserver.log"
    found = (
        findings(server_log.read_text(encoding="utf-8", errors="replace").splitlines())
        if server_log.is_file()
        else ()
    )
    if found:
        (folder / "findings.txt").write_text("\n".join(found) + "\n", encoding="utf-8")
    if outcome == "passed" and not found:
        shutil.rmtree(folder, ignore_errors=True)
        return Run(index, code, seconds, outcome)
    crash = crash_in(folder)
    if crash is None:
        return Run(index, code, seconds, outcome, kept=str(folder), findings=found)
    (folder / "backtrace.txt").write_text(
        "\n".join((crash.lines, *crash.backtrace, *crash.report)) + "\n", encoding="utf-8"
    )
    return Run(
        index,
        code,
        seconds,
        "crashed",
        crash=crash.name,
        reproduction=crash.reproduction,
        kept=str(folder),
        findings=found,
    )


def per_100(runs: Sequence[Run]) -> float:
    crashed = sum(run.outcome == "crashed" for run in runs)
    return round(100.0 * crashed / len(runs), 1) if runs else 0.0


def to_markdown(runs: Sequence[Run], wanted: int, matrix_args: Sequence[str]) -> str:
    crashed = [run for run in runs if run.outcome == "crashed"]
    others = [run for run in runs if run.outcome in ("failed", "hung")]
    command = " ".join(("python -m tritonpt_ci.crash_hunt", f"--runs {wanted}", *matrix_args))
    lines = [
        "# Crash hunt",
        "",
        f"Command: `{command}`",
        "",
        f"- runs: {len(runs)} of {wanted}",
        f"- crashed on their own: {len(crashed)} ({per_100(runs)} per 100 runs)",
        f"- failed or hung otherwise: {len(others)}",
        f"- runs with sanitizer findings: {sum(bool(r.findings) for r in runs)}",
        f"- mean seconds per run: {round(sum(r.seconds for r in runs) / len(runs), 1) if runs else 0.0}",
        "",
    ]
    if crashed:
        lines += ["## Crashes", "", "| run | crash | reproduction | kept |", "|---|---|---|---|"]
        lines += [f"| {r.index} | {r.crash} | {r.reproduction or 'none yet'} | {r.kept} |" for r in crashed]
        lines.append("")
    seen = dict.fromkeys(f for r in runs for f in r.findings)
    if seen:
        lines += ["## Sanitizer findings", "", "| finding | runs |", "|---|---|"]
        lines += [f"| `{f}` | {', '.join(str(r.index) for r in runs if f in r.findings)} |" for f in seen]
        lines.append("")
    lines += ["## Runs", "", "| run | outcome | exit | seconds | findings |", "|---|---|---|---|---|"]
    lines += [f"| {r.index} | {r.outcome} | {r.exit} | {r.seconds} | {len(r.findings)} |" for r in runs]
    return "\n".join(lines) + "\n"


def write(reports: Path, runs: Sequence[Run], wanted: int, matrix_args: Sequence[str]) -> Path:
    reports.mkdir(parents=True, exist_ok=True)
    data = {
        "runs_wanted": wanted,
        "runs": [asdict(run) for run in runs],
        "crashed": sum(run.outcome == "crashed" for run in runs),
        "crashes_per_100": per_100(runs),
        "runs_with_findings": sum(bool(run.findings) for run in runs),
        "matrix_args": list(matrix_args),
    }
    (reports / "crash-hunt.json").write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    target = reports / "crash-hunt.md"
    target.write_text(to_markdown(runs, wanted, matrix_args), encoding="utf-8")
    return target


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m tritonpt_ci.crash_hunt",
        description="Run the matrix N times; count, keep and describe the runs Triton crashed on its own.",
        epilog="Options not named here go to the matrix (python -m tritonpt.matrix), e.g. --repository DIR.",
    )
    parser.add_argument(
        "--runs", type=int, default=DEFAULT_RUNS, help=f"matrix runs (default {DEFAULT_RUNS})"
    )
    # --export-builtin once, before the runs (each run gets the rest)
    add_arguments(
        parser.add_argument, ("reports", "export_builtin"), defaults={"reports": str(DEFAULT_REPORTS)}
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    options, matrix_args = parser.parse_known_args(argv)
    if options.runs < 1:
        parser.error(f"--runs: expected a count of at least 1, got {options.runs}")
    reports = Path(options.reports).resolve()
    runs: list[Run] = []
    if options.export_builtin:
        try:
            known, _ = parse(matrix_args)
            export_builtin_set(known.repository, pt2_build=known.pt2_build)
        except TritonPtError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        except KeyboardInterrupt as interrupt:
            print("stopped before the first run", file=sys.stderr)
            return stopping.exit_code(interrupt)
    try:
        for index in range(1, options.runs + 1):
            run = _one(index, reports / f"run-{index:03d}", matrix_args)
            runs.append(run)
            crashed = sum(r.outcome == "crashed" for r in runs)
            said = (
                f" ({run.crash}; kept in {run.kept})"
                if run.crash
                else f" (kept in {run.kept})"
                if run.kept
                else ""
            )
            print(
                f"run {index}/{options.runs}: {run.outcome} in {run.seconds} s{said}; crashes so far: {crashed}",
                flush=True,
            )
    except KeyboardInterrupt:
        print(f"stopped after {len(runs)} runs", file=sys.stderr)
        write(reports, runs, options.runs, matrix_args)
        return 130
    target = write(reports, runs, options.runs, matrix_args)
    print(f"{per_100(runs)} crashes per 100 runs; written: {target}")
    return 0 if all(run.outcome == "passed" and not run.findings for run in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
