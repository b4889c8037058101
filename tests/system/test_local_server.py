"""A real tritonserver on this machine: it comes up, answers, fails fast with its log, and leaves no process behind."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from tritonclient.grpc import model_config_pb2 as mc

from tritonpt import client
from tritonpt.backend import BuiltBackend
from tritonpt.errors import ServerError, ServerStartError
from tritonpt.repository import render_config
from tritonpt.server import LocalServer, TritonFlags, UrlServer
from tritonpt.server.url import parse_endpoints

from ..helpers import group_members

pytestmark = pytest.mark.slow


def trace(module: torch.nn.Module, *example: torch.Tensor) -> torch.jit.ScriptModule:
    traced: torch.jit.ScriptModule = torch.jit.trace(module, example)  # type: ignore[no-untyped-call]  # torch leaves trace unannotated
    return traced


class Double(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("server") / "repository"
    (root / "double" / "1").mkdir(parents=True)
    trace(Double(), torch.randn(1, 2)).save(str(root / "double" / "1" / "model.pt"))
    config = mc.ModelConfig(name="double", platform="pytorch_libtorch", max_batch_size=4)
    config.input.add(name="INPUT__0", data_type=mc.TYPE_FP32, dims=[2])
    config.output.add(name="OUTPUT__0", data_type=mc.TYPE_FP32, dims=[2])
    (root / "double" / "config.pbtxt").write_text(render_config(config), encoding="utf-8")
    return root


@pytest.fixture
def local(repository: Path, tmp_path: Path, pytorch_backend: BuiltBackend) -> Iterator[LocalServer]:
    instance = LocalServer(
        TritonFlags(model_repository=repository),
        log_path=tmp_path / "reports" / "tritonserver.log",
        pytorch_backend=pytorch_backend,
    )
    yield instance
    instance.stop()


def test_local_server_lifecycle_and_a_url_view_of_it(
    local: LocalServer, pytorch_backend: BuiltBackend
) -> None:
    with local:
        assert local.is_alive()
        assert local.is_live()
        assert local.is_ready()
        assert local.startup_seconds is not None
        assert local.startup_seconds > 0
        assert local.wait_models_ready(["double"])["double"].ready
        local.wait_ready(5)  # already ready: returns at once
        assert local.log_path is not None
        assert f'Started HTTPService at {local.endpoints.http}"' in local.log_tail(200)
        same = UrlServer(
            local.endpoints.http_url, grpc=local.endpoints.grpc, metrics_url=local.endpoints.metrics_url
        )
        with same:
            assert same.endpoints == local.endpoints
            runtime = same.model_runtime("double")
            assert runtime.official
            assert runtime.library == "libtriton_pytorch.so"
            assert same.model_config("double").max_batch_size == 4
        assert local.is_alive()  # leaving the UrlServer's block does not stop the server
        pid = local.pid
        assert pid is not None
        assert group_members(pid)
        assert local.backend_origin() == pytorch_backend.origin
    assert not local.is_alive()
    assert group_members(pid) == []
    local.stop()  # a second stop does nothing


def test_ctrl_c_in_the_owning_process_stops_the_server(
    repository: Path, tmp_path: Path, pytorch_backend: BuiltBackend
) -> None:
    # The child restores Python's own SIGINT handler: a suite run as a background job (`nox -s system &`)
    # starts its children with SIGINT ignored, and this test must not depend on what it inherits.
    script = (
        "import signal, time\n"
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "from pathlib import Path\n"
        "from tritonpt.server import LocalServer, TritonFlags\n"
        f"flags = TritonFlags(model_repository=Path({str(repository)!r}))\n"
        f"with LocalServer(flags, log_path=Path({str(tmp_path / 'ctrl-c.log')!r})) as server:\n"
        "    print(server.pid, flush=True)\n"
        "    time.sleep(600)\n"
    )
    owner = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert owner.stdout is not None
        pid = int(owner.stdout.readline())
        assert group_members(pid)
        owner.send_signal(signal.SIGINT)
        assert owner.wait(60) != 0  # KeyboardInterrupt ended it, after the with block stopped the server
    finally:
        owner.kill()
        owner.wait()
        if owner.stdout is not None:
            owner.stdout.close()
    assert group_members(pid) == []


def test_a_crashed_server_fails_fast_and_leaves_nothing_behind(local: LocalServer) -> None:
    local.start()
    pid = local.pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    with pytest.raises(ServerStartError, match="was killed by signal SIGKILL"):
        local.wait_ready(30)
    assert not local.is_alive()
    local.stop()
    assert group_members(pid) == []


def test_an_exception_inside_the_block_still_stops_the_server(local: LocalServer) -> None:
    pids: list[int] = []

    def fail_while_serving() -> None:
        with local:
            assert local.pid is not None
            pids.append(local.pid)
            msg = "boom"
            raise RuntimeError(msg)

    with pytest.raises(RuntimeError, match="boom"):
        fail_while_serving()
    assert group_members(pids[0]) == []


def test_a_broken_repository_fails_fast_with_the_log_tail(tmp_path: Path) -> None:
    broken = tmp_path / "repository"
    (broken / "bad" / "1").mkdir(parents=True)
    (broken / "bad" / "config.pbtxt").write_text("this is { not valid", encoding="utf-8")
    instance = LocalServer(
        TritonFlags(model_repository=broken, exit_on_error=True), log_path=tmp_path / "t.log"
    )
    with pytest.raises(ServerStartError) as failure:
        instance.start()
    message = str(failure.value)
    assert "exited with code 1 before it was ready" in message
    assert "failed to read text proto" in message
    assert "Hint: a config.pbtxt does not parse" in message
    assert instance.pid is not None
    assert group_members(instance.pid) == []


def test_an_answer_without_metrics_is_an_error_that_names_the_url(local: LocalServer) -> None:
    """The metrics port's root answers 200 with nothing in it: that is a wrong URL, not a missing counter."""
    local.start()
    root = local.endpoints.metrics_url.removesuffix("/metrics") + "/"
    wrong = replace(local.endpoints, metrics_url=root)
    with pytest.raises(ServerError, match=rf"GET {re.escape(root)} answered 0 bytes without a single metric"):
        client.metrics(wrong)
    right = parse_endpoints(local.endpoints.http_url, metrics_url=root.rstrip("/")).metrics_url
    assert right == local.endpoints.metrics_url
    assert "nv_inference_count" in client.metrics(replace(local.endpoints, metrics_url=right))


def test_a_picked_port_taken_before_the_server_binds_it_is_picked_anew(
    local: LocalServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two servers (or a server and a client) starting at once can be handed the same free port: the one that binds
    second fails with "already in use", and starts again on ports picked anew."""
    from tritonpt.server import local as local_module  # noqa: PLC0415

    taken = socket.create_server(("127.0.0.1", 0))  # listening: tritonserver cannot bind it
    real = local_module.free_ports
    calls: list[list[int]] = []

    def first_one_taken(count: int, host: str = "127.0.0.1") -> list[int]:
        ports = real(count, host)
        if not calls:
            ports[0] = taken.getsockname()[1]
        calls.append(ports)
        return ports

    monkeypatch.setattr(local_module, "free_ports", first_one_taken)
    with taken, local:
        assert len(calls) == 2, calls
        assert local.flags.http_port == calls[1][0] != calls[0][0]
        assert client.is_ready(local.endpoints)
