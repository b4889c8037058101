"""The clients' own behaviour, without a server: what a Ctrl-C inside a client's construction leaves behind.

The fault tier interrupts runs at random moments; one landed inside tritonclient's gRPC client ``__init__``
and its collection printed an "Exception ignored" traceback over the run's exit. Each case first shows that
tritonclient's own class does print it, so that the check of ours is one that can fail.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Callable
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
