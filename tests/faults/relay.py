"""A TCP relay that drops one connection: the fault "the connection dropped during an upload".

    with Relay(("127.0.0.1", grpc_port), cut_at=b"multi_io") as relay:   # clients talk to 127.0.0.1:relay.port
        ...                                                               # the first connection whose client
        relay.cut.wait(timeout)                                           # sends the marker is closed there

Bytes pass through unchanged both ways until a client's stream holds the marker (a model's name in a gRPC load
request); that connection is then closed on both sides with a reset, before the chunk that held it is passed
on, as a proxy or a load balancer that gives up mid-request does. Later connections pass again, so what the
client does after the drop (unload what it loaded) reaches the server.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from types import TracebackType

CHUNK = 64 * 1024


class Relay:
    def __init__(self, target: tuple[str, int], *, cut_at: bytes) -> None:
        self.target = target
        self.marker = cut_at
        self.cut = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._closed = threading.Event()
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()

    def __enter__(self) -> Relay:
        threading.Thread(target=self._accept, name="relay-accept", daemon=True).start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._closed.set()
        self._listener.close()
        with self._lock:
            for sock in self._sockets:
                _reset(sock)

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                near, _ = self._listener.accept()
            except OSError:
                return
            try:
                far = socket.create_connection(self.target)
            except OSError:
                _reset(near)
                continue
            with self._lock:
                self._sockets += [near, far]
            threading.Thread(target=self._pump, args=(near, far, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(far, near, False), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, from_client: bool) -> None:
        """Pass ``source``'s bytes to ``sink``; from a client, look for the marker first (also across chunks)."""
        seen = b""
        try:
            while data := source.recv(CHUNK):
                if from_client and not self.cut.is_set():
                    seen = seen[-len(self.marker) :] + data
                    if self.marker in seen:
                        self.cut.set()
                        _reset(source)
                        _reset(sink)
                        return
                sink.sendall(data)
        except OSError:
            pass
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)


def _reset(sock: socket.socket) -> None:
    """Close with a reset (SO_LINGER 0), as a peer that gives up does, rather than an orderly end."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        sock.close()
