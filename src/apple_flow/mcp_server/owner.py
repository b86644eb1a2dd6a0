"""The "ask the owner" tools' side of the owner socket (``apple_flow.owner_socket``): text the owner, ask and wait
for the owner's answer, send the owner a file, all through the running daemon, which alone sends texts and reads
the answers (only the owner's, over iMessage).

``ask`` waits in rounds of ``wait`` requests. A daemon that goes away meanwhile (a restart) is asked again until
the question's own deadline: the question is in its database, so the answer given after the restart counts.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from apple_flow.owner_socket import MAX_WAIT_SECONDS, SocketError, request

REQUEST_TIMEOUT_SECONDS = 30.0  # a text is confirmed within send_confirm_seconds (10 s) and its retries
RECONNECT_SECONDS = 0.5  # between attempts to reach a daemon that is restarting
OUTCOMES = {"approved": "approved", "denied": "denied", "answered": "answered", "timed_out": "timed-out"}


class OwnerError(RuntimeError):
    """The daemon refused or cannot be reached; the message says why."""


class OwnerClient:
    def __init__(self, path: Path, sleep: Callable[[float], None] = time.sleep) -> None:
        self.path = path
        self._sleep = sleep

    def notify(self, text: str) -> dict[str, Any]:
        self._ask_daemon({"op": "notify", "text": text})
        return {"sent": True}

    def send_file(self, path: str) -> dict[str, Any]:
        self._ask_daemon({"op": "send_file", "path": path})
        return {"sent": True, "path": path}

    def ask(self, question: str, details: str | None, timeout_seconds: float | None) -> dict[str, Any]:
        """Texts the question and returns once the owner answered or it timed out: ``outcome`` approved, denied,
        answered (``answer`` holds the reply) or timed-out."""
        asked = self._ask_daemon({"op": "ask", "question": question, "details": details or "",
                                  "timeout_seconds": timeout_seconds})
        question_id = str(asked["id"])
        # The daemon's clock decides; this one only bounds the wait for a daemon that does not come back.
        give_up = time.monotonic() + max(float(asked.get("expires_at", 0)) - time.time(), 0) + MAX_WAIT_SECONDS
        while True:
            try:
                state = request(self.path, {"op": "wait", "id": question_id, "seconds": MAX_WAIT_SECONDS},
                                MAX_WAIT_SECONDS + REQUEST_TIMEOUT_SECONDS)
            except SocketError:
                if time.monotonic() >= give_up:
                    return {"id": question_id, "outcome": "timed-out", "answer": None,
                            "note": "the daemon was not running when the question timed out"}
                self._sleep(RECONNECT_SECONDS)
                continue
            if not state.get("ok"):
                raise OwnerError(str(state.get("error") or "the daemon refused"))
            if state.get("state") != "pending":
                outcome = OUTCOMES.get(str(state.get("state")), str(state.get("state")))
                return {"id": question_id, "outcome": outcome, "answer": state.get("answer")}

    def _ask_daemon(self, message: dict[str, Any]) -> dict[str, Any]:
        try:
            answer = request(self.path, message, REQUEST_TIMEOUT_SECONDS)
        except SocketError as exc:
            raise OwnerError(str(exc)) from exc
        if not answer.get("ok"):
            raise OwnerError(str(answer.get("error") or "the daemon refused"))
        return answer
