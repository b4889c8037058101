"""The front doors as a person runs them: `invoke export` and `invoke validate` in a subprocess, exit codes and
one-paragraph errors included."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from tritonpt import reference
from tritonpt.repository import ModelDir, read_config
from tritonpt_ci import procs

from ..helpers import USER_MODULE, invoke_command
from . import preloaded

pytestmark = pytest.mark.slow


def _invoke(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return preloaded.run_command(invoke_command(*args), cwd=cwd, timeout=300)


def test_invoke_export_of_a_users_model(tmp_path: Path) -> None:
    (tmp_path / "my_models.py").write_text(USER_MODULE, encoding="utf-8")
    done = _invoke(
        "export", "--model", "my_models:build", "--name", "scale", "--repository", "repo",
        "--max-batch-size", "4", "--parameter", "INTRA_OP_THREAD_COUNT=1", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "valid (1 model(s))" in done.stderr
    config = read_config(tmp_path / "repo" / "scale" / "config.pbtxt")
    assert config.max_batch_size == 4
    assert config.parameters["INTRA_OP_THREAD_COUNT"].string_value == "1"
    assert [c.id for c in reference.load(ModelDir(root=tmp_path / "repo" / "scale")).cases] == ["b1", "b4"]


@pytest.mark.parametrize(
    ("args", "words"),
    [
        pytest.param(
            ["--model", "my_models:nope", "--name", "x"], "has no callable 'nope'", id="missing-attr"
        ),
        pytest.param(
            ["--model", "missing_module:build", "--name", "x"],
            "cannot import 'missing_module'",
            id="no-module",
        ),
        pytest.param(["--model", "my_models:build"], "--model needs --name", id="no-name"),
        pytest.param(["--only", "resnet50"], "Unknown built-in model", id="unknown-builtin"),
        pytest.param(
            ["--model", "my_models:build", "--name", "x", "--parameter", "INTRA_OP_THREAD_COUNT"],
            "write it as NAME=VALUE",
            id="parameter-syntax",
        ),
        pytest.param(
            ["--model", "my_models:build", "--name", "x", "--dynamic-axis", "0"],
            "INPUT:AXIS",
            id="axis-syntax",
        ),
    ],
)
def test_invoke_export_errors_are_one_paragraph_and_exit_1(
    tmp_path: Path, args: list[str], words: str
) -> None:
    (tmp_path / "my_models.py").write_text(USER_MODULE, encoding="utf-8")
    done = _invoke("export", "--repository", "repo", *args, cwd=tmp_path)
    assert done.returncode == 1
    assert words in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "repo").exists() or not any((tmp_path / "repo").iterdir())


def test_invoke_validate_reports_and_exits_1(repository_copy: Callable[..., Path]) -> None:
    repository = repository_copy("multi_io", "fixed_shape")
    config = repository / "multi_io" / "config.pbtxt"
    config.write_text(config.read_text().replace('platform: "pytorch_libtorch"', 'platform: "pytorch"'))
    done = _invoke("validate", "--repository", str(repository), cwd=repository.parent)
    assert done.returncode == 1
    assert f"error: {repository / 'multi_io' / 'config.pbtxt'}: platform:" in done.stderr
    assert 'fix: write `platform: "pytorch_libtorch"`' in done.stderr
    assert "1 error(s), 0 warning(s)." in done.stderr
    assert "Traceback" not in done.stderr


def _builds_beside(tmp_path: Path, sources: Path, *only: str) -> subprocess.Popen[str]:
    """`invoke export --build-backend` into tmp_path/repo, its backend builds in an empty cache of its own."""
    env = {**os.environ, "TRITONPT_CACHE": str(tmp_path / "cache"), "TRITONPT_SOURCES": str(sources)}
    selected = only or ("--only", "multi_io")
    return subprocess.Popen(
        invoke_command("export", *selected, "--repository", "repo", "--build-backend"),
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip


def test_a_build_that_fails_beside_the_export_stops_it_at_once(tmp_path: Path) -> None:
    """The build fails in seconds (no sources); the export beside it (resnet18 and its PT2 copy, compiled cold:
    most of a minute) is stopped where it is, not finished first, and leaves nothing half-written."""
    (tmp_path / "no-sources").mkdir()
    only = ("--only", "resnet18", "--format", "both")
    with _builds_beside(tmp_path, tmp_path / "no-sources", *only) as done:
        said, _ = done.communicate(timeout=600)
    assert done.returncode == 1, said
    assert "building the backends beside the export failed (exit 1); its last lines:" in said
    assert "Cannot find the pytorch_backend source" in said
    assert "export done in" not in said, (
        f"the export ran to its end before the build's failure was said:\n{said}"
    )
    assert "Traceback" not in said
    assert not list((tmp_path / "cache" / "backends").glob("r*")), "a failed build left a cache entry"
    repository = tmp_path / "repo"
    left = [p.name for p in repository.iterdir() if p.name.startswith(".")] if repository.exists() else []
    assert left == [], f"the stopped export left {left} half-written"


def test_ctrl_c_of_export_stops_the_build_beside_it(tmp_path: Path) -> None:
    sources = os.environ.get("TRITONPT_SOURCES")
    if not sources:
        pytest.skip(
            "$TRITONPT_SOURCES is unset: a cold build beside the export needs the pinned tarballs there"
        )
    with _builds_beside(tmp_path, Path(sources)) as running:
        assert running.stdout is not None
        for line in running.stdout:  # stopped once the build compiles: its compilers are running
            if "[backend]" in line and "building " in line:
                break
        running.send_signal(signal.SIGINT)
        said, _ = running.communicate(timeout=120)
    assert running.returncode == 130, said
    assert "Traceback" not in said
    cache = tmp_path / "cache" / "backends"
    left = [p.name for p in cache.iterdir()] if cache.exists() else []
    assert left == [], f"the stopped build left {left} in its cache"
    compilers = [p.command for p in procs.every() if p.names(str(tmp_path / "cache"))]
    assert compilers == [], f"the build's processes outlived the export: {compilers}"


TASKS = (
    "export",
    "validate",
    "build-backend",
    "build-image",
    "doctor",
    "serve",
    "check",
    "tune",
    "merge-reports",
)


def test_dash_h_is_help_in_every_task_and_no_task_makes_up_short_flags(tmp_path: Path) -> None:
    """`tritonpt export -h` once failed ("Flag <Argument: shard (h)> needed value"): invoke made up a short flag per
    option and task, `-h` among them. Every task now answers `-h` with its help, and lists only long options."""
    for name, asked in ((name, asked) for name in TASKS for asked in ("-h", "--help")):
        done = subprocess.run(
            [sys.executable, "-m", "tritonpt", name, asked],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        assert done.returncode == 0, f"{name} {asked}: {done.stdout}{done.stderr}"
        assert f"Usage: tritonpt [--core-opts] {name} [--options]" in done.stdout
        lines = done.stdout.splitlines()
        options = [line.strip() for line in lines if line.startswith("  -")]  # the options' own column
        assert options, done.stdout
        made_up = [line for line in options if not line.startswith("--") or line.startswith("--=")]
        assert not made_up, f"{name}: {made_up}"


def _taken(port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def test_serve_listens_where_tritons_clients_look(exported_small: Path, tmp_path: Path) -> None:
    """`tritonpt serve` takes Triton's own ports, 8000, 8001 and 8002 (a client copied from Triton's quick start
    finds it), and says the three endpoints."""
    busy = [port for port in (8000, 8001, 8002) if _taken(port)]
    if busy:
        pytest.skip(f"port(s) {busy} on 127.0.0.1 are in use on this machine; free them to run this check")
    serving = subprocess.Popen(
        invoke_command("serve", "--repository", str(exported_small)),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        assert serving.stdout is not None
        said = []
        for (
            line
        ) in serving.stdout:  # the endpoints, then "serving ...; Ctrl-C stops" once every model is ready
            said.append(line)
            if "Ctrl-C stops" in line:
                break
        text = "".join(said)
        assert "HTTP    http://127.0.0.1:8000" in text, text
        assert "gRPC    127.0.0.1:8001" in text, text
        assert "metrics http://127.0.0.1:8002/metrics" in text, text
        with urllib.request.urlopen("http://localhost:8000/v2/health/ready", timeout=10) as ready:
            assert ready.status == 200
    finally:
        os.killpg(serving.pid, signal.SIGINT)
        serving.communicate(timeout=60)


def test_serve_names_a_port_another_process_holds(exported_small: Path, tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        done = _invoke(
            "serve", "--repository", str(exported_small), "--http-port", "0", "--grpc-port", str(port),
            "--metrics-port", "0", cwd=tmp_path,
        )  # fmt: skip
    said = done.stdout + done.stderr
    assert done.returncode == 1, said
    assert f"Cannot serve on 127.0.0.1 port {port} (gRPC), as another process listens there" in said
    assert "--grpc-port PORT (0 picks a free port)" in said
    assert "Traceback" not in said
