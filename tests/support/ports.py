"""Ports on 127.0.0.1 for a test's servers: the system picks a free one, so parallel test runs do not collide."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A port nothing listens on now (the system's choice), for a server that must be told its port."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def closed_port_url() -> str:
    """The URL of an OpenAI-compatible server that is not there: a port nothing listens on."""
    return f"http://127.0.0.1:{free_port()}/v1"
