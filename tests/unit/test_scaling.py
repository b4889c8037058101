"""The scaling bench's verdict: its timings are never judged, but "merged = unsharded" and every run passing
are claims, and a size where either does not hold fails the command."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

from tritonpt import shards
from tritonpt.report import Report
from tritonpt.testing import scaling


def _run(
    folder: Path, checks: dict[str, str], shard: shards.Shard | None = None, models: tuple[str, ...] = ()
) -> None:
    report = Report(
        checks={k: [v] for k, v in checks.items()}, runtimes=dict.fromkeys(models, "libtriton_pytorch.so")
    )
    report.outcomes = {k: list(checks.values()).count(k) for k in set(checks.values())}
    if shard is not None:
        report.shard = shards.identity(shard, list(models), 2, None)
    report.write(folder)
    suite = ET.SubElement(ET.Element("testsuites"), "testsuite")
    for key, kind in checks.items():
        classname, name = key.split("::")
        case = ET.SubElement(suite, "testcase", {"classname": classname, "name": name})
        if kind == "skipped":
            ET.SubElement(case, "skipped")
    root = ET.Element("testsuites")
    root.append(suite)
    ET.ElementTree(root).write(folder / "junit.xml")


def _size(equal: bool, code: int = 0) -> scaling.Size:
    run = scaling.Run(label="unsharded", models=2, wall_s=1.0, exit_code=code)
    return scaling.Size(
        models=2, export_s=0.1, unsharded=run, sharded_wall_s=1.0, shards=[run, run],
        merged_equal=equal, merged_detail="detail", reference_mb=0.0,
    )  # fmt: skip


def test_a_merge_that_differs_from_the_unsharded_run_fails_the_bench(tmp_path: Path) -> None:
    whole = {"h::live": "passed", "t::a[m1]": "passed", "t::a[m2]": "passed"}
    _run(tmp_path / "whole", whole)
    _run(
        tmp_path / "s1", {"h::live": "passed", "t::a[m1]": "passed"}, shards.Shard(index=1, count=2), ("m1",)
    )
    _run(
        tmp_path / "s2", {"h::live": "passed", "t::a[m2]": "passed"}, shards.Shard(index=2, count=2), ("m2",)
    )
    equal, detail = scaling.merged_equals_unsharded(tmp_path / "whole", [tmp_path / "s1", tmp_path / "s2"])
    assert equal, detail
    _run(
        tmp_path / "s2", {"h::live": "passed", "t::a[m2]": "skipped"}, shards.Shard(index=2, count=2), ("m2",)
    )
    equal, detail = scaling.merged_equals_unsharded(tmp_path / "whole", [tmp_path / "s1", tmp_path / "s2"])
    assert not equal
    assert "t::a[m2]: ['skipped'] merged, ['passed'] unsharded" in detail
    assert json.loads((tmp_path / "whole" / "summary.json").read_text())["outcomes"] == {"passed": 3}


def test_the_verdict_names_each_size_that_did_not_hold() -> None:
    assert scaling.verdict([_size(True)]) == []
    said = scaling.verdict([_size(True), _size(False), _size(True, code=1)])
    assert len(said) == 2
    assert "the merged shards are not the unsharded run: detail" in said[1]
    assert "the matrix failed at 2 models" in said[0]
