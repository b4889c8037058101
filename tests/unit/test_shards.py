"""Shards (tritonpt.shards) and their merge (tritonpt.reporting.merge): one split, disjoint and whole, balanced by cost where
costs are known; the merge of N shards' reports is, case for case, what one unsharded run of the same models
reports; a missing, failed or foreign shard is named."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tritonpt import shards
from tritonpt.errors import ShardError
from tritonpt.reporting import merge
from tritonpt.reporting.report import ParityRow, Report, shard_identity
from tritonpt.repository import SPLIT_FILE, Split, clear_split, read_split, write_split

NAMES = [f"model_{i:02d}" for i in range(23)]


@pytest.mark.parametrize("count", [1, 2, 3, 8])
def test_the_split_is_disjoint_whole_and_the_same_every_time(count: int) -> None:
    parts = shards.split(NAMES, count)
    assert sorted(n for part in parts for n in part) == sorted(NAMES)
    assert sum(len(p) for p in parts) == len(NAMES)
    assert parts == shards.split(list(reversed(NAMES)), count)
    for index in range(1, count + 1):
        chosen = shards.select(NAMES, shards.Shard(index=index, count=count))
        assert chosen == parts[index - 1]


def test_measured_costs_balance_the_shards_longest_first() -> None:
    costs = shards.Costs(seconds={"big": 10.0, "mid": 6.0, "a": 3.0, "b": 3.0, "c": 2.0}, digest="x")
    parts = shards.split(costs.seconds, 2, costs)
    loads = sorted(sum(costs.seconds[n] for n in part) for part in parts)
    assert loads == [12.0, 12.0]
    assert shards.split(costs.seconds, 2, costs) == parts
    unmeasured = shards.split([*costs.seconds, "new_model"], 2, costs)
    assert sum(len(p) for p in unmeasured) == 6


@pytest.mark.parametrize("text", ["", "2", "0/2", "3/2", "a/b", "1/0", "-1/2"])
def test_a_shard_that_is_not_k_of_n_is_refused_saying_what_to_give(text: str) -> None:
    with pytest.raises(ShardError, match="expected K/N"):
        shards.Shard.parse(text)


def test_costs_are_read_from_a_summary_and_name_the_file_when_they_cannot_be(tmp_path: Path) -> None:
    summary = tmp_path / "summary.json"
    summary.write_text(json.dumps({"costs": {"a": {"export_s": 1, "load_s": 2, "matrix_s": 3.5}}}))
    costs = shards.Costs.read(summary)
    assert costs.seconds == {"a": 6.5}
    assert costs.digest
    summary.write_text("{not json")
    with pytest.raises(ShardError, match=str(summary)):
        shards.Costs.read(summary)


# --- the merge, against one unsharded run of the same models ------------------------------------------------


def _row(model: str, protocol: str) -> ParityRow:
    return ParityRow(
        model=model,
        protocol=protocol,
        case="b1",
        batch_size=1,
        output="OUTPUT__0",
        ok=True,
        max_abs_error=1e-6,
        max_rel_error=1e-6,
        atol=1e-4,
        rtol=1e-4,
        detail="",
    )


def _cases(models: list[str]) -> list[tuple[str, str, str]]:
    """The checks one run of these models has: (classname, name, outcome), as pytest's junit.xml writes them."""
    cases = [("tritonpt.matrix.test_health", f"test_live_and_ready[{p}]", "passed") for p in ("http", "grpc")]
    for m in models:
        cases += [("tritonpt.matrix.test_backend", f"test_model_is_ready[{m}]", "passed")]
        cases += [
            ("tritonpt.matrix.test_parity", f"test_parity[{m}-b1-{p}]", "passed") for p in ("http", "grpc")
        ]
        cases += [("tritonpt.matrix.test_health", f"test_gpu[{m}]", "skipped")]
    return cases


