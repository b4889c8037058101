"""What the workflow files say: the actions each step pins, and the nox sessions each job runs.

    Workflow.read(path)         one .github/workflows/*.yml, parsed with PyYAML
    workflow.pinned()           every ``uses: owner/repo@commit`` with the job and step that pins it
    workflow.sessions()         every ``nox -s NAME`` a job's ``run:`` scripts run, a matrix's values expanded
    audit(workflows, ...)       an unindexed action or commit, a default session no job runs, one nox lacks

tests/unit/test_workflows.py holds the repository's workflows to ``audit`` (`nox -s unit`).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tritonpt.errors import TritonPtError
from tritonpt.versions import VERSIONS, Action


class WorkflowsError(TritonPtError):
    """The workflows cannot be run here as asked: an action not in the index or not the pinned bytes, no act, a
    workflow, job or option that does not exist."""


USES = re.compile(r"^(?P<name>[\w.-]+/[\w.-]+)(?P<path>/[^@]*)?@(?P<ref>\S+)$")
EXPRESSION = re.compile(r"^\$\{\{\s*matrix\.(?P<key>[\w-]+)\s*\}\}$")
VARIABLE = re.compile(r"^\$\{?(?P<name>\w+)\}?$")


@dataclass(frozen=True, kw_only=True)
class Pinned:
    """One ``uses:`` of a step."""

    workflow: str  # "ci.yml"
    job: str
    step: str
    name: str  # "actions/cache" (a sub-action such as actions/cache/restore is its repository's)
    ref: str  # the commit (or whatever follows the @)


@dataclass(frozen=True, kw_only=True)
class Named:
    """One nox session a job's step runs."""

    workflow: str
    job: str
    session: str


@dataclass(frozen=True, kw_only=True)
class Workflow:
    path: Path
    data: Mapping[Any, Any]  # PyYAML's keys: str, and True for `on`

    @classmethod
    def read(cls, path: Path) -> Workflow:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or not isinstance(data.get("jobs"), dict):
            msg = f"Cannot run {path}, as it is not a GitHub Actions workflow (it has no jobs: mapping)."
            raise WorkflowsError(msg)
        return cls(path=path, data=data)

    @property
    def jobs(self) -> Mapping[str, Mapping[str, Any]]:
        jobs: Mapping[str, Mapping[str, Any]] = self.data["jobs"]
        return jobs

    @property
    def triggers(self) -> tuple[str, ...]:
        """The events it runs on (PyYAML reads the key ``on`` as the boolean True, as YAML 1.1 says)."""
        on = self.data.get("on", self.data.get(True))
        if isinstance(on, str):
            return (on,)
        return tuple(on) if isinstance(on, list | dict) else ()

    def pinned(self) -> list[Pinned]:
        found = []
        for job_id, job in self.jobs.items():
            for index, step in enumerate(job.get("steps") or ()):
                uses = step.get("uses") if isinstance(step, dict) else None
                if not isinstance(uses, str) or uses.startswith(("./", "docker://")):
                    continue
                match = USES.match(uses)
                name, ref = (match["name"], match["ref"]) if match else (uses, "")
                step_name = str(step.get("name") or uses)
                found.append(
                    Pinned(
                        workflow=self.path.name,
                        job=job_id,
                        step=f"{index + 1}: {step_name}",
                        name=name,
                        ref=ref,
                    )
                )
        return found

    def sessions(self) -> list[Named]:
        found = []
        for job_id, job in self.jobs.items():
            matrix = (job.get("strategy") or {}).get("matrix") or {}
            for step in job.get("steps") or ():
                if not isinstance(step, dict) or not isinstance(step.get("run"), str):
                    continue
                env = {**(job.get("env") or {}), **(step.get("env") or {})}
                for word in _nox_sessions(step["run"]):
                    found += [
                        Named(workflow=self.path.name, job=job_id, session=s)
                        for s in _expand(word, env=env, matrix=matrix)
                    ]
        return found


def _nox_sessions(script: str) -> list[str]:
    """The words after ``-s``/``--session``/``--sessions`` of each ``nox`` command line in a run: script."""
    words: list[str] = []
    for line in script.replace("\\\n", " ").splitlines():
        try:
            words_of_line = shlex.split(line, comments=True)
        except ValueError:
            continue
        for index, word in enumerate(words_of_line):
            if word != "nox" and not (word == "-m" and words_of_line[index + 1 : index + 2] == ["nox"]):
                continue
            rest = words_of_line[index + 1 :]
            taking = False
            for flag in rest:
                if flag in {"--", "&&", "||", ";", "|"}:
                    break
                if flag in {"-s", "--session", "--sessions"}:
                    taking = True
                elif flag.startswith("-"):
                    taking = False
                elif taking:  # nox takes several: `nox -s container faults`
                    words.append(flag)
            break
    return words


def _expand(word: str, *, env: Mapping[str, Any], matrix: Mapping[str, Any]) -> list[str]:
    """A session word as the runner would see it: ``$SESSION`` through the step's env, ``${{ matrix.X }}`` as each
    value of the matrix; a literal as it is."""
    variable = VARIABLE.match(word)
    if variable and variable["name"] in env:
        word = str(env[variable["name"]])
    expression = EXPRESSION.match(word.strip())
    if expression:
        values = matrix.get(expression["key"])
        return [str(v) for v in values] if isinstance(values, list) else []
    return [word]


def read_all(folder: Path = Path(".github/workflows")) -> list[Workflow]:
    return [Workflow.read(path) for path in sorted(folder.glob("*.yml"))]


def audit(
    workflows: Sequence[Workflow],
    *,
    defaults: Iterable[str],
    exists: Iterable[str],
    index: Sequence[Action] = VERSIONS.workflows.actions,
    every_default_in: str = "ci.yml",
) -> list[str]:
    """What is wrong between the workflows, nox and the actions index, one sentence each (empty: nothing).

    ``defaults``: the sessions `nox` runs by default, each of which the workflow ``every_default_in`` must run;
    ``exists``: every session the noxfile has; ``index``: the actions the workflows may pin.
    """
    problems: list[str] = []
    known = {(a.name, a.commit) for a in index}
    for workflow in workflows:
        for pin in workflow.pinned():
            if (pin.name, pin.ref) not in known:
                pinned_at = [a.commit for a in index if a.name == pin.name]
                why = (
                    f"the index pins it at {', '.join(pinned_at)}"
                    if pinned_at
                    else "the index has no such action"
                )
                problems.append(
                    f"{pin.workflow}: job {pin.job}, step {pin.step}: {pin.name}@{pin.ref} is not in the actions "
                    f"index ({why}; versions.toml [workflows.actions])."
                )
    have = set(exists)
    named = [n for w in workflows for n in w.sessions()]
    for name in named:
        if name.session not in have:
            problems.append(
                f"{name.workflow}: job {name.job} runs `nox -s {name.session}`, which the noxfile does not have."
            )
    ran = {n.session for n in named if n.workflow == every_default_in}
    for session in defaults:
        if session not in ran:
            problems.append(
                f"{every_default_in}: no job runs the default session {session!r} (`nox` runs it; CI must too)."
            )
    return problems
