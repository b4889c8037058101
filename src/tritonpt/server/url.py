"""A Triton server someone else runs, given by its HTTP URL: start() only checks that it answers."""

from __future__ import annotations

import time
import urllib.parse
from typing import ClassVar

from tritonpt.errors import ServerError, ServerStartError
from tritonpt.server.base import POLL_INTERVAL_S, Endpoints, Server, ServerKind, host_port

HTTP_PORT = 8000
GRPC_PORT = 8001
METRICS_PORT = 8002


def parse_endpoints(url: str, *, grpc: str | None = None, metrics_url: str | None = None) -> Endpoints:
    """Endpoints from an HTTP URL (``http://host[:8000]``); gRPC and metrics default to 8001 and 8002 there."""
    parsed = urllib.parse.urlsplit(url if "://" in url else f"http://{url}")
    if parsed.scheme != "http" or not parsed.hostname:
        msg = (
            f"Cannot use {url!r} as a Triton server URL, as it is not http://HOST[:PORT] "
            "(tritonpt talks plain HTTP to Triton's port 8000, e.g. http://127.0.0.1:8000)."
        )
        raise ValueError(msg)
    host = parsed.hostname
    if grpc is not None and "://" in grpc:
        grpc = urllib.parse.urlsplit(grpc).netloc
    return Endpoints(
        http=host_port(host, parsed.port or HTTP_PORT),
        grpc=grpc or host_port(host, GRPC_PORT),
        metrics_url=metrics_url or f"http://{host_port(host, METRICS_PORT)}/metrics",
    )


class UrlServer(Server):
    """An already running server; this object neither starts nor stops it."""

    kind: ClassVar[ServerKind] = "url"

    def __init__(
        self,
        url: str,
        *,
        grpc: str | None = None,
        metrics_url: str | None = None,
        start_timeout: float = 30.0,
    ) -> None:
        super().__init__()
        self.url = url
        self.start_timeout = start_timeout
        self._endpoints = parse_endpoints(url, grpc=grpc, metrics_url=metrics_url)

    def _default_hint(self) -> str:
        return (
            "start the server first, or check the address: a server in a container must publish port 8000 "
            "(docker run -p 8000:8000 ...)."
        )

    def start(self) -> None:
        """Wait up to ``start_timeout`` seconds for ``/v2/health/live`` to answer 200."""
        began = time.monotonic()
        last = "nothing answered"
        while True:
            try:
                if self.is_live():
                    return
                last = "it answers, but /v2/health/live is not 200"
            except (OSError, ServerError) as exc:
                last = str(getattr(exc, "reason", exc)) or type(exc).__name__
            if time.monotonic() - began >= self.start_timeout:
                msg = self.failure(
                    f"Cannot reach {self.describe()} within {self.start_timeout:.0f} s, as {last}"
                )
                raise ServerStartError(msg)
            time.sleep(POLL_INTERVAL_S)

    def stop(self) -> None:
        """Nothing to do: whoever started the server stops it."""

    def is_alive(self) -> bool:
        try:
            return self.is_live()
        except OSError:
            return False