def _run(models: list[str], folder: Path, shard: shards.Shard | None, total: int) -> None:
    """What one matrix run writes: summary.json/.md through Report, junit.xml in pytest's layout."""
    cases = _cases(models)
    report = Report(
        environment={"server": "triton 2.51.0", "target": "local"},
        runtimes=dict.fromkeys(models, "libtriton_pytorch.so"),
        devices=dict.fromkeys(models, "cpu"),
        requests=dict.fromkeys(models, 7),
        parity=[_row(m, p) for m in models for p in ("http", "grpc")],
        outcomes={
            "passed": sum(c[2] == "passed" for c in cases),
            "skipped": sum(c[2] == "skipped" for c in cases),
        },
        costs={m: {"export_s": 1.0, "load_s": 0.5, "matrix_s": 2.0} for m in models},
        checks={f"{c}::{n}": [o] for c, n, o in cases},
    )
    if shard is not None:
        report.shard = shard_identity(shard, models, total, None)
    report.write(folder)
    suites = ET.Element("testsuites")
    suite = ET.SubElement(suites, "testsuite", {"name": "pytest", "tests": str(len(cases)), "time": "1.5"})
    suite.set("skipped", str(sum(c[2] == "skipped" for c in cases)))
    suite.set("failures", "0")
    suite.set("errors", "0")
    for classname, name, outcome in cases:
        case = ET.SubElement(suite, "testcase", {"classname": classname, "name": name, "time": "0.01"})
        if outcome == "skipped":
            ET.SubElement(case, "skipped", {"message": "no GPU"})
    ET.ElementTree(suites).write(folder / "junit.xml")


def test_the_merge_of_the_shards_is_case_for_case_one_unsharded_run(tmp_path: Path) -> None:
    models = NAMES[:9]
    _run(models, tmp_path / "whole", None, len(models))
    whole = Report.from_json((tmp_path / "whole" / "summary.json").read_text())
    folders = []
    for index, part in enumerate(shards.split(models, 3), start=1):
        folder = tmp_path / f"shard-{index}"
        _run(part, folder, shards.Shard(index=index, count=3), len(models))
        folders.append(folder)
    merged = merge.merge(folders)
    assert merged.complete
    assert merged.problems == []
    assert merged.report.runtimes == whole.runtimes
    assert merged.report.requests == whole.requests
    assert merged.report.costs == whole.costs
    key = lambda r: (r.model, r.protocol, r.case, r.output)  # noqa: E731
    assert sorted(merged.report.parity, key=key) == sorted(whole.parity, key=key)
    # The checks that take no model (health) ran in every shard; the merge counts each once, as one run does.
    whole_junit = ET.parse(tmp_path / "whole" / "junit.xml").getroot()  # noqa: S314 - written above
    assert merge.cases(merged.junit) == merge.cases(whole_junit)
    assert len(list(merged.junit.iter("testcase"))) == len(list(whole_junit.iter("testcase")))
    for total in ("tests", "failures", "errors", "skipped"):
        assert merged.junit.get(total) == whole_junit.find("testsuite").get(total)  # type: ignore[union-attr]
    assert merged.report.outcomes == whole.outcomes
    written = merge.write(merged, tmp_path / "merged")
    assert [p.name for p in written] == ["summary.md", "summary.json", "junit.xml"]
    third = len(shards.split(models, 3)[2])
    assert f"| 3/3 | {third} | passed |" in (tmp_path / "merged" / "summary.md").read_text()


