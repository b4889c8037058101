"""Shards on real runs: the integration matrix on a repository, once whole and as shards of it, each with its own
server; the merge (tritonpt.reporting.merge) of the shards' reports must be what the whole run reported, check for check
and count for count: on small models, as 2 shards and as 4 (one of them empty); on a split whose shards send
their bad requests to different probe models; and on the built-in set in both formats, whose figures
docs/guide/matrix.md states."""

from __future__ import annotations

import json
import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import torch

from tritonpt import builtin, export, shards
from tritonpt.reporting import merge
from tritonpt.repository import models as model_folders

from ..helpers import ROOT, matrix_command
from . import preloaded

pytestmark = pytest.mark.slow


def _run(repository: Path, reports: Path, *args: str) -> dict[str, object]:
    command = [*matrix_command(repository, reports, *args), f"--junitxml={reports}/junit.xml"]
    done = preloaded.run_command(command, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return dict(json.loads((reports / "summary.json").read_text()))


@pytest.fixture(scope="module")
def three_small(exported_small: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Three small models and the reports of their unsharded run, which both splits below are held to."""
    folder = tmp_path_factory.mktemp("three-small")
    repository = folder / "repository"
    for name in ("multi_io", "token_encoder", "fixed_shape"):
        shutil.copytree(exported_small / name, repository / name)
    _run(repository, folder / "whole")
    return repository, folder / "whole"


@pytest.mark.parametrize("count", [2, 4])
def test_the_merged_shards_report_what_the_whole_run_reports(
    three_small: tuple[Path, Path], tmp_path: Path, count: int
) -> None:
    repository, whole_folder = three_small
    folders = [tmp_path / f"shard-{k}" for k in range(1, count + 1)]
    shard_models = []
    for k, folder in enumerate(folders, start=1):
        shard_models.append(_run(repository, folder, "--shard", f"{k}/{count}").get("shard"))
    ran = sorted(m for s in shard_models if isinstance(s, dict) for m in s["models"])
    assert ran == ["fixed_shape", "multi_io", "token_encoder"]  # disjoint and whole
    if count > 3:
        assert any(isinstance(s, dict) and not s["models"] for s in shard_models)  # an empty shard, passing

    merged = _merged_is_whole(whole_folder, folders)
    whole = json.loads((whole_folder / "summary.json").read_text())
    assert sorted(merged.report.runtimes) == sorted(whole["models"])
    rows = {(r.model, r.protocol, r.case, r.output) for r in merged.report.parity}
    assert rows == {(r["model"], r["protocol"], r["case"], r["output"]) for r in whole["parity"]}


BAD = "tritonpt/matrix/test_bad_requests.py::test_bad_request_gets_its_answer_and_the_server_stays_right"


def _merged_is_whole(whole_folder: Path, folders: list[Path]) -> merge.Merged:
    merged = merge.merge(folders)
    assert merged.complete, merged.problems
    whole = json.loads((whole_folder / "summary.json").read_text())
    assert merged.report.outcomes == whole["outcomes"]
    whole_junit = ET.parse(whole_folder / "junit.xml").getroot()  # noqa: S314 - pytest wrote it
    assert merge.cases(merged.junit) == merge.cases(whole_junit)
    return merged


def test_shards_whose_probes_differ_merge_to_the_whole_run(exported_small: Path, tmp_path: Path) -> None:
    """One run sends its bad requests to the first TorchScript model that batches, by name: here a_token_encoder,
    whose only input has a variable last dim, so the dim-mismatch case is skipped. The shard without it sends them
    to multi_io, where that case runs and passes: "passed in any shard beats skipped" would count a pass one run
    never sees."""
    repository = tmp_path / "repository"
    for name in ("multi_io", "fixed_shape"):
        shutil.copytree(exported_small / name, repository / name)
    export.export_factory(builtin.BUILTIN["token_encoder"], name="a_token_encoder", repository=repository)
    split = shards.split(["a_token_encoder", "fixed_shape", "multi_io"], 2)
    assert not any({"a_token_encoder", "multi_io"} <= set(part) for part in split), split  # apart
    whole = _run(repository, tmp_path / "whole")
    folders = [tmp_path / f"shard-{k}" for k in (1, 2)]
    ran = [_run(repository, folder, "--shard", f"{k}/2") for k, folder in enumerate(folders, start=1)]
    case = f"{BAD}[dim-mismatch-http]"
    assert whole["checks"][case] == ["skipped"]  # type: ignore[index]
    assert sorted(r["checks"][case][0] for r in ran) == ["passed", "skipped"]  # type: ignore[index]
    assert sorted(r["probes"]["torchscript"]["model"] for r in ran) == ["a_token_encoder", "multi_io"]  # type: ignore[index]

    merged = _merged_is_whole(tmp_path / "whole", folders)
    assert merged.report.checks[case] == ["skipped"]
    # The rule for checks that take no model alone (RANK: passed beats skipped) would not have held here.
    reports = [merge.read(f).report for f in folders]
    ranked = merge.Rules(deciding={}, probe_checks={}).choose(
        {i: r.checks for i, r in enumerate(reports, start=1) if r is not None}, lambda kinds: kinds
    )
    assert ranked[case] == ["passed"]


MATRIX_PAGE = ROOT / "docs/guide/matrix.md"


def _sentence(template: str) -> str:
    """A regular expression for ``template``, each ``{name}`` a number, any whitespace between its words."""
    pattern = []
    for part in re.split(r"(\{\w+\})", template):
        if part.startswith("{"):
            pattern.append(f"(?P<{part[1:-1]}>\\d+)")
        else:
            pattern.append(r"\s+".join(re.escape(word) for word in part.split(" ")))
    return "".join(pattern)


SEEN = re.compile(
    _sentence(
        "the built-in set in both formats ({models} models) as 2 shards of {a} and {b} models: {a_passed} passed, "
        "{a_skipped} skipped and {b_passed} passed, {b_skipped} skipped"
    )
    + ".*?"
    + _sentence(
        "merged: {merged_passed} passed, {merged_skipped} skipped, the same counts as the unsharded run of the same "
        "models ({whole_passed} passed, {whole_skipped} skipped)"
    ),
    re.DOTALL,
)


@pytest.fixture(scope="module")
def exported_builtin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The whole built-in set in both formats, as `invoke export --format both` writes it (the PT2 copies are
    compiled by AOTInductor: minutes on 2 cores)."""
    repository = tmp_path_factory.mktemp("builtin") / "repository"
    export.export_builtin(list(builtin.BUILTIN), repository=repository, model_formats=("torchscript", "pt2"))
    return repository


def test_the_builtin_set_in_both_formats_merges_to_the_readmes_figures(
    exported_builtin: Path, tmp_path: Path
) -> None:
    """The matrix guide's figure for the built-in set with its PT2 copies, sharded and not, held on real runs: each
    shard's counts, the merge's and the unsharded run's (on a host without a GPU, where the guide's were seen)."""
    whole = _run(exported_builtin, tmp_path / "whole")
    folders = [tmp_path / f"shard-{k}" for k in (1, 2)]
    ran = [_run(exported_builtin, folder, "--shard", f"{k}/2") for k, folder in enumerate(folders, start=1)]
    merged = _merged_is_whole(tmp_path / "whole", folders)
    if torch.cuda.is_available():
        pytest.skip(
            "the guide's figures were seen without a GPU (with one, its 10 GPU-only checks run); merged = whole held"
        )
    measured = {
        "models": len(model_folders(exported_builtin)),
        "shards": [(len(r["shard"]["models"]), r["outcomes"]) for r in ran],  # type: ignore[index]
        "merged": merged.report.outcomes,
        "whole": whole["outcomes"],
    }
    seen = SEEN.search(MATRIX_PAGE.read_text(encoding="utf-8"))
    assert seen is not None, (
        f"docs/guide/matrix.md no longer states the built-in set's figures in this form; seen: {measured}"
    )
    n = {k: int(v) for k, v in seen.groupdict().items()}
    stated = {
        "models": n["models"],
        "shards": [
            (n["a"], {"passed": n["a_passed"], "skipped": n["a_skipped"]}),
            (n["b"], {"passed": n["b_passed"], "skipped": n["b_skipped"]}),
        ],
        "merged": {"passed": n["merged_passed"], "skipped": n["merged_skipped"]},
        "whole": {"passed": n["whole_passed"], "skipped": n["whole_skipped"]},
    }
    assert measured == stated, f"docs/guide/matrix.md states {stated}; seen here {measured}"
