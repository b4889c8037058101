"""Helpers the test tiers share (fixtures stay in conftest.py; what tests import lives here)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tritonpt import client
from tritonpt.client import Endpoints
from tritonpt.server.local import TritonFlags
from tritonpt_ci import procs

SMALL_MODELS = ("multi_io", "token_encoder", "scripted_gate", "fixed_shape")
"""The small built-in models: together they cover several inputs/outputs, int64, variable length, scripting,
bool/int outputs and max_batch_size 0, and export in well under a second."""


def group_members(pgid: int) -> list[int]:
    """The processes of process group ``pgid``, zombies included: a server that exited but was never waited for
    is still there."""
    return procs.group(pgid, zombies=True)


USER_MODULE = textwrap.dedent(
    """
    import torch

    class Scale(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.randn(5))

        def forward(self, x):
            return x * self.weight

    def build():
        return Scale(), (torch.randn(2, 5),)
    """
)
"""A user's module (my_models.py): ``build`` returns a small model and its example inputs."""

ROOT = Path(__file__).resolve().parents[1]
"""The repository root: front doors in subprocesses run from here."""


def matrix_command(repository: Path, reports: Path, *args: str) -> list[str]:
    """The matrix as a person runs it (`python -m tritonpt.matrix`, what `tritonpt check` runs), on ``repository``,
    writing its reports to ``reports``."""
    return [
        sys.executable, "-m", "tritonpt.matrix", "-q",
        "--repository", str(repository), "--reports", str(reports), *args,
    ]  # fmt: skip


def outside_environment() -> dict[str, str]:
    """This environment as a user's shell has it outside this checkout: without the session's PYTHONPATH (which
    puts the checkout's src first, before any installed tritonpt) and without its VIRTUAL_ENV."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}


def installed_venv(work: Path, *requirements: str, deps: bool) -> Path:
    """A fresh venv in ``work``/venv holding a wheel built from this checkout, plus ``requirements``; with
    ``deps`` its dependencies too (from uv's cache, as nox's sessions get theirs). Needs uv (nox sessions have it)."""
    uv = shutil.which("uv")
    if uv is None:
        import pytest  # noqa: PLC0415 - helpers are imported by tests only

        pytest.skip("uv is not on PATH (nox sessions have it): it builds the wheel and the venv")
    subprocess.run(
        [uv, "build", "--wheel", "--out-dir", str(work / "dist"), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    [wheel] = sorted((work / "dist").glob("tritonpt-*.whl"))
    venv = work / "venv"
    subprocess.run([uv, "venv", "-q", "-p", sys.executable, str(venv)], check=True, timeout=120)
    install = [uv, "pip", "install", "-q", "-p", str(venv / "bin" / "python")]
    install += [] if deps else ["--no-deps"]
    subprocess.run([*install, str(wheel), *requirements], check=True, capture_output=True, timeout=600)
    return venv


def invoke_command(*args: str) -> list[str]:
    """`invoke TASK ...` with this checkout's tasks, from any folder."""
    return [sys.executable, "-m", "invoke", "--search-root", str(ROOT), *args]


def server_pids(marker: str) -> list[int]:
    """tritonserver processes whose command line names ``marker`` (a test's own repository)."""
    return [p.pid for p in procs.every() if p.argv and p.argv[0].endswith("tritonserver") and p.names(marker)]


def wait_for_text(path: Path, text: str, timeout: float) -> bool:
    """Wait until the file ``path`` holds ``text``; False when ``timeout`` seconds passed first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.is_file() and text in path.read_text(encoding="utf-8", errors="replace"):
            return True
        time.sleep(0.1)
    return False


def compiled_package(
    module: object,
    example: tuple[object, ...],
    into: Path,
    *,
    dynamic_shapes: object = None,
    strict: bool = True,
) -> None:
    """``torch.export`` and AOTInductor of ``module`` into the file ``into``, compiled once per machine and torch.

    Each compile costs tens of seconds on two cores, and these tests need the package, not the compile: it is kept
    in the cache (``test-packages/``) under a sha256 of what makes it (the module's source, the example's shapes and
    types, the dynamic shapes, ``strict``, torch, and the machine AOTInductor compiles for) and copied from there.
    """
    import hashlib  # noqa: PLC0415 - helpers import torch only where a test compiles
    import inspect  # noqa: PLC0415

    import torch  # noqa: PLC0415

    from tritonpt import caches  # noqa: PLC0415
    from tritonpt.export import cache as export_cache  # noqa: PLC0415

    shapes = [(tuple(t.shape), str(t.dtype)) for t in example if isinstance(t, torch.Tensor)]
    made_of = [inspect.getsource(type(module)), repr(shapes), repr(dynamic_shapes), repr(strict)]
    made_of += [torch.__version__, export_cache.machine()]
    key = hashlib.sha256("\0".join(made_of).encode()).hexdigest()[:24]
    kept = caches.root() / "test-packages" / f"{type(module).__name__}-{key}.pt2"
    if not kept.is_file():
        kept.parent.mkdir(parents=True, exist_ok=True)
        program = torch.export.export(module, example, dynamic_shapes=dynamic_shapes, strict=strict)  # type: ignore[arg-type]
        staged = kept.with_name(f".{os.getpid()}-{kept.name}")  # AOTInductor wants a name ending .pt2
        torch._inductor.aoti_compile_and_package(program, package_path=str(staged))
        staged.replace(kept)
    into.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(kept, into)


STAGING_KEY = "tritonpt-test-key-5f1c"
"""The admin key of the tests' staging servers (a test value: it guards a server on 127.0.0.1 for one module)."""


def staging_flags(folder: Path, backends: Path, **changes: Any) -> TritonFlags:
    """A staging server as a cluster runs one: its own repository (``folder``/repository, made empty), explicit
    model control, nothing loaded, its model-repository API restricted behind STAGING_KEY on HTTP and gRPC
    (``--http-restricted-api`` / ``--grpc-restricted-protocol``, server 2.51.0)."""
    empty = folder / "repository"
    empty.mkdir(parents=True, exist_ok=True)
    return TritonFlags(
        model_repository=empty,
        backend_directory=backends,
        load_model=(),
        extra=(
            f"--http-restricted-api=model-repository:admin-key={STAGING_KEY}",
            f"--grpc-restricted-protocol=model-repository:admin-key={STAGING_KEY}",
        ),
        **changes,
    )


def upload_command(endpoints: Endpoints, repository: Path, reports: Path, *args: str) -> list[str]:
    """`tritonpt check --url ... --upload` as the matrix runs it, against ``endpoints`` (a staging server)."""
    return [
        *matrix_command(repository, reports, "--target", "url", "--url", endpoints.http_url),
        *("--grpc-url", endpoints.grpc, "--metrics-url", endpoints.metrics_url, "--upload", *args),
    ]


def ready_models(endpoints: Endpoints, names: Sequence[str]) -> list[str]:
    """Which of ``names`` the server has ready, asked one by one (server 2.51.0 leaves uploaded models out of its
    repository index)."""
    return [name for name in names if client.is_model_ready(endpoints, name)]
