"""compat-watch.yml under act, by hand (workflow_dispatch), its lookups served from fixtures (CI reaches neither
PyPI nor GitHub):

- a new Triton release (26.12, server 2.76.0): its row, with its source, in versions.toml and the versions page,
  and the pull request's body says its libtorch is not stated; no leg runs for it;
- a new torch (the checkout as it was before torch 2.15's row, PyPI's newest 2.15.0): its row, its compat legs run
  for real (served here, on the caches `nox -s compat` filled), and each verdict in the pull request's body.

Under act the pull request is the run's artifact (the step that opens it on GitHub is skipped there).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tritonpt_ci.workflows.runner import Lane, Result

from .conftest import Started, Then, commit, snapshot

WATCH = Path(".github/workflows/compat-watch.yml")
FIXTURES = "tests/workflows/fixtures"
TORCH_ROW = '[[compat.torch]]\nminor = "2.15"\ntorch = "2.15.0"\ntorchvision = "0.29.2"\nline = "r26.05"\n'

NEW_RELEASE = Lane(
    workflow=WATCH,
    event="workflow_dispatch",
    inputs={"lookups": f"{FIXTURES}/lookups-new-release.json"},
    name="watch-new-release",
)


def _before_torch_2_15(_: Path, folder: Path) -> Path:
    """The checkout as it was before torch 2.15 had its row, as a developer would have pushed it."""
    repo = snapshot(folder / "before")
    toml = repo / "src" / "tritonpt" / "versions.toml"
    text = toml.read_text(encoding="utf-8")
    assert text.count(TORCH_ROW) == 1, f"the 2.15 row moved: look for it in {toml}"
    toml.write_text(text.replace(TORCH_ROW, ""), encoding="utf-8")
    commit(repo, "versions.toml: the table before torch 2.15")
    return repo


NEW_TORCH = Then(
    lane=Lane(
        workflow=WATCH,
        event="workflow_dispatch",
        inputs={"lookups": f"{FIXTURES}/lookups-today.json"},
        name="watch-new-torch",
    ),
    after=NEW_RELEASE,
    repo=_before_torch_2_15,
)


def _proposed(result: Result) -> tuple[dict[str, object], str, str]:
    (job,) = result.report.jobs_named("watch")
    assert job.result == "success", result.log("watch")
    opened = job.step("Open the pull request")
    assert opened is None or opened.outcome == "skipped"  # no GitHub under act: the artifact is the PR
    folder = result.artifact("compat-watch")
    found = json.loads((folder / "found.json").read_text(encoding="utf-8"))
    return (
        found,
        (folder / "pull-request.md").read_text(encoding="utf-8"),
        (folder / "changes.patch").read_text(),
    )


@pytest.mark.lanes(NEW_RELEASE)
def test_a_new_triton_release_gets_its_row_and_its_source_and_no_leg(started: Started) -> None:
    found, body, patch = _proposed(started.result(NEW_RELEASE, timeout=1800))
    assert found == {"torch": None, "release": "26.12"}
    assert "**Triton 26.12** (server 2.76.0)" in body
    assert "libtorch is not stated" in body
    assert "## Verdicts" not in body  # nothing new to serve on
    assert '+ngc = "26.12"' in patch
    assert '+server = "2.76.0"' in patch
    assert "releases/tag/v2.76.0: Release 2.76.0 corresponding to NGC container 26.12" in patch
    assert re.search(
        r"^\+\| Triton 26\.12 \| server 2\.76\.0, pytorch backend libtorch not stated", patch, re.M
    )


@pytest.mark.lanes(NEW_RELEASE, NEW_TORCH)
def test_a_new_torch_gets_its_row_and_its_legs_each_verdict_from_its_run(started: Started) -> None:
    found, body, patch = _proposed(started.result(NEW_TORCH.lane, timeout=3000))
    assert found == {"torch": "2.15.0", "release": None}
    assert "**torch 2.15.0** (torchvision 0.29.2)" in body
    assert "## Verdicts, each from its run" in body
    verdicts = [line for line in body.splitlines() if line.startswith("- ") and ": torch " in line]
    served_on = {re.search(r"against libtorch (\S+)", line).group(1).split("+")[0] for line in verdicts}  # type: ignore[union-attr]
    assert {"2.15.0", "2.9.1", "2.12.1"} <= served_on, body
    assert all(line.startswith("- parity: ") for line in verdicts), body
    assert '+minor = "2.15"' in patch
    assert "src/tritonpt/doctor/compat.json" in patch
