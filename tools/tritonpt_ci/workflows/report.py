"""What a run under act did, from act's JSON log: each job, its steps with their outcome and seconds, the
artifacts it uploaded, the job summary it wrote, its error lines; report.md and report.json.

act logs one JSON object per line (``--json``). A job is named by ``job`` (``ci/nox -s lint``) with ``jobID`` and
``matrix``; a step's end carries ``stepResult`` and ``executionTime`` (nanoseconds); a job's end carries
``jobResult``; a step that appends to ``$GITHUB_STEP_SUMMARY`` yields ``command: summary`` with its ``content``;
``::error::`` lines are ``command: error``. act gives a matrix job's result once for all its entries, so an entry's
result here is its own: failure when one of its steps failed, else act's. Lines that are not JSON are kept.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

UPLOADED = re.compile(
    r"Artifact (?P<name>\S+) has been successfully uploaded! Final size is (?P<size>\d+) bytes"
)
ANSI = re.compile(r"\x1b(?:\[[0-9;?]*[A-Za-z]|\([A-Z])")
"""Terminal colours (FORCE_COLOR is set in ci.yml), taken out of what the report quotes."""
TAIL = 12
"""Lines of a failed step's output the report keeps."""


@dataclass(frozen=True, kw_only=True)
class Step:
    stage: str  # "Pre", "Main", "Post", or "" for act's Set up job / Complete job
    name: str
    outcome: str  # success, failure, skipped; "" when the log ends before it does
    seconds: float


@dataclass(frozen=True, kw_only=True)
class Artifact:
    name: str
    size: int


@dataclass(frozen=True, kw_only=True)
class Job:
    name: str  # "ci/nox -s lint", act's name for it
    job_id: str  # "tests"
    matrix: Mapping[str, object]
    result: str  # success, failure, skipped, cancelled; "" when it never ended
    seconds: float  # first to last event of the job
    steps: tuple[Step, ...]
    artifacts: tuple[Artifact, ...]
    summary: str  # what its steps appended to $GITHUB_STEP_SUMMARY
    errors: tuple[str, ...]  # ::error:: lines and the tail of each failed step

    def step(self, name: str, stage: str = "Main") -> Step | None:
        return next((s for s in self.steps if s.name == name and s.stage == stage), None)


@dataclass(frozen=True, kw_only=True)
class Report:
    workflow: str
    jobs: tuple[Job, ...]
    run_id: str = ""  # GITHUB_RUN_ID
    stored: tuple[str, ...] = ()  # the artifact server's folders after the run
    act_said: tuple[str, ...] = ()  # act's own lines that are not JSON
    code: int | None = None
    seconds: float = 0.0
    cancelled: bool = False
    left: tuple[str, ...] = ()
    dropped: tuple[str, ...] = ()  # variables kept from the jobs (names only)

    def finished(
        self, *, code: int, seconds: float, cancelled: bool, left: Sequence[str], dropped: Sequence[str]
    ) -> Report:
        return replace(
            self,
            code=code,
            seconds=round(seconds, 1),
            cancelled=cancelled,
            left=tuple(left),
            dropped=tuple(dropped),
        )

    def jobs_named(self, job_id: str) -> list[Job]:
        return [j for j in self.jobs if j.job_id == job_id]

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, default=str) + "\n"

    def to_markdown(self) -> str:
        verdict = (
            "cancelled"
            if self.cancelled
            else ("passed" if self.code == 0 else f"failed (act exited {self.code})")
        )
        lines = [
            f"# {self.workflow} under act: {verdict}, {self.seconds:.0f} s (run {self.run_id})",
            "",
            "| job | result | seconds | steps | artifacts |",
            "|---|---|---|---|---|",
        ]
        for job in self.jobs:
            passed = sum(s.outcome == "success" for s in job.steps)
            uploaded = ", ".join(f"{a.name} ({a.size} B)" for a in job.artifacts) or "none"
            lines.append(
                f"| {job.name} | {job.result or 'never ended'} | {job.seconds:.0f} | {passed}/{len(job.steps)} | {uploaded} |"
            )
        if self.left:
            lines += [
                "",
                f"**Left behind after the run ({len(self.left)}):**",
                *(f"- {item}" for item in self.left),
            ]
        if self.dropped:
            lines += [
                "",
                f"Variables kept from the jobs (named like secrets, or an outer run's): {', '.join(self.dropped)}",
            ]
        for job in self.jobs:
            lines += [
                "",
                f"## {job.name}: {job.result or 'never ended'}",
                "",
                "| stage | step | outcome | seconds |",
                "|---|---|---|---|",
            ]
            lines += [
                f"| {s.stage} | {_one_line(s.name)} | {s.outcome or '?'} | {s.seconds:.1f} |"
                for s in job.steps
            ]
            if job.errors:
                lines += ["", "Errors:", "", "```", *job.errors, "```"]
            if job.summary.strip():
                lines += [
                    "",
                    "Job summary:",
                    "",
                    *(f"> {line}" for line in job.summary.rstrip().splitlines()),
                ]
        if self.act_said:
            lines += ["", "## act's own output", "", "```", *self.act_said[-TAIL:], "```"]
        return "\n".join(lines) + "\n"

    def write(self, folder: Path) -> tuple[Path, Path]:
        folder.mkdir(parents=True, exist_ok=True)
        markdown, data = folder / "report.md", folder / "report.json"
        markdown.write_text(self.to_markdown(), encoding="utf-8")
        data.write_text(self.to_json(), encoding="utf-8")
        return markdown, data


