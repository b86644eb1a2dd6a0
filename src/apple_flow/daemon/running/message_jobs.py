"""The messages of one channel, from taken to passed: a message's reply is recorded before it is sent, its files
follow it, and only then may the cursor pass it (``CursorTracker``, here), so a restart after a crash anywhere in
between reads it again and does what is left (``MessageLedger.replay``). ``MessageWork`` is a message's turn: the
message is recorded as taken when its turn starts (a message waiting in the queue has no record, which a restart
treats as a taken one: it handles it again). A reply without files is recorded as sent in the transaction that lets
the cursor pass its message."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from apple_flow.channels.base import InboundMessage, Ingress, Noted
from apple_flow.config import Settings
from apple_flow.daemon.deciding.decisions import Turn
from apple_flow.daemon.running.arrivals import FileLimits, describe, receive
from apple_flow.daemon.running.sending import ReplySender
from apple_flow.daemon.store import Store, message_reply

log = logging.getLogger(__name__)

HANDLED_STATES = frozenset({"sent", "ignored", "send_failed"})  # a message in these has nothing left but its files


class MessageLedger:
    def __init__(
        self, channel: str, store: Store, ingress: Ingress, sender: ReplySender, settings: Settings,
        stop: threading.Event,
    ) -> None:
        self.channel = channel
        self._store = store
        self._ingress = ingress
        self._sender = sender
        self._settings = settings
        self._stop = stop
        self._tracker: CursorTracker | None = None

    def start(self, position: int) -> None:
        """The cursor starts at ``position`` (the ingress reads after it)."""
        self._tracker = CursorTracker(position)

    def ref(self, message: InboundMessage) -> str:
        """The message's name in the store's runs and approvals: "channel:rowid"."""
        return f"{self.channel}:{message.rowid}"

    def work(self, message: InboundMessage, turn: Turn) -> MessageWork:
        return MessageWork(turn, self, message, message.reply_target, self.ref(message))

    def take(self, message: InboundMessage) -> None:
        """Records that the message is being handled (in the caller's transaction), with the marks its channel
        knows its row again by."""
        self._store.messages.take_message(self.channel, message.rowid, message.sender, message.text,
                                          message.copy_marks)

    def opened(self, rowid: int) -> None:
        """The message is read: the cursor cannot pass it until it is done."""
        self._require_tracker().opened(rowid)

    def done(self, rowid: int, skipped: bool = False) -> None:
        """The message (or skipped row) is done: the cursor may pass it."""
        tracker = self._require_tracker()
        position = tracker.passed(rowid) if skipped else tracker.finished(rowid)
        if position is not None:
            self._store.cursors.advance_cursor(self.channel, position)

    def replay(self, message: InboundMessage) -> bool:
        """A message read again after a restart: does what was left (the reply recorded but not sent, the files
        not sent). False when there was nothing recorded to go on from."""
        record = self._store.messages.get_message(self.channel, message.rowid)
        if record is not None and record.state in HANDLED_STATES:
            self.complete(message)  # its reply's files that a crash left unsent go first
            return True
        if record is not None and record.state == "replied" and record.reply is not None:
            recipient = message.reply_target
            if self._sender.went_out(recipient, record.reply, message.rowid):  # just before a crash
                self._store.messages.mark_message_sent(self.channel, message.rowid)
                self.complete(message)
            else:
                self.deliver(message, recipient, record.reply)  # recorded before a crash, never sent
            return True
        return False

    def unsent(self, message: InboundMessage) -> bool:
        return self._ingress.unsent(message.rowid)

    def withdrawn(self, message: InboundMessage, turn: Turn) -> None:
        """Not run; an approval it carried is pending again, and the sender, told it was approved, hears so."""
        log.info("message %d of %s was unsent before its turn started: not run", message.rowid, message.sender)
        self._store.events.log("unsent", f"not run: {message.text[:80]!r}", message.sender)
        if turn.approval is None:
            with self._store.transaction():
                self.take(message)
                self._store.messages.record_message_reply(self.channel, message.rowid, None, "unsent before it ran")
                self.done(message.rowid)
            return
        note = (f"Not run: you unsent `{message.text.strip()}` before it started. "
                f"{turn.approval.id} is pending again.")
        with self._store.transaction():
            self._store.approvals.reopen(turn.approval.id)
            self.take(message)
            self._store.messages.record_message_reply(self.channel, message.rowid, note)
            recipient = message.reply_target
            noted = self._sender.note(recipient, note)
        self.deliver(message, recipient, note, noted=noted, with_files=False)

    def receive_files(self, message: InboundMessage, workspace: Path) -> str:
        """Copies the message's files into the turn's workspace; the note telling the agent about them."""
        if not message.attachments:
            return ""
        attachments = self._ingress.settle_attachments(message, self._stop)
        imessage = self._settings.imessage
        limits = FileLimits(imessage.attachment_max_bytes, imessage.attachment_max_message_bytes)
        arrivals = receive(attachments, workspace, message.rowid, limits)
        for arrival in arrivals:
            if arrival.path is None:
                log.info("message %d: %r not received (%s)", message.rowid, arrival.name, arrival.problem)
        self._store.events.log(
            "files", ", ".join(a.path or f"{a.name!r} missing" for a in arrivals)[:300], message.sender
        )
        return describe(arrivals)

    def record_reply(
        self, message: InboundMessage, reply: str | None, note: str | None = None,
        files: Sequence[tuple[str, str]] = (), recipient: str = "", workspace: Path | None = None,
    ) -> None:
        """The reply (or ``note`` on why there is none) recorded on the message, and the ``files`` that go to
        ``recipient`` with it (from ``workspace``), in the caller's transaction."""
        self._store.messages.record_message_reply(self.channel, message.rowid, reply, note)
        if files:
            self._store.reply_files.record_files(message_reply(self.channel, message.rowid), recipient,
                                                 message.sender, str(workspace), files)

    def deliver(
        self, message: InboundMessage, recipient: str, reply: str, approval_id: str | None = None,
        noted: Noted | None = None, with_files: bool = True,
    ) -> None:
        """Sends the recorded reply to ``recipient`` (the message's ``reply_target``, worked out by the caller;
        ``noted``: its sent lines recorded with it) and its files (``with_files`` False: it has none); records how
        the reply went, then lets the cursor pass the message. The channel's
        confirmation of the reply is waited for on a thread of the outbound side, so the sender's next turn does
        not wait for it (a crash meanwhile leaves it 'replied': the restart asks the channel whether it went out)."""
        handed = self._sender.hand_over(recipient, reply, approval_id, noted)
        if not handed.pending:
            if with_files:
                self._settle(message, handed.failed)
            else:
                self._confirmed(message, handed.failed)
            return
        self._sender.send_reply_files(message_reply(self.channel, message.rowid))
        self._sender.when_confirmed(handed, lambda failed: self._confirmed(message, failed))

    def _settle(self, message: InboundMessage, failed: str | None) -> None:
        """The reply went (or failed): then its files, then the cursor may pass the message."""
        reply_of = message_reply(self.channel, message.rowid)
        if self._store.reply_files.unsent(reply_of):  # recorded before the files go: a crash while they go does
            self._delivered(message, failed)  # not send the reply again
            self._sender.send_reply_files(reply_of)
            self.done(message.rowid)
            return
        self._confirmed(message, failed)

    def _confirmed(self, message: InboundMessage, failed: str | None) -> None:
        with self._store.transaction():  # how the reply went, and the cursor past its message, together
            self._delivered(message, failed)
            self.done(message.rowid)

    def _delivered(self, message: InboundMessage, failed: str | None) -> None:
        with self._store.transaction():
            self._store.messages.mark_message_sent(self.channel, message.rowid, failed=failed)
            if failed is not None:
                self._store.events.log("send_failed", failed, message.sender)

    def complete(self, message: InboundMessage) -> None:
        """Once its reply is out (or failed): the reply's files not sent yet, then the cursor may pass the message
        (so a restart after a crash in between reads it again and sends the rest)."""
        self._sender.send_reply_files(message_reply(self.channel, message.rowid))
        self.done(message.rowid)

    def _require_tracker(self) -> CursorTracker:
        if self._tracker is None:
            raise RuntimeError("the daemon is not running")
        return self._tracker


@dataclass(frozen=True)
class MessageWork:
    """A message's turn; its answer goes where the message came from."""

    turn: Turn
    replies: MessageLedger
    message: InboundMessage
    recipient: str
    run_message: str

    def take(self) -> None:
        self.replies.take(self.message)

    def withdrawn(self) -> bool:
        if not self.replies.unsent(self.message):
            return False
        self.replies.withdrawn(self.message, self.turn)
        return True

    def files_note(self) -> str:
        return self.replies.receive_files(self.message, self.turn.workspace)

    def record_reply(self, reply: str | None, files: Sequence[tuple[str, str]] = ()) -> None:
        self.replies.record_reply(self.message, reply, "cancelled" if reply is None else None, files, self.recipient,
                                  self.turn.workspace)

    def answer(
        self, reply: str | None, approval_id: str | None = None, noted: Noted | None = None, with_files: bool = True
    ) -> None:
        if reply is None:
            self.replies.done(self.message.rowid)
        else:
            self.replies.deliver(self.message, self.recipient, reply, approval_id, noted, with_files)

    def dropped(self) -> None:
        self.replies.take(self.message)  # queued, so not recorded yet
        self.replies.record_reply(self.message, None, "cancelled before it ran")
        self.replies.done(self.message.rowid)


class CursorTracker:
    """Where the cursor may be: past every row read, except that it only passes a message once it is finished
    (replied to, sent, or ignored), even when later messages finish first, so a restart resumes at the oldest
    unfinished one. It only computes the position; the ledger saves it (``CursorTable.advance_cursor`` never moves
    it back, so saves may race)."""

    def __init__(self, start: int) -> None:
        self._position = start
        self._highest = start
        self._open: set[int] = set()
        self._lock = threading.Lock()

    @property
    def position(self) -> int:
        return self._position

    def opened(self, rowid: int) -> None:
        with self._lock:
            self._open.add(rowid)
            self._highest = max(self._highest, rowid)

    def passed(self, rowid: int) -> int | None:
        """A row the ingress skipped (from me, echo, reaction): finished as soon as it is seen."""
        self.opened(rowid)
        return self.finished(rowid)

    def finished(self, rowid: int) -> int | None:
        """The cursor's new position when finishing ``rowid`` moves it, else None."""
        with self._lock:
            self._open.discard(rowid)
            position = min(self._open) - 1 if self._open else self._highest
            if position <= self._position:
                return None
            self._position = position
            return position
