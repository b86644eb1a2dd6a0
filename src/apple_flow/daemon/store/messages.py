"""Every message the daemon handled, by channel and row: taken, replied (the reply recorded before it is sent),
sent, ignored or send_failed. A message's first record keeps the marks its channel knows its row again by (the
copies table), in the same transaction."""

from __future__ import annotations

from typing import Any

from apple_flow.channels.base import CopyMarks
from apple_flow.daemon.store.copies import CopyTable
from apple_flow.daemon.store.database import Database
from apple_flow.daemon.store.records import FailedSend, MessageRecord


class MessageTable:
    def __init__(self, db: Database, copies: CopyTable) -> None:
        self._db = db
        self._copies = copies

    def get_message(self, channel: str, rowid: int) -> MessageRecord | None:
        rows = self._db.rows(
            "SELECT channel, rowid, sender, text, state, reply, note FROM messages WHERE channel = ? AND rowid = ?",
            (channel, rowid),
        )
        return MessageRecord(*rows[0]) if rows else None

    def _put(self, channel: str, rowid: int, sender: str, text: str, state: str, note: str | None,
             marks: CopyMarks | None) -> None:
        now = self._db.now()
        with self._db.transaction():
            self._db.write(
                "INSERT INTO messages (channel, rowid, sender, text, state, note, received_at, updated_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (channel, rowid) DO UPDATE SET "
                "state = excluded.state, note = excluded.note, updated_at = excluded.updated_at",
                (channel, rowid, sender, text, state, note, now, now),
            )
            if marks is not None:
                self._copies.keep_copy_marks(channel, rowid, marks)

    def take_message(self, channel: str, rowid: int, sender: str, text: str, marks: CopyMarks | None = None) -> None:
        """Records that the message is being handled (before any turn for it runs), with the ``marks`` its channel
        knows its row again by."""
        self._put(channel, rowid, sender, text, "taken", None, marks)

    def ignore_message(self, channel: str, rowid: int, sender: str, text: str, reason: str,
                       marks: CopyMarks | None = None) -> None:
        self._put(channel, rowid, sender, text, "ignored", reason, marks)

    def record_message_reply(self, channel: str, rowid: int, reply: str | None, note: str | None = None) -> None:
        """Stores the final reply before it is sent. ``None``: nothing is to be sent (e.g. cancelled)."""
        state = "replied" if reply is not None else "sent"
        self._db.write(
            "UPDATE messages SET state = ?, reply = ?, note = ?, updated_at = ? WHERE channel = ? AND rowid = ?",
            (state, reply, note, self._db.now(), channel, rowid),
        )

    def mark_message_sent(self, channel: str, rowid: int, failed: str | None = None) -> None:
        self._db.write(
            "UPDATE messages SET state = ?, note = COALESCE(?, note), updated_at = ? WHERE channel = ? AND rowid = ?",
            ("send_failed" if failed else "sent", failed, self._db.now(), channel, rowid),
        )

    def count_messages(self, state: str | None = None) -> int:
        if state is None:
            return int(self._db.rows("SELECT COUNT(*) FROM messages")[0][0])
        return int(self._db.rows("SELECT COUNT(*) FROM messages WHERE state = ?", (state,))[0][0])

    def failed_sends(self, since: float, sender: str | None = None) -> tuple[int, FailedSend | None]:
        """How many replies failed to go out since ``since`` (of ``sender``, or anyone's), and the latest."""
        where = "state = 'send_failed' AND updated_at >= ?" + (" AND sender = ?" if sender is not None else "")
        args: tuple[Any, ...] = (since,) if sender is None else (since, sender)
        count = int(self._db.rows(f"SELECT COUNT(*) FROM messages WHERE {where}", args)[0][0])
        rows = self._db.rows(
            f"SELECT sender, text, note, updated_at FROM messages WHERE {where} ORDER BY updated_at DESC LIMIT 1", args
        )
        latest = FailedSend(rows[0][0], rows[0][1], rows[0][2] or "", rows[0][3]) if rows else None
        return count, latest
