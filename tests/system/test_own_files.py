"""Repositories and model files made without tritonpt, checked through the front door (`python -m tritonpt.matrix`,
what `tritonpt check` runs) on a real server: each model without reference data is held to its own file in-process.

The article's repository, as it builds one step by step: a traced torchvision resnet18 saved as
``resnet18/1/model.pt`` and a config typed from Triton's docs (``INPUT__0`` FP32 [3, 224, 224], ``OUTPUT__0`` FP32
[1000], max_batch_size 8). Served with parity over HTTP and gRPC; the same with dims the model does not return fails
validation naming the field. A PT2 package without reference data is checked the same way, beside a file that
mixes the rows of a batch, which fails its check. And a file imported with `export --from-file` is then checked.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
import torch
import torchvision

from ..helpers import ROOT, invoke_command, matrix_command
from . import preloaded

pytestmark = pytest.mark.slow

ARTICLE_CONFIG = """name: "resnet18"
platform: "pytorch_libtorch"
max_batch_size: 8
input [
  {
    name: "INPUT__0"
    data_type: TYPE_FP32
    dims: [ 3, 224, 224 ]
  }
]
output [
  {
    name: "OUTPUT__0"
    data_type: TYPE_FP32
    dims: [ 1000 ]
  }
]
"""


@pytest.fixture(scope="module")
def article(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The article's repository: a traced resnet18 and its hand-written config, nothing else."""
    repository = tmp_path_factory.mktemp("article") / "models"
    (repository / "resnet18" / "1").mkdir(parents=True)
    model = torchvision.models.resnet18(weights=None).eval()
    traced = torch.jit.trace(model, torch.randn(1, 3, 224, 224))  # type: ignore[no-untyped-call]
    traced.save(str(repository / "resnet18" / "1" / "model.pt"))
    (repository / "resnet18" / "config.pbtxt").write_text(ARTICLE_CONFIG, encoding="utf-8")
    return repository


def _check(repository: Path, reports: Path) -> subprocess.CompletedProcess[str]:
    command = [*matrix_command(repository, reports), f"--junitxml={reports}/junit.xml"]
    return preloaded.run_command(command, cwd=ROOT, timeout=900)


def _outcomes(reports: Path) -> dict[str, str]:
    found = {}
    for case in ET.parse(reports / "junit.xml").getroot().iter("testcase"):  # noqa: S314 - pytest wrote it
        failed = case.find("failure") is not None or case.find("error") is not None
        found[case.get("name", "")] = (
            "failed" if failed else "skipped" if case.find("skipped") is not None else "passed"
        )
    return found


def test_the_articles_repository_is_served_with_parity_over_http_and_grpc(
    article: Path, tmp_path: Path
) -> None:
    reports = tmp_path / "reports"
    done = _check(article, reports)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    outcomes = _outcomes(reports)
    for case in ("b1", "b8"):
        for protocol in ("http", "grpc"):
            assert outcomes[f"test_parity[resnet18-{case}-{protocol}]"] == "passed"
    summary = json.loads((reports / "summary.json").read_text(encoding="utf-8"))
    held = summary["held_to"]["resnet18"]
    assert held["source"] == "in-process"
    assert (
        held["held_to"]
        == f"its own file in-process (torch {torch.__version__}), on inputs generated from config.pbtxt"
    )
    assert held["tolerances"] == {"OUTPUT__0": {"atol": 1e-4, "rtol": 1e-4}}
    assert {row["protocol"] for row in summary["parity"]} == {"http", "grpc"}
    assert "## What each model was held to" in (reports / "summary.md").read_text(encoding="utf-8")
    assert sorted(p.name for p in (article / "resnet18").iterdir()) == [
        "1",
        "config.pbtxt",
    ]  # nothing written there


def test_the_articles_config_with_dims_the_model_does_not_return_fails_naming_the_field(
    article: Path, tmp_path: Path
) -> None:
    repository = tmp_path / "models"
    shutil.copytree(article, repository)
    config = repository / "resnet18" / "config.pbtxt"
    config.write_text(ARTICLE_CONFIG.replace("dims: [ 1000 ]", "dims: [ 1001 ]"), encoding="utf-8")
    done = _check(repository, tmp_path / "reports")
    said = done.stdout + done.stderr
    assert done.returncode == 1, said[-3000:]
    assert "fails validation; no server was started" in said
    assert "output 'OUTPUT__0' dims: [1001] is declared, the model returns shape [1000]" in said
    assert "Traceback" not in said


