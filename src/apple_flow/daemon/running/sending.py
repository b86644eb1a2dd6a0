"""Sending, the running half's way out: replies, progress and files to the egress, one at a time per recipient (a chat's
parts of one reply must not interleave with another's; different chats do not wait for each other), each failure
said, never fatal. The files a reply names (checked against its workspace when the reply was made: ``Conclusion``)
are checked again before each goes; each is marked in the store as it is sent or refused.

A reply is handed over (``hand_over``) and its delivery confirmed apart (``when_confirmed``): the channel's
confirmation (the iMessage channel waits up to ``send_confirm_seconds`` for Messages' row) runs on a thread of its
own, so the sender's next turn starts meanwhile; the next reply still goes out after this one. A progress line's
confirmation, best effort, is waited for the same way.

What a text will be is noted in the channel's record of sent texts (for its echoes) before it goes: by the caller,
in the transaction that records the reply (``note``, then ``hand_over(..., noted=...)``), or else by the channel
as it hands the text over."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from apple_flow.channels.base import Egress, Handover, Noted, SendError
from apple_flow.config import Settings
from apple_flow.daemon.deciding.files_to_send import check
from apple_flow.daemon.store import Store

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class HandedOver:
    """A reply given to the channel: ``failed`` says why it could not be (then nothing is left to confirm);
    ``handover`` is what the channel left to confirm."""

    recipient: str
    failed: str | None = None
    handover: Handover = field(default_factory=Handover)
    approval_id: str | None = None  # the plan it presents: its parts' ids are noted with it once known

    @property
    def pending(self) -> bool:
        """Whether its confirmation is still to be waited for (else ``failed`` is what became of it)."""
        return self.handover.confirm is not None


class ReplySender:
    def __init__(self, egress: Egress, store: Store, settings: Settings) -> None:
        self._egress = egress
        self._store = store
        self._settings = settings
        self._locks: dict[str, threading.Lock] = {}  # one per recipient
        self._locks_lock = threading.Lock()
        self._confirming = 0  # confirmations still running
        self._confirmed = threading.Condition()

    def _lock(self, recipient: str) -> threading.Lock:
        with self._locks_lock:
            return self._locks.setdefault(recipient, threading.Lock())

    def note(self, recipient: str, text: str) -> Noted | None:
        """Notes ``text`` in the channel's record of sent texts, in the caller's store transaction, ahead of
        handing it over with the ``Noted`` returned. None when the channel could not (its ``hand_over`` then notes
        it, and fails as it would have)."""
        try:
            return self._egress.note(recipient, text)
        except Exception as exc:  # e.g. an address the channel cannot parse: said when the text is handed over
            log.info("could not note the text to %s ahead of sending it: %s", recipient, exc)
            return None

    def send(self, recipient: str, reply: str, approval_id: str | None = None) -> str | None:
        """Sends a text and waits for its confirmation (a notice of the daemon's own); returns why it could not be
        sent, or None."""
        handed = self.hand_over(recipient, reply, approval_id)
        return self._confirm_now(handed) if handed.pending else handed.failed

    def hand_over(
        self, recipient: str, reply: str, approval_id: str | None = None, noted: Noted | None = None
    ) -> HandedOver:
        """Gives a reply to the channel (which notes it in the store's record of sent texts, for echoes, unless
        it was ``noted`` already), without waiting for its delivery to be confirmed: see ``when_confirmed``. A
        reply presenting the plan of ``approval_id`` is noted with it by the ids the channel gave its parts, so
        that a tapback on it decides the request."""
        try:
            with self._lock(recipient):
                handover = self._egress.hand_over(recipient, reply, noted=noted)
        except Exception as exc:  # SendError, or a channel bug: recorded by the caller, never fatal
            return HandedOver(recipient, failed=_failure(recipient, exc))
        handed = HandedOver(recipient, handover=handover, approval_id=approval_id)
        self._note(handed, handover.ids)
        return handed

    def when_confirmed(self, handed: HandedOver, then: Callable[[str | None], None]) -> None:
        """Calls ``then`` with why the reply did not go out (None: it did) once that is known: at once when
        nothing is left to confirm, else from a thread of its own when the channel's confirmation ends."""
        if not handed.pending:
            then(handed.failed)
            return
        self._off_path(self._confirm, handed, then)

    def wait_confirmations(self, timeout: float) -> bool:
        """Waits until every confirmation under way has ended; False on timeout."""
        with self._confirmed:
            return self._confirmed.wait_for(lambda: self._confirming == 0, timeout)

    def send_file(self, recipient: str, path: Path) -> str | None:
        """Sends one file (checked by the caller) under the recipient's lock; returns why it could not, or None."""
        try:
            with self._lock(recipient):
                self._egress.send_file(recipient, path)
        except Exception as exc:  # SendError, or a channel bug: said to the caller, never fatal
            return _failure(recipient, exc)
        return None

    def progress(self, recipient: str, text: str, noted: Noted | None = None) -> None:
        """Best effort: progress is not recorded with the message, and a failure to send it does not stop the
        turn (its confirmation is waited for off the turn's path, and only logged). ``noted``: as for
        ``hand_over``."""
        try:
            with self._lock(recipient):
                handover = self._egress.hand_over(recipient, text, progress=True, noted=noted)
        except Exception as exc:
            log.warning("could not send progress to %s: %s", recipient, exc)
            return
        if handover.confirm is not None:
            self._off_path(self._confirm_progress, recipient, handover)

    def _off_path(self, task: Callable[..., None], *args: object) -> None:
        with self._confirmed:
            self._confirming += 1
        threading.Thread(target=self._counted, args=(task, *args), name="confirm", daemon=True).start()

    def _counted(self, task: Callable[..., None], *args: object) -> None:
        try:
            task(*args)
        finally:
            with self._confirmed:
                self._confirming -= 1
                self._confirmed.notify_all()

    def _confirm(self, handed: HandedOver, then: Callable[[str | None], None]) -> None:
        try:
            then(self._confirm_now(handed))
        except Exception:  # e.g. the store cannot be written: a restart finds the reply recorded, not sent
            log.exception("recording the delivery of a reply to %s failed", handed.recipient)

    def _confirm_now(self, handed: HandedOver) -> str | None:
        """Waits for the channel's confirmation of a reply handed over; why it did not go out, or None."""
        assert handed.handover.confirm is not None
        try:
            ids = handed.handover.confirm()
        except Exception as exc:  # SendError, or a channel bug: recorded by the caller, never fatal
            return _failure(handed.recipient, exc)
        self._note(handed, ids)
        return None

    def _confirm_progress(self, recipient: str, handover: Handover) -> None:
        assert handover.confirm is not None
        try:
            handover.confirm()
        except Exception as exc:
            log.warning("could not send progress to %s: %s", recipient, exc)

    def _note(self, handed: HandedOver, ids: tuple[str, ...] | None) -> None:
        if handed.approval_id is not None and ids:
            self._store.approvals.note_messages(handed.approval_id, ids)

    def went_out(self, recipient: str, reply: str, rowid: int) -> bool:
        """Whether a reply recorded before a crash went out before it (the channel knows)."""
        return self._egress.went_out(recipient, reply, rowid)

    def send_reply_files(self, reply_of: str) -> None:
        """Sends the files a reply names that are not sent yet (recorded with the reply), each marked as it goes.
        Each is checked again first: after a crash it may have gone or grown past the limit. One that cannot go
        gets a line saying why."""
        for item in self._store.reply_files.unsent(reply_of):
            if self._settings.imessage.send_files_per_reply <= 0:  # turned off before a restart
                problem: str | None = "sending files is turned off"
            else:
                checked = check(item.path, Path(item.workspace), self._settings.imessage.send_file_max_bytes)
                problem = checked.problem if checked.path is None else self._send_file(item.recipient, checked.path)
            if problem is not None:
                # Said before it is marked: a crash in between tries the file again rather than keep silent.
                self.progress(item.recipient, f"Could not send {item.shown}: {problem}")
            with self._store.transaction():
                self._store.reply_files.mark_file_done(item.id, problem)
                if problem is None:
                    self._store.events.log("file_sent", item.shown, item.sender)
                else:
                    self._store.events.log("file_not_sent", f"{item.shown}: {problem}", item.sender)

    def _send_file(self, recipient: str, path: Path) -> str | None:
        """Sends one checked file; returns why it could not be sent, or None."""
        try:
            with self._lock(recipient):
                self._egress.send_file(recipient, path)
        except Exception as exc:  # SendError, or a channel bug: said to the sender, never fatal
            if not isinstance(exc, SendError):
                log.exception("the channel failed sending %s to %s", path, recipient)
            return str(exc)
        return None


def _failure(recipient: str, exc: Exception) -> str:
    """Why a reply did not go out, logged (a channel bug with its traceback)."""
    if not isinstance(exc, SendError):
        log.exception("the channel failed sending to %s", recipient, exc_info=exc)
    log.error("could not send the reply to %s: %s", recipient, exc)
    return str(exc)