def test_a_missing_or_failed_shard_is_named_and_the_merge_is_incomplete(tmp_path: Path) -> None:
    models = NAMES[:6]
    parts = shards.split(models, 3)
    _run(parts[0], tmp_path / "s1", shards.Shard(index=1, count=3), len(models))
    _run(parts[2], tmp_path / "s3", shards.Shard(index=3, count=3), len(models))
    data = json.loads((tmp_path / "s3" / "summary.json").read_text())
    data["outcomes"]["failed"] = 2
    (tmp_path / "s3" / "summary.json").write_text(json.dumps(data))
    (tmp_path / "empty").mkdir()
    merged = merge.merge([tmp_path / "s1", tmp_path / "s3", tmp_path / "empty"])
    assert not merged.complete
    states = {s["shard"]: s["state"] for s in merged.report.shards}
    assert states["1/3"] == "passed"
    assert "missing" in states["2/3"]
    assert "failed" in states["3/3"]
    said = "\n".join(merged.problems)
    assert "shard 2/3: no report" in said
    assert f"no summary.json in {tmp_path / 'empty'}" in said
    assert f"{len(parts[1])} of the split's 6 models are in no shard's report" in said
    assert merge.run([tmp_path / "s1", tmp_path / "s3"], tmp_path / "out") == 1


def test_with_the_expected_count_every_shard_without_a_folder_is_named_missing(tmp_path: Path) -> None:
    """A CI plan says how many shards ran; shards that uploaded nothing have no folder at all (gpu.yml's merge)."""
    merged = merge.merge([], expect=3)
    assert not merged.complete
    assert merged.problems == [f"shard {k}/3: no report (no shard's folder was given)" for k in (1, 2, 3)]
    assert [s["shard"] for s in merged.report.shards] == ["1/3", "2/3", "3/3"]
    assert merge.main(["--expect", "3", "--into", str(tmp_path / "none")]) == 1
    models = NAMES[:4]
    part = shards.split(models, 2)[0]
    _run(part, tmp_path / "s1", shards.Shard(index=1, count=2), len(models))
    with pytest.raises(ShardError, match="the shards are 2 of a split, but 3 were expected"):
        merge.merge([tmp_path / "s1"], expect=3)
    assert [p for p in merge.merge([tmp_path / "s1"], expect=2).problems if "no report" in p] == [
        "shard 2/2: no report among " + str(tmp_path / "s1")
    ]


def test_a_failed_shard_is_named_with_each_failed_check(tmp_path: Path) -> None:
    models = NAMES[:6]
    parts = shards.split(models, 2)
    for index, part in enumerate(parts, start=1):
        _run(part, tmp_path / f"s{index}", shards.Shard(index=index, count=2), len(models))
    holder = next(index for index, part in enumerate(parts, start=1) if part)
    junit = tmp_path / f"s{holder}" / "junit.xml"
    tree = ET.parse(junit)  # noqa: S314 - written above
    case = next(c for c in tree.getroot().iter("testcase") if c.get("name", "").startswith("test_parity["))
    ET.SubElement(case, "failure", {"message": "off by one"})
    tree.write(junit)
    data = json.loads((tmp_path / f"s{holder}" / "summary.json").read_text())
    data["outcomes"]["failed"] = 1
    (tmp_path / f"s{holder}" / "summary.json").write_text(json.dumps(data))
    merged = merge.merge([tmp_path / "s1", tmp_path / "s2"])
    assert not merged.complete
    assert f"shard {holder}/2: 1 check(s) failed:\n  {case.get('name')}" in merged.problems


def test_overlapping_shards_or_two_splits_are_refused_before_anything_is_written(tmp_path: Path) -> None:
    _run(NAMES[:3], tmp_path / "a", shards.Shard(index=1, count=2), 6)
    _run(NAMES[2:6], tmp_path / "b", shards.Shard(index=2, count=2), 6)
    with pytest.raises(ShardError, match="ran in shard 1 and in shard 2"):
        merge.merge([tmp_path / "a", tmp_path / "b"])
    _run(NAMES[3:6], tmp_path / "c", shards.Shard(index=2, count=3), 6)
    with pytest.raises(ShardError, match="different splits"):
        merge.merge([tmp_path / "a", tmp_path / "c"])
    assert merge.run([tmp_path / "a", tmp_path / "c"], tmp_path / "out") == 1
    assert not (tmp_path / "out").exists()