class MixesRows(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x - x.mean(0, keepdim=True)


def test_a_package_without_reference_data_is_held_to_itself_and_a_file_that_mixes_rows_fails(
    exported_pt2: Path, tmp_path: Path
) -> None:
    repository = tmp_path / "models"
    shutil.copytree(exported_pt2 / "multi_io_pt2", repository / "multi_io_pt2")
    for made in ("reference.json", "reference.npz", ".export-stamp.json"):
        (repository / "multi_io_pt2" / made).unlink()
    (repository / "mixer" / "1").mkdir(parents=True)
    torch.jit.trace(MixesRows(), torch.randn(4, 3)).save(str(repository / "mixer" / "1" / "model.pt"))  # type: ignore[no-untyped-call]
    (repository / "mixer" / "config.pbtxt").write_text(
        'name: "mixer"\nplatform: "pytorch_libtorch"\nmax_batch_size: 4\n'
        'input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 3 ] } ]\n'
        'output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 3 ] } ]\n',
        encoding="utf-8",
    )
    reports = tmp_path / "reports"
    done = _check(repository, reports)
    said = done.stdout + done.stderr
    assert done.returncode == 1, said[-3000:]
    outcomes = _outcomes(reports)
    assert outcomes["test_its_own_file_runs_in_process_as_its_config_says[multi_io_pt2]"] == "passed"
    assert outcomes["test_its_own_file_runs_in_process_as_its_config_says[mixer]"] == "failed"
    assert "row 0 of a batch of 4 differs from the same sample run alone" in said
    assert not any(name.startswith("test_parity[mixer") for name in outcomes)  # never a pass
    parity = [o for name, o in outcomes.items() if name.startswith("test_parity[multi_io_pt2-")]
    assert parity
    assert set(parity) == {"passed"}
    summary = json.loads((reports / "summary.json").read_text(encoding="utf-8"))
    assert summary["held_to"]["multi_io_pt2"]["source"] == "in-process"
    assert summary["held_to"]["mixer"]["held_to"] == "nothing"


def test_a_file_imported_with_from_file_is_then_checked(article: Path, tmp_path: Path) -> None:
    samples = tmp_path / "inputs.npz"
    np.savez(samples, INPUT__0=np.random.default_rng(1).standard_normal((2, 3, 224, 224)).astype(np.float32))
    repository = tmp_path / "imported"
    done = subprocess.run(
        invoke_command(
            "export",
            "--from-file",
            str(article / "resnet18" / "1" / "model.pt"),
            "--name",
            "resnet18",
            "--samples",
            str(samples),
            "--repository",
            str(repository),
        ),
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "valid (1 model(s))" in done.stderr
    reports = tmp_path / "reports"
    checked = _check(repository, reports)
    assert checked.returncode == 0, checked.stdout[-3000:] + checked.stderr[-3000:]
    summary = json.loads((reports / "summary.json").read_text(encoding="utf-8"))
    assert summary["held_to"]["resnet18"]["held_to"].endswith("on inputs samples.npz")


class Tokens(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embedding = torch.nn.Embedding(32, 4)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.embedding(input_ids).sum(1)


DOCS_STYLE_CONFIG = """backend: "pytorch"
max_batch_size: 8
input [ { name: "INPUT__0" data_type: TYPE_INT64 dims: [ -1 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 4 ] } ]
dynamic_batching { }
"""


def test_a_config_as_tritons_docs_write_it_is_held_to_tritons_rules(tmp_path: Path) -> None:
    """No name and `backend: "pytorch"` with no platform (core fills both in), and `dynamic_batching { }` with no
    queue delay on a model faster than its requests: Triton serves them right, so they pass; a batcher that had
    nothing to combine is a finding in the report, with the queue delay that would let it combine, not a failure."""
    repository = tmp_path / "models"
    (repository / "tokens" / "1").mkdir(parents=True)
    traced = torch.jit.trace(Tokens().eval(), torch.randint(0, 32, (2, 5)))  # type: ignore[no-untyped-call]
    traced.save(str(repository / "tokens" / "1" / "model.pt"))
    (repository / "tokens" / "config.pbtxt").write_text(DOCS_STYLE_CONFIG, encoding="utf-8")
    reports = tmp_path / "reports"
    done = _check(repository, reports)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    outcomes = _outcomes(reports)
    assert outcomes["test_platform_and_interface_agree_with_the_committed_config[tokens]"] == "passed"
    assert outcomes["test_parity_under_dynamic_batching[tokens]"] == "passed"
    summary = json.loads((reports / "summary.json").read_text(encoding="utf-8"))
    for found in summary["findings"].get("tokens", []):  # where the batcher did combine, there is none
        assert (
            "the dynamic batcher combined none (every response had parity): with no max_queue_delay" in found
        )
        assert "max_queue_delay_microseconds: 1000" in found
