"""`tritonpt migrate` through the front door, on TorchScript files written with torch's own API (no tritonpt):

- the seed article's repository: a traced torchvision resnet18 and the config typed from Triton's docs;
- int64 token inputs of variable length, named after forward()'s arguments (a name clients must change);
- a scripted data-dependent branch (the converter makes it torch.cond);
- a traced model that returns a dict (pytorch_libtorch never served it; torch_aoti does);
- a scripted loop on the values, which torch's converter refuses: named, with what to do, and no folder.

One run migrates all five into OUT, serves each beside its original on one server and compares them; then
`tritonpt check --repository OUT` passes on its own, and IN is as it was.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import torchvision

from tritonpt import reference
from tritonpt.repository import ModelDir

from ..helpers import ROOT, matrix_command
from . import preloaded
from .test_own_files import ARTICLE_CONFIG

pytestmark = pytest.mark.slow


class Tokens(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embedding = torch.nn.Embedding(64, 8)
        self.head = torch.nn.Linear(8, 3)

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        hidden = self.embedding(input_ids) * attention_mask.unsqueeze(-1).to(torch.float32)
        return self.head(hidden.mean(1)), hidden


class Branch(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.sum() > 0:
            return x * 2.0
        return x - 1.0


class Keyed(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(6, 4)

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        logits = self.linear(x)
        return {"logits": logits, "probs": torch.softmax(logits, -1)}


class Loop(torch.nn.Module):
    """A loop whose count depends on the values (a constant count the converter unrolls, and moves)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        steps = 0
        while steps < 3 and bool(x.abs().max() > 1.0):
            x = x / 2.0
            steps += 1
        return x


TOKENS_CONFIG = """name: "tokens"
platform: "pytorch_libtorch"
max_batch_size: 4
input [
  { name: "input_ids" data_type: TYPE_INT64 dims: [ -1 ] },
  { name: "attention_mask" data_type: TYPE_INT64 dims: [ -1 ] }
]
output [
  { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 3 ] },
  { name: "OUTPUT__1" data_type: TYPE_FP32 dims: [ -1, 8 ] }
]
dynamic_batching { }
"""
BRANCH_CONFIG = """name: "branch"
backend: "pytorch"
max_batch_size: 0
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 4 ] } ]
"""
KEYED_CONFIG = """name: "keyed"
platform: "pytorch_libtorch"
max_batch_size: 4
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 6 ] } ]
output [
  { name: "logits" data_type: TYPE_FP32 dims: [ 4 ] },
  { name: "probs" data_type: TYPE_FP32 dims: [ 4 ] }
]
"""
LOOP_CONFIG = """name: "loop"
platform: "pytorch_libtorch"
max_batch_size: 0
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 5 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 5 ] } ]
"""


def _model(repository: Path, name: str, config: str, module: torch.jit.ScriptModule) -> None:
    (repository / name / "1").mkdir(parents=True)
    module.save(str(repository / name / "1" / "model.pt"))
    (repository / name / "config.pbtxt").write_text(config, encoding="utf-8")