def test_a_check_every_shard_runs_is_taken_from_one_shard_failed_first_then_passed() -> None:
    shard_1 = {
        "h::live": ["passed"],
        "b::probe": ["skipped"],
        "m::t[a]": ["failed", "error"],
        "x::f": ["xfailed"],
    }
    shard_2 = {
        "h::live": ["failed"],
        "b::probe": ["passed"],
        "m::t[b]": ["passed", "error"],
        "x::f": ["xfailed"],
    }
    # pytest counts a failed test with a teardown error as 1 failed + 1 error, a passed one as 1 passed + 1 error,
    # and leaves xfailed out of the summary: so does the merge, each check from the shard that decides it.
    assert merge.outcomes_of([shard_1, shard_2]) == {"passed": 2, "failed": 2, "error": 2}
    root = ET.fromstring(  # noqa: S314 - the text below
        "<testsuites><testsuite>"
        '<testcase classname="h" name="live"/><testcase classname="m" name="t"><failure/></testcase>'
        '<testcase classname="m" name="t"><error/></testcase>'
        "</testsuite></testsuites>"
    )
    assert merge.cases(root) == {"h::live": ["passed"], "m::t": ["failure", "error"]}


def test_a_sharded_export_records_its_split_and_a_shard_of_it_finds_its_own_models(tmp_path: Path) -> None:
    every = [f"m{i}" for i in range(7)]
    shard = shards.Shard(index=2, count=3)
    write_split(tmp_path, Split(models=tuple(every)))
    present = shards.select(every, shard)  # what the sharded export wrote into this runner's repository
    assert shards.mine(tmp_path, present, shard, None) == (present, 7)
    with pytest.raises(ShardError, match="lacks"):
        shards.mine(tmp_path, present[:-1], shard, None)
    clear_split(tmp_path)
    assert shards.universe(tmp_path, present) == present


def test_the_split_record_reads_back_as_written_and_a_broken_one_is_named(tmp_path: Path) -> None:
    written = Split(
        models=("b", "a"), costs_digest="abc", parameters={"a": {"INTER_OP_THREAD_COUNT": "2"}, "b": {}}
    )
    write_split(tmp_path, written)
    assert read_split(tmp_path) == Split(models=("a", "b"), costs_digest="abc", parameters=written.parameters)
    assert not list(tmp_path.glob("*.partial"))
    (tmp_path / SPLIT_FILE).write_text('{"costs_digest": ""}', encoding="utf-8")  # no "models"
    with pytest.raises(ShardError, match=SPLIT_FILE):
        read_split(tmp_path)
    clear_split(tmp_path)
    assert read_split(tmp_path) is None


def test_a_shard_that_ran_models_and_recorded_no_checks_makes_the_merge_incomplete(tmp_path: Path) -> None:
    models = NAMES[:8]
    parts = shards.split(models, 2)
    assert all(parts), "a split of 8 names gives each of 2 shards some"
    for index, part in enumerate(parts, start=1):
        _run(part, tmp_path / f"s{index}", shards.Shard(index=index, count=2), len(models))
    assert merge.merge([tmp_path / "s1", tmp_path / "s2"]).complete
    data = json.loads((tmp_path / "s2" / "summary.json").read_text())
    data["checks"] = {}  # an older report, or a run that ended before its first check
    (tmp_path / "s2" / "summary.json").write_text(json.dumps(data))
    merged = merge.merge([tmp_path / "s1", tmp_path / "s2"])
    assert not merged.complete
    assert any("shard 2/2 ran models, but its summary.json records no checks" in p for p in merged.problems)
    assert merge.run([tmp_path / "s1", tmp_path / "s2"], tmp_path / "out") == 1


