"""gpu.yml under act, by hand (workflow_dispatch) with its ``shards`` input: the plan fans out to exactly that many
shard jobs, and the merge expects that many, from the plan's output and not from the shards that reported. The
one-shard run is a fork's that says it has GPU runners (the repository variable TRITONPT_GPU_RUNNERS); a fork
that does not say so skips every job.

Where ``nvidia-smi`` answers, the same lane runs the shards for real (a lent GPU machine, a runner of the pool).
Elsewhere this is a fault: each shard must fail at its GPU preflight with its ``::error::`` line and upload nothing,
and the merge must name every shard missing and fail.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tritonpt_ci.workflows.runner import Lane

from .conftest import Started

GPU = Path(".github/workflows/gpu.yml")
PREFLIGHT = "GPU preflight"
PREFLIGHT_ERROR = "nvidia-smi failed: no GPU or no driver on this runner"


def _gpu_answers() -> bool:
    if shutil.which("nvidia-smi") is None:
        return False
    return subprocess.run(["nvidia-smi"], capture_output=True, check=False, timeout=60).returncode == 0


FORK = {"repository": {"fork": True}}
"""The event's payload in a fork of the repository."""
RUNNERS = {"TRITONPT_GPU_RUNNERS": "true"}
FANS = {
    count: Lane(
        workflow=GPU,
        event="workflow_dispatch",
        inputs={"shards": str(count)},
        name=f"gpu-shards-{count}" + "-fork" * (count == 1),
        payload=FORK if count == 1 else {},
        variables=RUNNERS if count == 1 else {},
    )
    for count in (1, 2, 3)
}
FORK_WITHOUT_RUNNERS = Lane(
    workflow=GPU, event="workflow_dispatch", inputs={"shards": "1"}, name="gpu-fork-no-runners", payload=FORK
)
BAD_COUNTS = {
    shards: Lane(
        workflow=GPU, event="workflow_dispatch", inputs={"shards": shards}, name=f"gpu-shards-bad-{shards}"
    )
    for shards in ("0", "17", "two")
}


@pytest.mark.lanes(*FANS.values())
@pytest.mark.parametrize("count", FANS)
def test_the_plan_fans_out_to_that_many_shards_and_the_merge_expects_them(
    started: Started, count: int
) -> None:
    result = started.result(FANS[count], timeout=1800)
    (plan,) = result.report.jobs_named("plan")
    assert plan.result == "success", result.log("plan")
    shards = result.report.jobs_named("gpu-matrix")
    assert sorted(str(j.matrix.get("shard")) for j in shards) == [str(k) for k in range(1, count + 1)]
    (merge,) = result.report.jobs_named("merge")
    merge_log = result.log("merge")
    if _gpu_answers():
        assert all(j.result == "success" for j in shards), result.report.to_markdown()
        assert merge.result == "success", merge_log
        assert "passed" in merge.summary
        return
    dropped: list[str] = []
    for shard in shards:
        preflight = shard.step(PREFLIGHT)
        assert preflight is not None
        assert preflight.outcome == "failure"
        assert shard.result == "failure"
        # act (host mode) stops reading a failed step's output when the step ends, so the last lines can be lost
        # (docs/guide/ci-and-gpu.md); the preflight pauses a second before failing for that, and a run whose
        # every shard lost the line still fails here.
        if not any(PREFLIGHT_ERROR in e for e in shard.errors):
            dropped.append(f"{shard.name}: {shard.errors}")
        assert not shard.artifacts  # it never reached its matrix, so it has nothing to upload
        later = [
            s
            for s in shard.steps
            if s.stage == "Main" and s.name == "Doctor, build, and this shard's matrix in a GPU container"
        ]
        assert [s.outcome for s in later] in ([], ["skipped"])
    assert len(dropped) < len(shards), f"no shard's log holds its preflight's ::error:: line: {dropped}"
    assert merge.result == "failure", merge_log
    for index in range(1, count + 1):
        assert f"shard {index}/{count}: no report" in merge_log
    assert f"shard {count + 1}/" not in merge_log
    assert result.code != 0
    assert not result.left


@pytest.mark.lanes(*BAD_COUNTS.values())
@pytest.mark.parametrize("shards", BAD_COUNTS)
def test_a_shard_count_outside_1_to_16_fails_the_plan_with_its_error(started: Started, shards: str) -> None:
    result = started.result(BAD_COUNTS[shards], timeout=600)
    (plan,) = result.report.jobs_named("plan")
    assert plan.result == "failure"
    plan_log = result.log("plan")
    assert f"the shards input must be a number from 1 to 16, not {shards!r}" in plan_log
    assert not result.report.jobs_named("gpu-matrix") or all(
        j.result in {"", "skipped"} for j in result.report.jobs_named("gpu-matrix")
    )
    assert all(j.result in {"", "skipped"} for j in result.report.jobs_named("merge"))
    assert result.code != 0


@pytest.mark.lanes(FORK_WITHOUT_RUNNERS)
def test_a_fork_that_has_not_said_it_has_gpu_runners_skips_every_job(started: Started) -> None:
    """Its pushes and runs by hand would otherwise queue shard jobs for runners it does not have. (act then
    reports no job at all: it cannot expand the shard matrix of a plan that never ran, and exits 1, where GitHub
    marks the jobs skipped; with the gate gone, the plan runs and is reported, and this fails.)"""
    result = started.result(FORK_WITHOUT_RUNNERS, timeout=600)
    jobs = [*result.report.jobs_named("plan"), *result.report.jobs_named("gpu-matrix")]
    jobs += result.report.jobs_named("merge")
    assert all(j.result in {"", "skipped"} for j in jobs), result.report.to_markdown()
    assert not any(s.stage == "Main" for j in jobs for s in j.steps)
