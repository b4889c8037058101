"""Running the workflows here: the actions folder checked before use, the tool cache, the jobs' environment
(nothing named like a secret reaches a job), and act's JSON log read into jobs and steps. act itself runs in
tests/workflows (`nox -s workflows`)."""

from __future__ import annotations

import hashlib
import io
import sys
import tarfile
from dataclasses import replace
from pathlib import Path

import pytest

from tritonpt.versions import VERSIONS
from tritonpt_ci.workflows import actions, host, report
from tritonpt_ci.workflows.spec import Pinned, WorkflowsError

CHECKOUT = next(a for a in VERSIONS.workflows.actions if a.name == "actions/checkout")


def _tarball(path: Path) -> Path:
    with tarfile.open(path, "w:gz") as archive:
        data = b"name: checkout\nruns:\n  using: node20\n  main: dist/index.js\n"
        info = tarfile.TarInfo("action.yml")
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    return path


def test_a_pin_the_index_lacks_is_refused_naming_workflow_job_and_step() -> None:
    pins = [
        Pinned(workflow="ci.yml", job="lint", step="1: checkout", name=CHECKOUT.name, ref=CHECKOUT.commit),
        Pinned(workflow="gpu.yml", job="plan", step="2: setup", name="someone/else", ref="abc"),
    ]
    with pytest.raises(WorkflowsError) as failure:
        actions.indexed(pins)
    assert "gpu.yml job plan step 2: setup: someone/else@abc" in str(failure.value)
    assert "versions.toml [workflows.actions]" in str(failure.value)
    assert actions.indexed(pins[:1]) == [CHECKOUT]


def test_each_tarball_is_checked_against_its_sha256_before_use(tmp_path: Path) -> None:
    source = tmp_path / "actions"
    source.mkdir()
    tarball = _tarball(source / CHECKOUT.tarball)
    with pytest.raises(
        WorkflowsError, match=rf"its sha256 is {fetch_sha(tarball)}, not the pinned {CHECKOUT.sha256}"
    ):
        actions.prepare(source, [CHECKOUT], tmp_path / "unpacked")
    assert not (tmp_path / "unpacked").exists() or not any((tmp_path / "unpacked").iterdir())
    pinned = replace(CHECKOUT, sha256=fetch_sha(tarball))
    args = actions.prepare(source, [pinned], tmp_path / "unpacked")
    folder = tmp_path / "unpacked" / CHECKOUT.tarball.removesuffix(".tar.gz")
    assert args == ["--local-repository", f"{CHECKOUT.name}@{CHECKOUT.commit}={folder}"]
    assert (folder / "action.yml").is_file()
    (source / CHECKOUT.tarball).unlink()
    with pytest.raises(WorkflowsError, match=rf"there is no {CHECKOUT.tarball} in {source}"):
        actions.prepare(source, [pinned], tmp_path / "unpacked")


def fetch_sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_tool_cache_holds_this_python_as_setup_python_looks_for_it(tmp_path: Path) -> None:
    cache = host.tool_cache(tmp_path / "tools")
    version = cache / "Python" / host.python_version()
    assert (version / "x64").resolve() == Path(sys.base_prefix).resolve()
    assert (version / "x64.complete").is_file()
    assert host.tool_cache(tmp_path / "tools") == cache  # again: the same, nothing added


def test_no_variable_named_like_a_secret_reaches_a_job(tmp_path: Path) -> None:
    base = {
        "PATH": "/venv/bin:/usr/bin",
        "VIRTUAL_ENV": "/venv",
        "GITHUB_TOKEN": "ghp_x",
        "MY_API_KEY": "k",
        "AWS_SECRET_ACCESS_KEY": "s",
        "DOCKER_PASSWORD": "p",
        "SSH_AUTH_SOCK": "agent.sock",
        "NOX_CURRENT_SESSION": "workflows",
        "TRITONPT_SOURCES": "/mirror",
        "LANG": "C.UTF-8",
    }
    env, dropped = host.environment(home_dir=tmp_path / "home", marker="42", base=base)
    assert dropped == sorted(
        [
            "AWS_SECRET_ACCESS_KEY",
            "DOCKER_PASSWORD",
            "GITHUB_TOKEN",
            "MY_API_KEY",
            "NOX_CURRENT_SESSION",
            "SSH_AUTH_SOCK",
            "VIRTUAL_ENV",
        ]
    )
    assert not set(dropped) & set(env)
    assert env["PATH"] == "/usr/bin"
    assert env["TRITONPT_SOURCES"] == "/mirror"
    assert env["HOME"] == str(tmp_path / "home")
    assert env[host.MARKER] == "42"


