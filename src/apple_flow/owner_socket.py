"""The local socket between ``apple-flow mcp`` and the running daemon, for the "ask the owner" tools.

A Unix-domain socket in the daemon's state folder (the database's folder, hidden from the agent's commands by
``--hide``), mode 0600: only the owner's own processes reach it; the web page's token is never involved. One
request per connection: a JSON object on one line, answered by one JSON object on one line.

    {"op": "notify", "text": ...}                                 -> {"ok": true}
    {"op": "ask", "question": ..., "details": ..., "timeout_seconds": ...}  -> {"ok": true, "id": "q_..."}
    {"op": "wait", "id": ..., "seconds": ...}                     -> {"ok": true, "state": ..., "answer": ...}
    {"op": "send_file", "path": ...}                              -> {"ok": true}
    any failure                                                   -> {"ok": false, "error": "why"}

``wait`` answers when the question is decided or once ``seconds`` (at most ``MAX_WAIT_SECONDS``) have passed, with
``state`` pending, approved, denied, answered or timed_out; the caller asks again until it is not pending, so a
daemon restart in between only costs a reconnect (the question is in the database).
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

from apple_flow.config import Settings

SOCKET_NAME = "owner.sock"
MAX_WAIT_SECONDS = 20.0
MAX_LINE_BYTES = 1 << 20
# Unix-domain socket paths: 104 bytes on macOS (sun_path), 108 on Linux.
MAX_PATH_BYTES = 103


class SocketError(OSError):
    """The daemon cannot be reached, or broke off; the message says why."""


def socket_path(settings: Settings) -> Path:
    """Where the running daemon listens: next to its database."""
    return settings.db_path.expanduser().absolute().parent / SOCKET_NAME


def read_line(conn: socket.socket) -> bytes:
    """One line (without its newline) of at most ``MAX_LINE_BYTES``; what came before the peer closed, else."""
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = conn.recv(65536)
        if not chunk:
            break
        end = chunk.find(b"\n")
        if end >= 0:
            chunks.append(chunk[:end])
            break
        chunks.append(chunk)
        size += len(chunk)
        if size > MAX_LINE_BYTES:
            raise SocketError("a request or answer over 1 MiB")
    return b"".join(chunks)


def request(path: Path, message: dict[str, Any], timeout: float) -> dict[str, Any]:
    """Sends ``message`` to the daemon at ``path`` and returns its answer; ``SocketError`` when it cannot."""
    if not path.exists():
        raise SocketError(f"apple-flow's daemon is not running (no socket at {path}): start it with `apple-flow run` "
                          "or the login service")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(timeout)
        try:
            conn.connect(str(path))
            conn.sendall(json.dumps(message).encode() + b"\n")
            line = read_line(conn)
        except (ConnectionRefusedError, FileNotFoundError) as exc:
            raise SocketError(f"apple-flow's daemon is not running (nothing listens at {path}): start it with "
                              "`apple-flow run` or the login service") from exc
        except OSError as exc:
            raise SocketError(f"the daemon broke off ({exc})") from exc
    if not line:
        raise SocketError("the daemon closed the connection without an answer")
    try:
        answer = json.loads(line)
    except ValueError as exc:
        raise SocketError("the daemon's answer is not JSON") from exc
    if not isinstance(answer, dict):
        raise SocketError("the daemon's answer is not a JSON object")
    return answer
