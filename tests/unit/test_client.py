"""The clients' own behaviour, without a server: what a Ctrl-C inside a client's construction leaves behind, and
what a stop that lands while the HTTP client waits prints.

The fault tier interrupts runs at random moments; one landed inside tritonclient's gRPC client ``__init__``
and its collection printed an "Exception ignored" traceback over the run's exit. Each case first shows that
tritonclient's own class does print it, so that the check of ours is one that can fail.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import geventhttpclient
import grpc
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from tritonpt import client
from tritonpt.client import Endpoints

ENDPOINTS = Endpoints.on_host("127.0.0.1", http_port=1, grpc_port=2, metrics_port=3)


def _interrupt(*_args: Any, **_kwargs: Any) -> NoReturn:
    raise KeyboardInterrupt


@pytest.fixture
def unraisable(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What ``__del__`` methods raised while collected (Python prints these as "Exception ignored in")."""
    seen: list[str] = []
    monkeypatch.setattr(
        sys, "unraisablehook", lambda hook: seen.append(f"{hook.exc_type.__name__}: {hook.exc_value}")
    )
    return seen


def _built_then_collected(make: Callable[[], object]) -> None:
    with pytest.raises(KeyboardInterrupt):
        make()
    gc.collect()


CASES = {
    "grpc": (grpc, "insecure_channel", lambda: grpcclient.InferenceServerClient(ENDPOINTS.grpc), client.grpc),
    "http": (
        geventhttpclient.HTTPClient,
        "from_url",
        lambda: httpclient.InferenceServerClient(ENDPOINTS.http),
        client.http,
    ),
}


@pytest.mark.parametrize("protocol", CASES)
def test_a_client_interrupted_while_it_is_built_is_collected_quietly(
    protocol: str, monkeypatch: pytest.MonkeyPatch, unraisable: list[str]
) -> None:
    owner, step, upstream, ours = CASES[protocol]
    monkeypatch.setattr(owner, step, _interrupt)

    _built_then_collected(upstream)
    assert unraisable, f"tritonclient's {protocol} client no longer fails when collected half-built"
    unraisable.clear()

    def enter_ours() -> None:
        with ours(ENDPOINTS):
            pytest.fail("the client was built although its construction was interrupted")

    _built_then_collected(enter_ours)
    assert unraisable == []


def test_a_whole_client_is_still_closed_when_collected(monkeypatch: pytest.MonkeyPatch) -> None:
    closed: list[str] = []
    monkeypatch.setattr(grpcclient.InferenceServerClient, "close", lambda self: closed.append("grpc"))
    made = client._Grpc(url=ENDPOINTS.grpc)
    del made
    gc.collect()
    assert closed == ["grpc"]


WAIT_THEN_STOP = """
import os, signal, socket, sys, threading, time
import gevent.hub
from tritonpt import client, stopping
if sys.argv[1] == "gevent's own":
    gevent.hub.Hub.NOT_ERROR = (gevent.hub.GreenletExit, SystemExit)
silent = socket.create_server(("127.0.0.1", 0))  # takes the connection, never answers
port = silent.getsockname()[1]
endpoints = client.Endpoints.on_host("127.0.0.1", http_port=port, grpc_port=port, metrics_port=port)
main = threading.get_native_id()
def stop_once_waiting():  # the request came, and the main thread waits in gevent's loop (epoll) for the answer
    connection, _ = silent.accept()
    connection.recv(1)
    wchan = f"/proc/self/task/{main}/wchan"
    deadline = time.monotonic() + 30
    while "epoll" not in open(wchan).read() and time.monotonic() < deadline:
        time.sleep(0.001)
    os.kill(os.getpid(), signal.SIGTERM)
threading.Thread(target=stop_once_waiting, daemon=True).start()
with stopping.stop_signals_interrupt():
    try:
        client.statistics(endpoints, "m")
    except stopping.Interrupted as stop:
        print("interrupted by", stop)
"""


@pytest.mark.timeout(60)
@pytest.mark.parametrize("handling", ["gevent's own", "ours"])
def test_a_stop_that_lands_while_the_http_client_waits_interrupts_it_without_a_traceback(
    handling: str,
) -> None:
    """SIGTERM while a statistics request waits in gevent's loop (the fault tier sent one to the bench so): the
    request is interrupted either way; gevent's own handling also prints the stop as an error, ours does not."""
    done = subprocess.run(
        [sys.executable, "-c", WAIT_THEN_STOP, handling],
        capture_output=True,
        text=True,
        timeout=50,
        check=False,
        env={**os.environ, "PYTHONPATH": str(Path(client.__file__).parents[1])},
    )
    assert (done.returncode, done.stdout) == (0, "interrupted by SIGTERM\n"), done.stderr
    printed = "Traceback" in done.stderr
    assert printed == (handling == "gevent's own"), done.stderr