def test_the_jobs_home_links_the_machine_caches_and_nothing_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv"))
    made = host.home(tmp_path / "home")
    assert sorted(p.name for p in (made / ".cache").iterdir()) == ["tritonpt", "uv"]
    assert (made / ".cache" / "uv").resolve() == (tmp_path / "uv").resolve()
    assert not (made / ".actrc").exists()


def _event(job: str, **fields: object) -> dict[str, object]:
    return {
        "job": job,
        "jobID": job.rsplit("/", maxsplit=1)[-1],
        "matrix": {},
        "time": "2026-12-02T13:00:00Z",
        **fields,
    }


def test_acts_log_becomes_jobs_with_steps_artifacts_summaries_and_errors(tmp_path: Path) -> None:
    events: list[dict[str, object] | str] = [
        "time=... level=fatal msg=not json",
        _event("w/a", step="Set up job", stepResult="success"),
        _event("w/a", stage="Main", step="build", msg="\x1b[32mok\x1b[0m\n", raw_output=True),
        _event("w/a", stage="Main", step="build", msg="boom\n", raw_output=True),
        _event("w/a", stage="Main", step="build", command="error", arg="::error:: it broke"),
        _event("w/a", stage="Main", step="build", stepResult="failure", executionTime=2_500_000_000),
        _event(
            "w/a",
            stage="Main",
            step="upload",
            raw_output=True,
            msg="Artifact reports-a has been successfully uploaded! Final size is 1234 bytes. Artifact ID is 1\n",
        ),
        _event("w/a", stage="Main", step="upload", command="summary", content="### done\n"),
        _event("w/a", stage="Main", step="upload", stepResult="success", executionTime=10**8),
        {**_event("w/a", jobResult="failure"), "time": "2026-12-02T13:00:07Z"},
    ]
    parsed = report.parse(events, workflow="w.yml", run_id="9")
    (job,) = parsed.jobs
    assert job.result == "failure"
    assert job.seconds == 7.0
    assert [(s.name, s.outcome, s.seconds) for s in job.steps] == [
        ("Set up job", "success", 0.0),
        ("build", "failure", 2.5),
        ("upload", "success", 0.1),
    ]
    assert job.artifacts == (report.Artifact(name="reports-a", size=1234),)
    assert job.summary == "### done\n"
    assert job.errors == ("build: ::error:: it broke", "build: ok", "build: boom")
    assert parsed.act_said == ("time=... level=fatal msg=not json",)
    markdown = parsed.to_markdown()
    assert "| w/a | failure | 7 | 2/3 | reports-a (1234 B) |" in markdown
    assert "> ### done" in markdown
    logs = report.write_logs(events, tmp_path)
    assert logs["w/a"].read_text(encoding="utf-8").splitlines()[1] == "[Main build] ok"


def test_a_matrix_entry_gets_its_own_result_whatever_act_says_of_the_matrix() -> None:
    """act 0.2.89 logs "Job failed" for every entry of a matrix one of whose entries failed."""
    events: list[dict[str, object] | str] = []
    for shard, outcome in (("1", "failure"), ("2", "success")):
        job = f"ci/shard {shard}"
        events += [
            {**_event(job, stage="Main", step="matrix", stepResult=outcome), "jobID": "integration"},
            {**_event(job, jobResult="failure"), "jobID": "integration"},
        ]
    events += [  # a job act could not start (its actions could not be fetched) ran no step of its own
        {**_event("ci/lint", step="Set up job", stepResult="success"), "jobID": "tests"},
        {**_event("ci/lint", jobResult="failure"), "jobID": "tests"},
    ]
    results = {j.name: j.result for j in report.parse(events, workflow="ci.yml").jobs}
    assert results == {"ci/shard 1": "failure", "ci/shard 2": "success", "ci/lint": "failure"}
