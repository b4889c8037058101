"""A Triton server someone else runs, given by its HTTP URL: start() checks that it answers, and with uploads
delivers a local repository's models through its load API (tritonpt.server.upload); while it is watched, a model
it delivered that is no longer ready (the server was restarted) ends the run; stop() takes back what start()
delivered, and nothing else."""

from __future__ import annotations

import urllib.parse
from collections.abc import Sequence
from typing import ClassVar

from tritonpt import client
from tritonpt.client import GRPC_PORT, HTTP_PORT, METRICS_PORT, Endpoints, ModelState, host_port
from tritonpt.errors import ServerStartError
from tritonpt.server import waiting
from tritonpt.server.base import Server, ServerKind, State
from tritonpt.server.upload import Upload, Uploaded, UploadError


def parse_endpoints(url: str, *, grpc: str | None = None, metrics_url: str | None = None) -> Endpoints:
    """Endpoints from an HTTP URL (``http://host[:8000]``); gRPC and metrics default to 8001 and 8002 there.
    ``metrics_url`` may name the port alone (``http://host:8002``) or the path (``http://host:8002/metrics``)."""
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
        metrics_url=client.metrics_url(metrics_url or host_port(host, METRICS_PORT)),
    )


class UrlServer(Server):
    """An already running server; this object neither starts nor stops it. With ``uploads``, it loads them
    there once the server answers (a name the server already serves only with ``replace``) and unloads them
    when stopped, also after a failed start or a stop signal."""

    kind: ClassVar[ServerKind] = "url"
    runs_server: ClassVar[bool] = False

    def __init__(
        self,
        url: str,
        *,
        grpc: str | None = None,
        metrics_url: str | None = None,
        start_timeout: float = 30.0,
        uploads: Sequence[Upload] = (),
        replace: bool = False,
    ) -> None:
        super().__init__(start_timeout=start_timeout)
        self.url = url
        self._given = parse_endpoints(url, grpc=grpc, metrics_url=metrics_url)
        self._endpoints = self._given
        self.uploaded = Uploaded(self._given, uploads, replace=replace) if uploads else None
        self.left: list[str] = []  # uploads that stop() could not unload, with why
        self.lost: str | None = None  # an upload the server no longer had ready while it was watched

    def _default_hint(self) -> str:
        return (
            "start the server first, or check the address: a server in a container must publish port 8000 "
            "(docker run -p 8000:8000 ...)."
        )

    def _launch(self) -> None:
        self._endpoints = self._given

    def _await_ready(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for ``/v2/health/live`` to answer 200 (readiness is the checks' job)."""
        live = waiting.Live(self.is_live)
        try:
            waiting.until(live, timeout)
        except waiting.WaitTimeoutError:
            msg = self.failure(f"Cannot reach {self.describe()} within {timeout:.0f} s, as {live.last}")
            raise ServerStartError(msg) from None
        if self.uploaded is not None:
            try:
                self.uploaded.load_all()
            except OSError as exc:  # the connection dropped, or the server went away, during an upload
                msg = f"Cannot upload to {self.describe()}: {exc}"
                raise UploadError(msg) from exc

    def repository_index(self) -> list[ModelState]:
        """The server's index, and this run's uploads, which server 2.51.0 leaves out of it (seen: an empty index
        with the uploaded model ready): each READY when it is ready, else UNAVAILABLE."""
        index = super().repository_index()
        if self.uploaded is None:
            return index
        listed = {state.name for state in index}
        for name in (u.name for u in self.uploaded.uploads if u.name not in listed):
            ready = client.is_model_ready(self.endpoints, name)
            said = "" if ready else "uploaded by this run, and not ready"
            index.append(
                ModelState(name=name, version="1", state="READY" if ready else "UNAVAILABLE", reason=said)
            )
        return index

    def _uploaded(self, name: str) -> bool:
        return self.uploaded is not None and any(u.name == name for u in self.uploaded.uploads)

    def load_model(self, name: str) -> None:
        """An uploaded model is loaded from its upload again (the server's own repository does not have it)."""
        if self.uploaded is not None and self._uploaded(name):
            self.uploaded.load(name)
        else:
            super().load_model(name)

    def unload_model(self, name: str) -> None:
        """An uploaded model is unloaded as one this run means to load again (it is not lost meanwhile)."""
        if self.uploaded is not None and self._uploaded(name):
            self.uploaded.unload(name)
        else:
            super().unload_model(name)

    def _terminate(self) -> None:
        """Unload what this run uploaded; the server itself is whoever started it's to stop."""
        if self.uploaded is not None:
            self.left = self.uploaded.unload_all()

    @property
    def left_behind(self) -> list[str]:
        return self.left

    def _exit_state(self) -> str | None:
        """Nothing here runs the server, so nothing can say it ended (the watchdog's probes can); but once it
        serves this run's uploads, one that it no longer has ready says it was restarted (or someone unloaded
        it), and the run cannot go on."""
        if self.uploaded is None or self.state is not State.READY:
            return None
        try:
            self.lost = self.lost or self.uploaded.lost()
        except OSError:  # no answer: the watchdog's live probes judge that
            return None
        if self.lost is None:
            return None
        return f"no longer serves {self.lost}, which this run uploaded"

    def ended_as(self, ended: str) -> str:
        return "lost a model this run uploaded" if self.lost is not None else "stopped answering"

    def _verdict_hint(self) -> str | None:
        if self.lost is not None:
            return (
                "the server was restarted after the upload (a restart loses every model loaded through the load "
                "API), or someone unloaded the model. Run the check again once the server is steady; what this "
                "run had uploaded and the server still holds is unloaded."
            )
        if self.state is State.READY:  # it answered once: it stopped answering since
            return (
                "it was stopped or restarted, or the network to it went down; nothing here runs it, so nothing "
                "here stops it. What this run uploaded is unloaded where the server answers again."
            )
        return None

    def is_alive(self) -> bool:
        """Whether it answers ``/v2/health/live`` now."""
        try:
            return super().is_alive() and client.is_live(self.endpoints)
        except OSError:
            return False