@pytest.fixture(scope="module")
def torchscript(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """IN: five model folders, each file written with torch.jit.trace / torch.jit.script and a typed config."""
    repository = tmp_path_factory.mktemp("migrate") / "torchscript"
    torch.manual_seed(0)  # the same weights each run: the same programs, whose packages the cache keeps
    vision = torchvision.models.resnet18(weights=None).eval()
    _model(repository, "resnet18", ARTICLE_CONFIG, torch.jit.trace(vision, torch.randn(1, 3, 224, 224)))
    ids, mask = torch.randint(0, 64, (2, 7)), torch.ones(2, 7, dtype=torch.int64)
    _model(repository, "tokens", TOKENS_CONFIG, torch.jit.trace(Tokens().eval(), (ids, mask)))
    _model(repository, "branch", BRANCH_CONFIG, torch.jit.script(Branch()))
    keyed = torch.jit.trace(Keyed().eval(), torch.randn(2, 6), strict=False)
    _model(repository, "keyed", KEYED_CONFIG, keyed)
    _model(repository, "loop", LOOP_CONFIG, torch.jit.script(Loop()))
    return repository


SAMPLE_LENGTH = 9
"""The sequence length of the samples given for tokens (generated inputs are shorter)."""


def _digests(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def _migrate(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "tritonpt", "migrate", *args]
    return preloaded.run_command(command, cwd=cwd, timeout=1500)


@pytest.fixture(scope="module")
def migrated(torchscript: Path) -> tuple[Path, subprocess.CompletedProcess[str], dict[str, object]]:
    before = _digests(torchscript)
    work = torchscript.parent
    # a team's inputs for tokens alone, longer than the generated ones; the others take their own
    (work / "samples").mkdir()
    ids = np.random.default_rng(0).integers(0, 64, (3, SAMPLE_LENGTH), dtype=np.int64)
    np.savez(work / "samples" / "tokens.npz", input_ids=ids, attention_mask=np.ones_like(ids))
    done = _migrate(
        "--repository", "torchscript", "--into", "aoti", "--samples", "samples", "--smoke", cwd=work
    )
    assert _digests(torchscript) == before, "migrate wrote into its --repository"
    report = json.loads((work / "reports" / "migrate" / "migrate.json").read_text(encoding="utf-8"))
    return work / "aoti", done, report


def test_every_case_moves_but_the_loop_and_the_exit_code_says_so(
    migrated: tuple[Path, subprocess.CompletedProcess[str], dict[str, object]],
) -> None:
    out, done, report = migrated
    said = done.stdout + done.stderr
    assert done.returncode == 1, said[-4000:]
    assert "Traceback" not in said
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == [
        "branch",
        "keyed",
        "resnet18",
        "tokens",
    ]
    [loop] = report["refused"]  # type: ignore[misc]
    assert loop["name"] == "loop"
    assert "prim::Loop" in loop["reason"]
    assert "--model MODULE:ATTR --name loop" in loop["fix"]
    assert "refused loop: torch's TorchScript converter refused node prim::Loop" in said
    assert (
        "migrated tokens (converted): input input_ids -> INPUT__0, input attention_mask -> INPUT__1" in said
    )


def test_each_moved_model_answers_as_its_original_served_beside_it(
    migrated: tuple[Path, subprocess.CompletedProcess[str], dict[str, object]],
) -> None:
    _, _, report = migrated
    proofs = {p["name"]: p for p in report["proofs"]}  # type: ignore[attr-defined]
    assert sorted(proofs) == ["branch", "keyed", "resnet18", "tokens"]
    for name, proof in proofs.items():
        assert proof["error"] == "", name
        cases = {a["case"] for a in proof["agreements"]}
        assert cases == ({"full"} if name == "branch" else {"b1", f"b{8 if name == 'resnet18' else 4}"}), name
        for agreement in proof["agreements"]:
            assert agreement["ok"], (name, agreement)
            if name != "keyed":
                assert agreement["migrated_vs_original_abs"] <= agreement["atol"], (name, agreement)
    # pytorch_libtorch never served a dict: the proof says so in the server's words, and holds the file alone
    assert "should not be a List / Dictionary of Tensors" in proofs["keyed"]["original_error"]
    assert all(a["migrated_vs_original_abs"] is None for a in proofs["keyed"]["agreements"])
    speeds = {s["case"] for s in proofs["tokens"]["speeds"]}
    assert speeds == {"b1-c1", "b4-c1", "b1-c4"}
    assert all(s["original_per_s"] > 0 and s["migrated_per_s"] > 0 for s in proofs["resnet18"]["speeds"])


def test_the_page_says_what_clients_change_and_what_the_config_lost(
    migrated: tuple[Path, subprocess.CompletedProcess[str], dict[str, object]],
) -> None:
    out, _, _ = migrated
    page = (out.parent / "reports" / "migrate" / "migrate.md").read_text(encoding="utf-8")
    assert "## tokens: moved (converted)" in page
    assert "- input `input_ids` -> `INPUT__0`" in page
    assert "dynamic_batching left out" in page
    assert "## keyed: moved (converted)" in page
    assert "- output `logits` -> `OUTPUT__0`" in page
    assert "## loop: refused" in page
    config = (out / "tokens" / "config.pbtxt").read_text(encoding="utf-8")
    assert 'platform: "torch_aoti"' in config
    assert "dynamic_batching" not in config


def test_check_passes_on_the_migrated_repository_alone(
    migrated: tuple[Path, subprocess.CompletedProcess[str], dict[str, object]], tmp_path: Path
) -> None:
    out, _, _ = migrated
    command = [*matrix_command(out, tmp_path / "reports"), "-p", "no:randomly"]
    done = preloaded.run_command(command, cwd=ROOT, timeout=900)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    summary = json.loads((tmp_path / "reports" / "summary.json").read_text(encoding="utf-8"))
    held = summary["held_to"]["tokens"]
    assert held["source"] == "torchscript"
    assert held["held_to"].startswith("the TorchScript file it was migrated from, in-process")


def test_an_out_that_holds_a_folder_is_not_overwritten_without_force(
    migrated: tuple[Path, subprocess.CompletedProcess[str], dict[str, object]], torchscript: Path
) -> None:
    out, _, _ = migrated
    before = _digests(out)
    done = _migrate("--repository", str(torchscript), "--into", str(out), "--name", "branch", cwd=out.parent)
    said = done.stdout + done.stderr
    assert done.returncode == 1
    assert f"--into {out} already holds branch" in said
    assert "--force" in said
    assert "Traceback" not in said
    assert _digests(out) == before


def test_force_replaces_a_folder_only_with_a_model_that_moved(torchscript: Path, tmp_path: Path) -> None:
    """--force sets the folder it would replace aside: a model that does not move (here the loop the converter
    refuses) leaves OUT's folder of that name as it was."""
    out = tmp_path / "out"
    (out / "loop" / "1").mkdir(parents=True)
    (out / "loop" / "config.pbtxt").write_text('name: "loop"\n# deployed before\n', encoding="utf-8")
    before = _digests(out)
    done = _migrate(
        "--repository", str(torchscript), "--into", str(out), "--name", "loop", "--force", cwd=tmp_path
    )
    said = done.stdout + done.stderr
    assert done.returncode == 1, said[-3000:]
    assert "refused loop" in said
    assert "Traceback" not in said
    assert _digests(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "out",
        "reports",
    ]  # nothing set aside is left behind


def test_a_samples_folder_feeds_the_models_it_names_and_the_others_take_their_own(
    migrated: tuple[Path, subprocess.CompletedProcess[str], dict[str, object]],
) -> None:
    out, done, _ = migrated
    said = done.stdout + done.stderr
    assert "[branch] samples has no branch.npz" in said
    assert "[tokens] samples has no" not in said
    tokens = reference.load(ModelDir(root=out / "tokens"))
    assert {case.inputs[0].shape[-1] for case in tokens.cases} == {SAMPLE_LENGTH}


def test_a_factory_that_raises_refuses_its_model_in_a_line(torchscript: Path, tmp_path: Path) -> None:
    """--model's code is the team's: what it raises refuses the model with its words, never a traceback."""
    (tmp_path / "team_models.py").write_text(
        "def branch():\n    raise ValueError('the weights are on another disk')\n", encoding="utf-8"
    )
    done = _migrate(
        "--repository", str(torchscript), "--into", "out", "--name", "branch", "--model", "team_models:branch",
        cwd=tmp_path,
    )  # fmt: skip
    said = done.stdout + done.stderr
    assert done.returncode == 1, said[-3000:]
    assert "refused branch: --model's factory raised ValueError: the weights are on another disk" in said
    assert "Traceback" not in said
    assert not (tmp_path / "out" / "branch").exists()
