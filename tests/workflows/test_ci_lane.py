"""ci.yml under act: the integration matrix as two shards and their merge, twice, and one session job.

The first run is green and, as a push to main, keeps its merged seconds per model in the Actions cache. The second
run is the same tree plus a bad commit that makes one model fail parity: its shards must restore the first run's
seconds and split by them, the shard holding the broken model must fail, and the merge must name that shard and the
check. The cache server's store lives in the tritonpt cache, as a repository's Actions cache outlives its runs.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tritonpt.shards import Costs, split
from tritonpt_ci.workflows.runner import Lane, Result

from .conftest import MAIN, Started, Then, commit, snapshot

CI = Path(".github/workflows/ci.yml")
BROKEN = "multi_io"
# The bad commit: the matrix's parity check reads one model's expected outputs off by one, so that model's parity
# fails. It changes the checks, not what export writes (the export cache's key holds the export code, not the
# matrix), so both runs take the built-in set from the export cache (tritonpt.export.cache) instead of compiling it.
PARITY = "src/tritonpt/matrix/test_parity.py"
READS_EXPECTED = "    comparisons = _compare_outputs(triton, model, got, reference_case.outputs)\n"
BREAKS_EXPECTED = (
    "    expected = reference_case.outputs\n"
    f"    expected = tuple(o + 1 for o in expected) if model.name == {BROKEN!r} else expected\n"
    "    comparisons = _compare_outputs(triton, model, got, expected)\n"
)


def _merge_lane(name: str) -> Lane:
    return Lane(workflow=CI, job="merge", payload=MAIN, name=name)


def _with_the_bad_commit(_: Path, folder: Path) -> Path:
    """This checkout's snapshot plus the bad commit, as a developer would push it."""
    repo = snapshot(folder / "broken")
    parity = repo / PARITY
    text = parity.read_text(encoding="utf-8")
    assert text.count(READS_EXPECTED) == 1, f"the line this fault changes moved: look for it in {PARITY}"
    parity.write_text(text.replace(READS_EXPECTED, BREAKS_EXPECTED), encoding="utf-8")
    commit(repo, f"matrix: {BROKEN}'s expected outputs read off by one")
    return repo


GREEN = _merge_lane("ci-merge-green")
BROKEN_LANE = Then(lane=_merge_lane("ci-merge-broken"), after=GREEN, repo=_with_the_bad_commit)
LINT = Lane(workflow=CI, job="tests", matrix=("session:lint",), name="ci-tests-lint")


@pytest.fixture(scope="module")
def green(started: Started) -> Result:
    """The first run, green; the second run's shards balance by its merged seconds."""
    return started.result(GREEN, timeout=2400)


def _shard_summaries(result: Result) -> dict[int, dict[str, object]]:
    found = {}
    for index in (1, 2):
        folder = result.artifact(f"reports-integration-shard-{index}")
        (summary,) = folder.glob("shard-*-of-2/summary.json")
        found[index] = json.loads(summary.read_text(encoding="utf-8"))
    return found


def _checks(junit: Path) -> set[str]:
    root = ET.parse(junit).getroot()  # noqa: S314 - our own reports
    return {f"{case.get('classname')}::{case.get('name')}" for case in root.iter("testcase")}


@pytest.mark.lanes(LINT)
def test_a_session_job_runs_green(started: Started) -> None:
    """The job's glue: the runner, the cache step (saved in its post stage), the session's step. The session is
    the outer run's to prove; where that run passed it on this very tree, the job reuses its proof
    (tritonpt_ci.proofs) instead of linting again."""
    result = started.result(LINT, timeout=1800)
    (job,) = result.report.jobs_named("tests")
    assert job.result == "success", result.log("tests")
    assert [s.outcome for s in job.steps] == ["success"] * len(job.steps)
    assert job.step("nox -s lint") is not None
    saved = job.step("Cache uv packages and tritonpt builds", stage="Post")
    assert saved is not None
    assert saved.outcome == "success"
    assert result.ok, result.report.to_markdown()


