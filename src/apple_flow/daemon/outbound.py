"""The daemon's outbound side: replies, progress and files to the egress, one at a time (the send lock: a
channel's parts of one reply must not interleave with another's), each failure said, never fatal. The files a
reply names are checked against its workspace (``outbox``) when the reply is recorded and again before each goes;
each is marked in the store as it is sent or refused."""

from __future__ import annotations

import logging
import threading
from dataclasses import replace
from pathlib import Path

from apple_flow.channels.base import Egress, SendError
from apple_flow.config import Settings
from apple_flow.daemon.outbox import Outgoing, check, check_all, note
from apple_flow.daemon.store import FinishedTurn, Store

log = logging.getLogger(__name__)


class Outbound:
    def __init__(self, egress: Egress, store: Store, settings: Settings) -> None:
        self._egress = egress
        self._store = store
        self._settings = settings
        self._lock = threading.Lock()

    def send(self, recipient: str, reply: str, approval_id: str | None = None) -> str | None:
        """Sends a reply (the channel notes it in the store's record of sent texts, for echoes); returns why it
        could not be sent, or None. A reply presenting the plan of ``approval_id`` is noted with it by the ids the
        channel gave its parts, so that a tapback on it decides the request."""
        try:
            with self._lock:
                ids = self._egress.send(recipient, reply)
        except Exception as exc:  # SendError, or a channel bug: recorded by the caller, never fatal
            if not isinstance(exc, SendError):
                log.exception("the channel failed sending to %s", recipient)
            log.error("could not send the reply to %s: %s", recipient, exc)
            return str(exc)
        if approval_id is not None and ids:
            self._store.approvals.note_messages(approval_id, ids)
        return None

    def progress(self, recipient: str, text: str) -> None:
        """Best effort: progress is not recorded with the message, and a failure to send it does not stop the
        turn."""
        try:
            with self._lock:
                self._egress.send_progress(recipient, text)
        except Exception as exc:
            log.warning("could not send progress to %s: %s", recipient, exc)

    def went_out(self, recipient: str, reply: str, rowid: int) -> bool:
        """Whether a reply recorded before a crash went out before it (the channel knows)."""
        return self._egress.went_out(recipient, reply, rowid)

    def check_files(self, finished: FinishedTurn, workspace: Path) -> tuple[FinishedTurn, list[Outgoing]]:
        """Which of the files the answer names may go (inside the workspace, within the limits); the reply then
        says which are being sent and which not, and why."""
        if not finished.files or finished.reply is None:
            return finished, []
        s = self._settings
        outgoing = check_all(finished.files, workspace, s.send_file_max_bytes, s.send_files_per_reply)
        return replace(finished, reply=f"{finished.reply}\n\n{note(outgoing)}"), outgoing

    def send_reply_files(self, reply_of: str) -> None:
        """Sends the files a reply names that are not sent yet (recorded with the reply), each marked as it goes.
        Each is checked again first: after a crash it may have gone or grown past the limit. One that cannot go
        gets a line saying why."""
        for item in self._store.reply_files.unsent(reply_of):
            if self._settings.send_files_per_reply <= 0:  # turned off before a restart
                problem: str | None = "sending files is turned off"
            else:
                checked = check(item.path, Path(item.workspace), self._settings.send_file_max_bytes)
                problem = checked.problem if checked.path is None else self._send_file(item.recipient, checked.path)
            if problem is not None:
                # Said before it is marked: a crash in between tries the file again rather than keep silent.
                self.progress(item.recipient, f"Could not send {item.shown}: {problem}")
            with self._store.transaction():
                self._store.reply_files.done(item.id, problem)
                if problem is None:
                    self._store.events.log("file_sent", item.shown, item.sender)
                else:
                    self._store.events.log("file_not_sent", f"{item.shown}: {problem}", item.sender)

    def _send_file(self, recipient: str, path: Path) -> str | None:
        """Sends one checked file; returns why it could not be sent, or None."""
        try:
            with self._lock:
                self._egress.send_file(recipient, path)
        except Exception as exc:  # SendError, or a channel bug: said to the sender, never fatal
            if not isinstance(exc, SendError):
                log.exception("the channel failed sending %s to %s", path, recipient)
            return str(exc)
        return None
