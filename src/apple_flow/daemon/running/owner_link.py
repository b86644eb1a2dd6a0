"""The daemon's end of the owner socket (``apple_flow.owner_socket``): agents, through ``apple-flow mcp``, text the
owner, ask the owner a question, or send the owner a file.

A question is an approval request of kind ``question`` (``Approvals.ask``), addressed to the owner (the first
allowed sender): stored, then texted with its id and how to answer, its message ids noted so that a tapback on it
decides it. The owner decides it as any request (like/love or `approve <id>`, dislike or `deny <id>`, the web
page) or answers with a plain reply (``Orchestrator``); other senders, SMS and group chats cannot. ``wait`` reads
the question's state from the database, so a question asked before a restart is answered after it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from apple_flow.config import Settings
from apple_flow.daemon.deciding.approvals import Approvals
from apple_flow.daemon.deciding.files_to_send import check
from apple_flow.daemon.running.sending import ReplySender
from apple_flow.daemon.store import Approval, Store
from apple_flow.owner_socket import MAX_PATH_BYTES, MAX_WAIT_SECONDS, read_line, socket_path

log = logging.getLogger(__name__)

MAX_QUESTION_SECONDS = 86_400.0  # a day
POLL_SECONDS = 0.2  # how often a waiting request looks at its question's row (any writer may decide it)
MAX_TEXT_CHARS = 4000


def question_text(question: Approval) -> str:
    details = f"\n{question.plan}" if question.plan else ""
    return (
        f"An agent asks ({question.id}): {question.task}{details}\n"
        f"Like this message or text `approve {question.id}` to say yes, dislike it or text `deny {question.id}` to "
        "say no, or reply with your answer."
    )


class OwnerLink:
    """Serves the socket on a thread of its own until ``stop``."""

    def __init__(self, settings: Settings, store: Store, approvals: Approvals, sender: ReplySender,
                 owner: str | None, clock: Callable[[], float] = time.time) -> None:
        self._settings = settings
        self._store = store
        self._approvals = approvals
        self._sender = sender
        self._owner = owner
        self._clock = clock
        self._stop = threading.Event()
        self._server: socket.socket | None = None
        self.path = socket_path(settings)

    def start(self) -> None:
        """Listens at ``path`` (mode 0600: created under a umask that leaves the owner only). A path too long for a
        socket, or one that cannot be bound, is logged: the daemon runs on without these tools."""
        if len(os.fsencode(self.path)) > MAX_PATH_BYTES:
            log.warning("agents cannot ask the owner: the socket path %s is too long; move APPLE_FLOW_DB_PATH",
                        self.path)
            return
        try:
            self.path.unlink(missing_ok=True)  # left by a daemon that was killed (the instance lock is ours)
            server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            previous = os.umask(0o177)
            try:
                server.bind(str(self.path))
            finally:
                os.umask(previous)
            os.chmod(self.path, 0o600)
            server.listen(16)
        except OSError as exc:
            log.warning("agents cannot ask the owner: cannot listen at %s (%s)", self.path, exc)
            return
        self._server = server
        threading.Thread(target=self._accept, name="owner-link", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()
        if self._server is not None:
            with contextlib.suppress(OSError):  # wakes the thread blocked in accept() (Linux)
                self._server.shutdown(socket.SHUT_RDWR)
            self._server.close()
            self.path.unlink(missing_ok=True)

    def _accept(self) -> None:
        assert self._server is not None
        while not self._stop.is_set():
            try:
                conn, _ = self._server.accept()
            except OSError:
                return  # closed by stop()
            threading.Thread(target=self._serve, args=(conn,), name="owner-link-request", daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            try:
                conn.settimeout(MAX_WAIT_SECONDS + 10)
                message = json.loads(read_line(conn))
                answer = self.handle(message if isinstance(message, dict) else {})
            except (OSError, ValueError) as exc:
                answer = {"ok": False, "error": f"bad request: {exc}"}
            except Exception as exc:  # a bug or the database: said to the agent, logged here, never fatal
                log.exception("an owner-socket request failed")
                answer = {"ok": False, "error": f"the daemon failed: {exc}"}
            with contextlib.suppress(OSError):  # the agent went away
                conn.sendall(json.dumps(answer).encode() + b"\n")

    # --- the requests ----------------------------------------------------------------------------------------

    def handle(self, message: dict[str, Any]) -> dict[str, Any]:
        op = message.get("op")
        if op == "wait":
            return self._wait(str(message.get("id") or ""), _number(message.get("seconds"), MAX_WAIT_SECONDS))
        if self._owner is None:
            return _error("nobody to ask: APPLE_FLOW_ALLOWED_SENDERS is empty (its first entry is the owner)")
        if op == "notify":
            text = _text(message.get("text"), "text")
            failed = self._sender.send(self._owner, text)
            return _error(f"the text could not be sent: {failed}") if failed else {"ok": True}
        if op == "ask":
            return self._ask(message)
        if op == "send_file":
            return self._send_file(str(message.get("path") or ""))
        return _error(f"unknown op {op!r}")

    def _ask(self, message: dict[str, Any]) -> dict[str, Any]:
        assert self._owner is not None
        question = _text(message.get("question"), "question")
        details = str(message.get("details") or "").strip()[:MAX_TEXT_CHARS]
        seconds = _number(message.get("timeout_seconds"), self._settings.limits.approval_ttl_minutes * 60.0)
        if not 0 < seconds <= MAX_QUESTION_SECONDS:
            return _error(f"timeout_seconds must be above 0 and at most {MAX_QUESTION_SECONDS:g}")
        asked = self._approvals.ask(self._owner, question, details, seconds)
        self._store.approvals.add_approval(asked)  # before it is texted: a quick answer must find it
        self._store.events.log("question", f"{asked.id}: {question[:80]!r}", self._owner)
        failed = self._sender.send(self._owner, question_text(asked), approval_id=asked.id)
        if failed:
            self._store.approvals.record_decisions([_closed(asked, self._clock())])
            return _error(f"the question could not be texted: {failed}")
        return {"ok": True, "id": asked.id, "expires_at": asked.expires_at}

    def _wait(self, question_id: str, seconds: float) -> dict[str, Any]:
        deadline = time.monotonic() + min(max(seconds, 0.0), MAX_WAIT_SECONDS)
        while True:
            found = self._store.approvals.get_approval(question_id)
            if found is None or not found.is_question:
                return _error(f"no question {question_id}")
            state = found.state
            if state == "pending" and found.expires_at <= self._clock():
                state = "timed_out"
            if state != "pending" or time.monotonic() >= deadline or self._stop.is_set():
                return {"ok": True, "id": found.id, "state": state, "answer": found.extra,
                        "expires_at": found.expires_at}
            self._stop.wait(POLL_SECONDS)

    def _send_file(self, named: str) -> dict[str, Any]:
        assert self._owner is not None
        s = self._settings
        if not Path(named).is_absolute():
            return _error(f"path must be absolute, got {named!r}")
        roots = [s.workspaces.default, *s.workspaces.allowed]
        problems = []
        for root in roots:
            outgoing = check(named, root.expanduser(), s.imessage.send_file_max_bytes)
            if outgoing.path is not None:
                failed = self._sender.send_file(self._owner, outgoing.path)
                return _error(f"the file could not be sent: {failed}") if failed else {"ok": True}
            problems.append(outgoing.problem)
        return _error(f"{named} may not be sent: it must be a file inside the default workspace or "
                      f"APPLE_FLOW_ALLOWED_WORKSPACES ({'; '.join(dict.fromkeys(problems))})")


def _closed(question: Approval, now: float) -> Approval:
    """A question whose text could not go: denied by nobody, so that it does not stay on the web page."""
    return replace(question, state="denied", decided_at=now, decided_by="owner-link:not-sent")


def _text(value: object, name: str) -> str:
    text = str(value or "").strip()
    if not text:
        raise ValueError(f"{name} must not be empty")
    return text[:MAX_TEXT_CHARS]


def _number(value: object, default: float) -> float:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"not a number: {value!r}")
    return float(value)


def _error(text: str) -> dict[str, Any]:
    return {"ok": False, "error": text}