@pytest.mark.lanes(GREEN)
def test_the_integration_shards_and_their_merge_run_green(green: Result) -> None:
    shards = green.report.jobs_named("integration")
    assert sorted(str(j.matrix["shard"]) for j in shards) == ["1", "2"]
    for job in shards:
        assert job.result == "success", green.log("integration")
        assert [a.name for a in job.artifacts] == [f"reports-integration-shard-{job.matrix['shard']}"]
        assert job.step("This shard's export and matrix") is not None
    (merge,) = green.report.jobs_named("merge")
    assert merge.result == "success", green.log("merge")
    assert [a.name for a in merge.artifacts] == ["reports-merged"]
    assert "| 1/2 |" in merge.summary
    assert "| 2/2 |" in merge.summary
    merged_folder = green.artifact("reports-merged")
    merged = json.loads((merged_folder / "summary.json").read_text(encoding="utf-8"))
    assert merged["outcomes"].get("passed", 0) > 0
    assert not merged["outcomes"].get("failed")
    assert not merged["outcomes"].get("error")
    # The merge read what both shards uploaded: its checks are theirs, each once. A shard that holds no model of a
    # kind reports pytest's placeholder for the empty parameter set (test_x[NOTSET]); one run has it only where no
    # shard ran that check on a model, so the merge leaves it out then (which split the seconds make varies).
    shard_checks = set()
    for index in (1, 2):
        (junit,) = green.artifact(f"reports-integration-shard-{index}").glob("shard-*-of-2/junit.xml")
        shard_checks |= _checks(junit)
    ran = {check.partition("[")[0] for check in shard_checks if "NOTSET" not in check}
    shard_checks = {c for c in shard_checks if "NOTSET" not in c or c.partition("[")[0] not in ran}
    assert _checks(merged_folder / "junit.xml") == shard_checks
    assert len(shard_checks) == sum(merged["outcomes"].values())
    keep = merge.step("Keep them for the next run's split")
    assert keep is not None
    assert keep.outcome == "success"  # a push to main keeps the seconds for the next run
    assert green.ok, green.report.to_markdown()


@pytest.mark.lanes(GREEN, BROKEN_LANE)
def test_a_shard_that_fails_parity_fails_the_merge_which_names_it_and_the_check(
    green: Result, started: Started, tmp_path: Path
) -> None:
    """The second run starts the moment the first ends (its merge saved the seconds this one splits by)."""
    result = started.result(BROKEN_LANE.lane, timeout=2400)

    # Balanced by the first run: each shard restored its merged seconds and split by them.
    costs_file = tmp_path / "first-run-summary.json"
    costs_file.write_bytes((green.artifact("reports-merged") / "summary.json").read_bytes())
    costs = Costs.read(costs_file)
    assert costs.seconds, "the first run's merged summary holds no seconds per model"
    for job in result.report.jobs_named("integration"):
        log = result.log_of(job)
        assert f"Cache restored from key: ci-shard-costs-{green.run_id}" in log
        # The bad commit is outside the export's key: the first run's exports are copied, none compiled again.
        exports = re.findall(r"cache: export \S+ (hit|miss)", log)
        assert exports, "the shard said nothing of the export cache"
        assert set(exports) == {"hit"}, log
    summaries = _shard_summaries(result)
    every = sorted({m for s in summaries.values() for m in s["shard"]["models"]})
    expected = split(every, 2, costs)
    for index, summary in summaries.items():
        assert summary["shard"]["costs_digest"] == costs.digest
        assert summary["shard"]["models"] == expected[index - 1]

    # The shard holding the broken model fails; the merge fails and names that shard and its check.
    holder = next(i for i, models in enumerate(expected, start=1) if BROKEN in models)
    by_shard = {int(str(j.matrix["shard"])): j for j in result.report.jobs_named("integration")}
    assert by_shard[holder].result == "failure"
    assert by_shard[3 - holder].result == "success"
    (merge,) = result.report.jobs_named("merge")
    assert merge.result == "failure"
    merge_log = result.log("merge")
    assert f"shard {holder}/2: " in merge_log
    assert f"  test_parity[{BROKEN}-b1-http]" in merge_log  # the check, by its id
    assert result.code != 0
    assert not result.left
