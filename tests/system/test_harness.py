"""The integration harness's behaviour on bad input and faults, seen from outside: pytest run as a user runs it."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from ..helpers import ROOT, matrix_command, server_pids, wait_for_text

pytestmark = pytest.mark.slow


def _matrix(repository: Path, reports: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = matrix_command(repository, reports, *args)
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False, timeout=600)


def test_invalid_repository_stops_before_any_server_starts(
    repository_copy: Callable[..., Path], tmp_path: Path
) -> None:
    repository = repository_copy("multi_io")
    config = repository / "multi_io" / "config.pbtxt"
    config.write_text(config.read_text().replace('platform: "pytorch_libtorch"', 'platform: "pytorch"'))
    done = _matrix(repository, tmp_path / "reports")
    assert done.returncode == 1
    assert "fails validation; no server was started" in done.stdout + done.stderr
    assert '"pytorch" is not a platform Triton knows' in done.stdout + done.stderr
    assert not (tmp_path / "reports" / "tritonserver.log").exists()


@pytest.mark.skipif(
    torch.cuda.is_available(),
    reason="needs a host without a GPU, where Triton refuses a KIND_GPU instance group",
)
def test_model_that_fails_to_load_shows_tritons_own_error(
    repository_copy: Callable[..., Path], tmp_path: Path
) -> None:
    # Triton refuses KIND_GPU on a GPU-less host. The validator predicts it, so --skip-validation lets the
    # server have its say: the harness must then report Triton's own reason, once.
    repository = repository_copy("multi_io", "fixed_shape")
    config = repository / "multi_io" / "config.pbtxt"
    config.write_text(re.sub(r"instance_group \{", "instance_group {\n  kind: KIND_GPU", config.read_text()))
    done = _matrix(repository, tmp_path / "reports", "--target", "local", "--skip-validation")
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    assert "no check ran" in output
    assert "multi_io" in output
    assert "KIND_GPU but no GPUs are available" in output
    assert " passed" not in output
    assert (tmp_path / "reports" / "tritonserver.log").is_file()


# The small models' matrix takes about 1 s once the server listens: 0 s kills it before the first check,
# 0.4 s while checks (and their requests) run.
@pytest.mark.parametrize("delay", [0.0, 0.4], ids=["at-start", "mid-matrix"])
def test_a_server_killed_during_the_matrix_ends_the_run_within_10_s(
    repository_copy: Callable[..., Path], tmp_path: Path, delay: float
) -> None:
    repository = repository_copy("multi_io", "token_encoder", "scripted_gate", "fixed_shape")
    reports = tmp_path / "reports"
    command = matrix_command(repository, reports, "--target", "local")
    run = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_for_text(reports / "tritonserver.log", "Started HTTPService", 240)
        time.sleep(delay)
        pids = server_pids(str(repository))
        assert pids, "the matrix's tritonserver was not found"
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        killed = time.monotonic()
        output, _ = run.communicate(timeout=60)
        took = time.monotonic() - killed
    finally:
        run.kill()
        run.wait()
    assert run.returncode != 0, output
    assert took <= 10, f"the run went on for {took:.1f} s after the server died:\n{output[-3000:]}"
    assert "was killed by signal SIGKILL" in output, output[-3000:]
    assert "Hint:" in output
    assert "Traceback" not in output, output[-3000:]
    summary = (reports / "summary.md").read_text(encoding="utf-8")
    assert "The run was aborted" in summary
    assert "was killed by signal SIGKILL" in summary
    assert server_pids(str(repository)) == []
    if delay:
        assert "passed" not in output, "the matrix had finished before the server was killed"
