"""The workflows held to the noxfile and the actions index: every default session runs in ci.yml, every session a
job names exists, every pinned action is in versions.toml [workflows.actions]; and the audit that says so fails on a
workflow that breaks each of these (negative controls on edited copies of the real files).

The sessions come from nox itself (`nox -l --json` lists the default ones; `nox -l -s NAME` fails for a name the
noxfile lacks), not from reading the noxfile here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tritonpt.versions import VERSIONS
from tritonpt_ci.workflows import spec

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = ROOT / ".github" / "workflows"


def _nox(*args: str) -> subprocess.CompletedProcess[str]:
    """nox's own answer, uncoloured (CI sets FORCE_COLOR, which nox refuses beside --no-color: seen under act)."""
    env = {k: v for k, v in os.environ.items() if k not in {"FORCE_COLOR", "NO_COLOR"}}
    return subprocess.run(
        [sys.executable, "-m", "nox", "--no-color", "-l", *args],
        cwd=ROOT, capture_output=True, text=True, check=False, timeout=120, env=env,
    )  # fmt: skip


@pytest.fixture(scope="module")
def defaults() -> list[str]:
    listed = _nox("--json")
    assert listed.returncode == 0, listed.stderr
    return [s["session"] for s in json.loads(listed.stdout)]


@pytest.fixture(scope="module")
def workflows() -> list[spec.Workflow]:
    return spec.read_all(WORKFLOWS)


@pytest.fixture(scope="module")
def exists(workflows: list[spec.Workflow], defaults: list[str]) -> set[str]:
    """The sessions the workflows name (and the defaults) that nox has, each asked of nox."""
    named = {n.session for w in workflows for n in w.sessions()} | set(defaults) | {"not-a-session"}
    return {name for name in named if _nox("-s", name).returncode == 0}


def _edited(
    workflows: list[spec.Workflow], name: str, edit: str, replacement: str, tmp_path: Path
) -> list[spec.Workflow]:
    """The workflows with ``name``'s text edited once (``edit`` must occur), read back as files."""
    out = []
    tmp_path.mkdir(parents=True, exist_ok=True)
    for workflow in workflows:
        text = workflow.path.read_text(encoding="utf-8")
        if workflow.path.name == name:
            assert edit in text, f"{name} no longer holds {edit!r}: update this negative control"
            text = text.replace(edit, replacement, 1)
        path = tmp_path / workflow.path.name
        path.write_text(text, encoding="utf-8")
        out.append(spec.Workflow.read(path))
    return out


def test_nox_is_asked_and_a_session_it_lacks_is_told_apart(exists: set[str]) -> None:
    assert "unit" in exists
    assert "not-a-session" not in exists


def test_the_workflows_keep_to_the_noxfile_and_the_index(
    workflows: list[spec.Workflow], defaults: list[str], exists: set[str]
) -> None:
    assert spec.audit(workflows, defaults=defaults, exists=exists) == []


def test_every_default_session_and_both_lanes_are_read(
    workflows: list[spec.Workflow], defaults: list[str]
) -> None:
    """What the audit reads is what the files say: each default session, gpu.yml's gpu session, every pin."""
    ci = next(w for w in workflows if w.path.name == "ci.yml")
    assert set(defaults) <= {n.session for n in ci.sessions()}
    gpu = next(w for w in workflows if w.path.name == "gpu.yml")
    assert "gpu" in {n.session for n in gpu.sessions()}
    pinned = {(p.name, p.ref) for w in workflows for p in w.pinned()}
    assert pinned == {(a.name, a.commit) for a in VERSIONS.workflows.actions}


def test_a_default_session_missing_from_ci_is_found(
    workflows: list[spec.Workflow], defaults: list[str], exists: set[str], tmp_path: Path
) -> None:
    edited = _edited(workflows, "ci.yml", ", compat]", "]", tmp_path)
    problems = spec.audit(edited, defaults=defaults, exists=exists)
    assert problems == ["ci.yml: no job runs the default session 'compat' (`nox` runs it; CI must too)."]


def test_a_job_naming_a_session_nox_lacks_is_found(
    workflows: list[spec.Workflow], defaults: list[str], exists: set[str], tmp_path: Path
) -> None:
    edited = _edited(workflows, "gpu.yml", "nox -s gpu --", "nox -s not-a-session --", tmp_path)
    problems = spec.audit(edited, defaults=defaults, exists=exists)
    assert problems == [
        "gpu.yml: job gpu-matrix runs `nox -s not-a-session`, which the noxfile does not have."
    ]


def test_an_action_or_commit_missing_from_the_index_is_found(
    workflows: list[spec.Workflow], defaults: list[str], exists: set[str], tmp_path: Path
) -> None:
    checkout = next(a for a in VERSIONS.workflows.actions if a.name == "actions/checkout")
    edited = _edited(
        workflows, "gpu.yml", f"actions/checkout@{checkout.commit}", "actions/checkout@" + "0" * 40, tmp_path
    )
    problems = spec.audit(edited, defaults=defaults, exists=exists)
    assert len(problems) == 1
    assert problems[0].startswith("gpu.yml: job gpu-matrix, step 1: ")
    assert (
        f"actions/checkout@{'0' * 40} is not in the actions index (the index pins it at {checkout.commit}"
        in problems[0]
    )
    other = _edited(workflows, "ci.yml", "actions/setup-python@", "someone/setup-python@", tmp_path / "other")
    assert any(
        "someone/setup-python@" in p and "the index has no such action" in p
        for p in spec.audit(other, defaults=defaults, exists=exists)
    )


def test_a_session_in_a_matrix_is_read_through_the_step_env(tmp_path: Path) -> None:
    path = tmp_path / "w.yml"
    path.write_text(
        yaml.safe_dump(
            {
                "on": "push",
                "jobs": {
                    "a": {
                        "strategy": {"matrix": {"session": ["lint", "unit"]}},
                        "steps": [
                            {"run": 'nox -s "$SESSION"', "env": {"SESSION": "${{ matrix.session }}"}},
                            {"run": "python -m nox -s merge-reports -- --into x && echo nox -s not-this"},
                            {"run": 'sudo -E env "PATH=$PATH" nox --session soak  # nox -s commented'},
                            {"run": "nox -s container faults --no-venv"},
                        ],
                    }
                },
            }
        ),
        encoding="utf-8",
    )
    assert [n.session for n in spec.Workflow.read(path).sessions()] == [
        "lint",
        "unit",
        "merge-reports",
        "soak",
        "container",
        "faults",
    ]
