"""Shards on real runs: the integration matrix on a small repository, once whole and as shards of it, each with
its own server; the merge (tritonpt.merge) of the shards' reports must be what the whole run reported, check for
check and count for count, and a split with more shards than models must still merge whole."""

from __future__ import annotations

import json
import subprocess
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pytest

from tritonpt import merge

from ..helpers import ROOT, matrix_command

pytestmark = pytest.mark.slow


def _run(repository: Path, reports: Path, *args: str) -> dict[str, object]:
    command = [*matrix_command(repository, reports, *args), f"--junitxml={reports}/junit.xml"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return dict(json.loads((reports / "summary.json").read_text()))


@pytest.mark.parametrize("count", [2, 4])
def test_the_merged_shards_report_what_the_whole_run_reports(
    repository_copy: Callable[..., Path], tmp_path: Path, count: int
) -> None:
    repository = repository_copy("multi_io", "token_encoder", "fixed_shape")
    whole = _run(repository, tmp_path / "whole")
    folders = [tmp_path / f"shard-{k}" for k in range(1, count + 1)]
    shard_models = []
    for k, folder in enumerate(folders, start=1):
        shard_models.append(_run(repository, folder, "--shard", f"{k}/{count}").get("shard"))
    ran = sorted(m for s in shard_models if isinstance(s, dict) for m in s["models"])
    assert ran == ["fixed_shape", "multi_io", "token_encoder"]  # disjoint and whole
    if count > 3:
        assert any(isinstance(s, dict) and not s["models"] for s in shard_models)  # an empty shard, passing

    merged = merge.merge(folders)
    assert merged.complete, merged.problems
    assert merged.report.outcomes == whole["outcomes"]
    whole_junit = ET.parse(tmp_path / "whole" / "junit.xml").getroot()  # noqa: S314 - pytest wrote it above
    assert merge.cases(merged.junit) == merge.cases(whole_junit)
    assert sorted(merged.report.runtimes) == sorted(dict(whole["models"]))  # type: ignore[call-overload]
    rows = {(r.model, r.protocol, r.case, r.output) for r in merged.report.parity}
    assert rows == {(r["model"], r["protocol"], r["case"], r["output"]) for r in whole["parity"]}  # type: ignore[attr-defined]
