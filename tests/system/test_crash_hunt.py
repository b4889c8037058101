"""nox -s crash-hunt's program (tritonpt_ci.crash_hunt) on real servers: a run that passes leaves a row and no
folder; a run that Triton crashes on its own is counted, kept with its log and the crashing thread's backtrace,
and named as the known crash it is. And the matrix's own policy on such a crash: one rerun, or none with
--no-rerun.

The crash is a real one, known and reproduced (docs/upstream/pt2-output-dtype-crash.md): the stock PT2 build
(r26.05) dies of SIGSEGV answering a request for an output declared FP16 of an FP32 package, which the validator
refuses (A011), so the matrix runs with --skip-validation.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from tritonclient.grpc.model_config_pb2 import DataType

from tritonpt.backend import BuiltBackend
from tritonpt.repository import read_config, render_config

from ..helpers import ROOT, matrix_command
from . import preloaded

pytestmark = pytest.mark.slow

MODEL = "multi_io_pt2"


def _hunt(tmp_path: Path, repository: Path, *extra: str) -> tuple[int, dict, str]:
    reports = tmp_path / "hunt"
    command = [sys.executable, "-m", "tritonpt_ci.crash_hunt", "--runs", "1", "--reports", str(reports)]
    done = preloaded.run_command([*command, "--repository", str(repository), *extra], cwd=ROOT, timeout=900)
    said = done.stdout + done.stderr
    assert (reports / "crash-hunt.md").is_file(), said
    return done.returncode, json.loads((reports / "crash-hunt.json").read_text(encoding="utf-8")), said


def _repository(exported_pt2: Path, tmp_path: Path, *, fp16: bool) -> Path:
    repository = tmp_path / "repository"
    shutil.copytree(exported_pt2 / MODEL, repository / MODEL)
    if fp16:
        config_path = repository / MODEL / "config.pbtxt"
        config = read_config(config_path)
        config.ClearField("model_warmup")  # a failing warmup may kill the server at load instead
        config.output[0].data_type = DataType.TYPE_FP16  # the package returns FP32
        config_path.write_text(render_config(config), encoding="utf-8")
    return repository


def test_a_run_that_passes_leaves_its_row_and_no_folder(
    exported_pt2: Path, tmp_path: Path, pytorch_backend: BuiltBackend, pt2_backend: BuiltBackend
) -> None:
    code, report, said = _hunt(tmp_path, _repository(exported_pt2, tmp_path, fp16=False))
    assert code == 0, said
    assert report["crashed"] == 0
    assert report["crashes_per_100"] == 0.0
    assert [run["outcome"] for run in report["runs"]] == ["passed"], said
    assert not (tmp_path / "hunt" / "run-001").exists()


def test_a_run_triton_crashes_is_counted_kept_and_named(
    exported_pt2: Path, tmp_path: Path, pytorch_backend: BuiltBackend, pt2_backend: BuiltBackend
) -> None:
    code, report, said = _hunt(tmp_path, _repository(exported_pt2, tmp_path, fp16=True), "--skip-validation")
    assert code == 1, said
    assert report["crashed"] == 1, said
    assert report["crashes_per_100"] == 100.0
    (run,) = report["runs"]
    assert run["outcome"] == "crashed"
    assert run["crash"] == "pt2-output-dtype-crash"
    assert run["reproduction"] == "docs/upstream/pt2-output-dtype-crash.md"
    kept = Path(run["kept"])
    assert (kept / "tritonserver.log").is_file()
    backtrace = (kept / "backtrace.txt").read_text(encoding="utf-8")
    assert "Signal (11) received." in backtrace
    assert "libtriton_pt2.so" in backtrace
    assert "pt2-output-dtype-crash" in (tmp_path / "hunt" / "crash-hunt.md").read_text(encoding="utf-8")


def _matrix(repository: Path, reports: Path, *extra: str) -> tuple[int, str]:
    command = [*matrix_command(repository, reports), "--skip-validation", *extra]
    done = preloaded.run_command(command, cwd=ROOT, timeout=900)
    return done.returncode, done.stdout + done.stderr


def test_the_matrix_runs_a_known_crash_once_more_and_a_second_crash_fails_it(
    exported_pt2: Path, tmp_path: Path, pytorch_backend: BuiltBackend, pt2_backend: BuiltBackend
) -> None:
    """The rerun policy is the matrix's own, so `tritonpt check`, `nox -s integration` and `nox -s gpu` all have
    it: the known crash (with its reproduction) runs the matrix once more; crashing again fails the run."""
    reports = tmp_path / "reports"
    code, said = _matrix(_repository(exported_pt2, tmp_path, fp16=True), reports)
    assert code == 1, said
    assert "Running the matrix once more (a known crash with an upstream reproduction)" in said, said[-3000:]
    assert "It crashed again on its second run: this fails the run." in said, said[-3000:]
    runs = json.loads((reports / "reliability" / "parts" / "matrix-runs.json").read_text(encoding="utf-8"))[
        "runs"
    ]
    assert [(r["crash"], r["reproduction"], r["rerun"]) for r in runs] == [
        ("pt2-output-dtype-crash", "docs/upstream/pt2-output-dtype-crash.md", "failed")
    ]
    assert (reports / "crashed-run" / "tritonserver.log").is_file()


def test_no_rerun_ends_the_matrix_at_the_first_crash(
    exported_pt2: Path, tmp_path: Path, pytorch_backend: BuiltBackend, pt2_backend: BuiltBackend
) -> None:
    reports = tmp_path / "reports"
    code, said = _matrix(_repository(exported_pt2, tmp_path, fp16=True), reports, "--no-rerun")
    assert code == 1, said
    assert "the known crash 'pt2-output-dtype-crash'" in said
    assert "once more" not in said
    runs = json.loads((reports / "reliability" / "parts" / "matrix-runs.json").read_text(encoding="utf-8"))[
        "runs"
    ]
    assert [r["rerun"] for r in runs] == [""]