def _one_line(text: str) -> str:
    """A step without a name is named by its script: its first line, for a table."""
    first = text.strip().splitlines()[0] if text.strip() else text
    return first + (" ..." if "\n" in text.strip() else "")


@dataclass(kw_only=True)
class _Building:
    name: str
    job_id: str
    matrix: Mapping[str, object]
    first: str = ""
    last: str = ""
    result: str = ""
    steps: dict[tuple[str, str], Step] = field(default_factory=dict)
    artifacts: list[Artifact] = field(default_factory=list)
    summary: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    output: dict[tuple[str, str], list[str]] = field(default_factory=dict)


def _result(job: _Building) -> str:
    """The entry's own result: a failed step fails it; an entry whose steps all passed passed, whatever act says
    of its matrix as a whole."""
    outcomes = [s.outcome for s in job.steps.values()]
    if "failure" in outcomes:
        return "failure"
    ran = [s.outcome for s in job.steps.values() if s.stage == "Main"]  # a job act could not start has none
    if job.result == "failure" and ran and all(o in {"success", "skipped"} for o in outcomes):
        return "success"
    return job.result


def _seconds(first: str, last: str) -> float:
    from datetime import datetime  # noqa: PLC0415

    try:
        return (datetime.fromisoformat(last) - datetime.fromisoformat(first)).total_seconds()
    except ValueError:
        return 0.0


def parse(
    events: Iterable[Mapping[str, object] | str],
    *,
    workflow: str,
    artifacts: Path | None = None,
    run_id: str = "",
) -> Report:
    """The report of one act run from its events (a str is a line that was not JSON)."""
    jobs: dict[str, _Building] = {}
    said: list[str] = []
    for event in events:
        if isinstance(event, str):
            said.append(ANSI.sub("", event))
            continue
        name = event.get("job")
        name = name.strip() if isinstance(name, str) else None  # act pads the names it aligns
        if name is None:
            message = str(event.get("msg", "")).strip()
            if message and event.get("level") in {"error", "fatal", "warning"}:
                said.append(message)
            continue
        job = jobs.setdefault(
            name,
            _Building(name=name, job_id=str(event.get("jobID", "")), matrix=dict(event.get("matrix") or {})),  # type: ignore[call-overload]
        )
        stamp = str(event.get("time", ""))
        job.first = job.first or stamp
        job.last = stamp or job.last
        step = str(event.get("step", ""))
        stage = str(event.get("stage", ""))
        message = ANSI.sub("", str(event.get("msg", "")))
        if event.get("raw_output"):
            job.output.setdefault((stage, step), []).append(message.rstrip("\n"))
            uploaded = UPLOADED.search(message)
            if uploaded:
                job.artifacts.append(Artifact(name=uploaded["name"], size=int(uploaded["size"])))
        if event.get("command") == "summary":
            job.summary.append(str(event.get("content", "")))
        if event.get("command") == "error":
            job.errors.append(f"{step}: {event.get('arg') or message}".strip())
        if "stepResult" in event:
            seconds = float(event.get("executionTime", 0) or 0) / 1e9  # type: ignore[arg-type]
            outcome = str(event["stepResult"])
            job.steps[(stage, step)] = Step(
                stage=stage, name=step, outcome=outcome, seconds=round(seconds, 1)
            )
            if outcome == "failure":
                tail = job.output.get((stage, step), [])[-TAIL:]
                job.errors += [f"{step}: {line}" for line in tail if line.strip()]
        if "jobResult" in event:
            job.result = str(event["jobResult"])
    stored = tuple(sorted(str(p.relative_to(artifacts)) for p in artifacts.glob("*/*"))) if artifacts else ()
    return Report(
        workflow=workflow,
        run_id=run_id,
        jobs=tuple(
            Job(
                name=b.name,
                job_id=b.job_id,
                matrix=b.matrix,
                result=_result(b),
                seconds=round(_seconds(b.first, b.last), 1),
                steps=tuple(b.steps.values()),
                artifacts=tuple(b.artifacts),
                summary="".join(b.summary),
                errors=tuple(dict.fromkeys(b.errors)),
            )
            for b in jobs.values()
        ),
        stored=stored,
        act_said=tuple(said),
    )


def write_logs(events: Iterable[Mapping[str, object] | str], folder: Path) -> dict[str, Path]:
    """Each job's whole output, ``<folder>/logs/<job>.log`` (one line each, its step in front); the report keeps
    only the tail of a failed step."""
    lines: dict[str, list[str]] = {}
    for event in events:
        if isinstance(event, str) or not isinstance(event.get("job"), str):
            continue
        message = ANSI.sub("", str(event.get("msg", ""))).rstrip("\n")
        lines.setdefault(str(event["job"]).strip(), []).append(
            f"[{event.get('stage', '')} {event.get('step', '')}] {message}"
        )
    written = {}
    (folder / "logs").mkdir(parents=True, exist_ok=True)
    for job, text in lines.items():
        path = folder / "logs" / (re.sub(r"[^\w.-]+", "_", job).strip("_") + ".log")
        path.write_text("\n".join(text) + "\n", encoding="utf-8")
        written[job] = path
    return written


def read_events(path: Path) -> list[Mapping[str, object] | str]:
    """act's log as events: JSON objects, and the lines that are not JSON as they are."""
    found: list[Mapping[str, object] | str] = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            if line.strip():
                found.append(line)
            continue
        found.append(event if isinstance(event, dict) else line)
    return found