def test_an_empty_shard_that_recorded_no_checks_is_whole(tmp_path: Path) -> None:
    _run(NAMES[:2], tmp_path / "s1", shards.Shard(index=1, count=2), 2)
    Report(shard=shard_identity(shards.Shard(index=2, count=2), [], 2, None)).write(tmp_path / "s2")
    (tmp_path / "s2" / "junit.xml").write_text("<testsuites><testsuite/></testsuites>")
    assert merge.merge([tmp_path / "s1", tmp_path / "s2"]).complete


RULES = merge.Rules(deciding={}, probe_checks={})


def test_a_check_with_an_empty_parameter_set_counts_only_where_no_shard_ran_it_on_a_model() -> None:
    no_pt2 = {"p::pt2[NOTSET-http]": ["skipped"], "p::pt2[NOTSET-grpc]": ["skipped"], "h::live": ["passed"]}
    with_pt2 = {"p::pt2[a_pt2-http]": ["passed"], "p::pt2[a_pt2-grpc]": ["passed"], "h::live": ["passed"]}
    chosen = RULES.choose({1: no_pt2, 2: with_pt2}, lambda kinds: kinds)
    assert sorted(chosen) == ["h::live", "p::pt2[a_pt2-grpc]", "p::pt2[a_pt2-http]"]
    # where no shard has a model of that kind, one run has the skips too: they stay
    assert sorted(RULES.choose({1: no_pt2, 2: no_pt2}, lambda kinds: kinds)) == sorted(no_pt2)


def _probed(folder: Path, index: int, models: list[str], probe: str, batches: bool, outcome: str) -> None:
    _run(models, folder, shards.Shard(index=index, count=2), 4)
    data = json.loads((folder / "summary.json").read_text())
    node = "tritonpt/matrix/test_bad_requests.py::test_bad[shorten-http]"
    data["checks"][node] = [outcome]
    data["probes"] = {"torchscript": {"model": probe, "batches": batches}}
    data["probe_checks"] = {node: "torchscript"}
    (folder / "summary.json").write_text(json.dumps(data))
    junit = ET.parse(folder / "junit.xml")  # noqa: S314 - written by _run
    suite = junit.getroot().find("testsuite")
    assert suite is not None
    case = ET.SubElement(
        suite,
        "testcase",
        {"classname": "tritonpt.matrix.test_bad_requests", "name": "test_bad[shorten-http]"},
    )
    if outcome == "skipped":
        ET.SubElement(case, "skipped", {"message": f"{probe} has no input to shorten"})
    junit.write(folder / "junit.xml")


@pytest.mark.parametrize(
    ("first", "second", "expected"),
    [
        pytest.param(
            ("b_model", True, "passed"), ("a_model", True, "skipped"), "skipped", id="first-by-name"
        ),
        pytest.param(
            ("a_model", False, "passed"), ("b_model", True, "skipped"), "skipped", id="batching-first"
        ),
        pytest.param(("a_model", True, "passed"), ("b_model", True, "skipped"), "passed", id="its-own"),
    ],
)
def test_a_probe_check_is_taken_from_the_shard_whose_probe_one_run_would_pick(
    tmp_path: Path, first: tuple[str, bool, str], second: tuple[str, bool, str], expected: str
) -> None:
    """ "Passed in any shard beats skipped" would count a probe answer one run never sees: the shards' probes are
    different models, and one run sends its bad requests to the first that batches."""
    _probed(tmp_path / "s1", 1, ["m1", "m2"], *first)
    _probed(tmp_path / "s2", 2, ["m3", "m4"], *second)
    merged = merge.merge([tmp_path / "s1", tmp_path / "s2"])
    assert merged.complete, merged.problems
    node = "tritonpt/matrix/test_bad_requests.py::test_bad[shorten-http]"
    assert merged.report.checks[node] == [expected]
    key = "tritonpt.matrix.test_bad_requests::test_bad[shorten-http]"
    assert merge.cases(merged.junit)[key] == ["skipped" if expected == "skipped" else "passed"]
    assert merge.junit_key(node) == key
