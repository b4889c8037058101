"""Ports on this host: free ones picked for a server, and the ones asked for checked before a server takes them."""

from __future__ import annotations

import socket

from tritonpt.errors import HINT, ServerStartError
from tritonpt.options import Ports


def require_free(ports: Ports, host: str = "127.0.0.1") -> None:
    """``ServerStartError`` naming each port of ``ports`` (those asked for, not 0) that another process listens on
    at ``host``, with how to find it and how to serve elsewhere; nothing when all are free."""
    taken = []
    for what, port, option in ports.named():
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a port in TIME_WAIT is free to bind
            try:
                sock.bind((host, port))
            except OSError:
                taken.append((what, port, option))
    if taken:
        ports_said = ", ".join(f"{port} ({what})" for what, port, _ in taken)
        options = " / ".join(f"{option} PORT" for _, _, option in taken)
        msg = (
            f"Cannot serve on {host} port {ports_said}, as another process listens there (`ss -ltnp` names it; "
            "another Triton, or an earlier `tritonpt serve` still running?).\n"
            f"{HINT} stop it, or serve elsewhere with {options} (0 picks a free port)."
        )
        raise ServerStartError(msg)


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """``count`` distinct ports that nothing listens on right now (held together while picked)."""
    sockets: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
            sockets.append(sock)
            sock.bind((host, 0))
        return [int(sock.getsockname()[1]) for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()
