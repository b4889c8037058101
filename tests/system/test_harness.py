"""The integration harness's behaviour on bad input, seen from outside: pytest run as a user runs it.

A server that dies during the matrix is the fault tier's (tests/faults/test_matrix_faults.py,
``test_a_local_server_that_dies_ends_the_run``: SIGKILL and SIGTERM at the first check and mid-matrix, the exit
within 10 s, the paragraph, the aborted summary, no traceback and nothing left behind)."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from ..helpers import ROOT, matrix_command
from . import preloaded

pytestmark = pytest.mark.slow


def _matrix(repository: Path, reports: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = matrix_command(repository, reports, *args)
    return preloaded.run_command(command, cwd=ROOT, timeout=600)


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
