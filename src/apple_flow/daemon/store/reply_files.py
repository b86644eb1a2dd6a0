"""The files a reply names (``files_to_send``), recorded with the reply in its transaction and marked as each is
sent or refused, so that a restart sends what a crash left unsent, after the reply, each once. A reply is named by
its ``reply_of``: ``message_reply`` or ``web_reply``."""

from __future__ import annotations

from collections.abc import Sequence

from apple_flow.daemon.store.database import Database
from apple_flow.daemon.store.records import ReplyFile

WEB_REPLY_PREFIX = "web:"


def message_reply(channel: str, rowid: int) -> str:
    """The ``reply_of`` of a message's reply."""
    return f"message:{channel}:{rowid}"


def web_reply(approval_id: str) -> str:
    """The ``reply_of`` of the reply to a task approved on the web page."""
    return f"{WEB_REPLY_PREFIX}{approval_id}"


class ReplyFileTable:
    def __init__(self, db: Database) -> None:
        self._db = db

    def record_files(
        self, reply_of: str, recipient: str, sender: str, workspace: str, files: Sequence[tuple[str, str]]
    ) -> None:
        """Records the files (shown name, path) a reply names, to send after it; called in the transaction that
        records the reply."""
        now = self._db.now()
        with self._db.transaction():
            for shown, path in files:
                self._db.write(
                    "INSERT INTO reply_files (reply_of, recipient, sender, workspace, shown, path, state, updated_at) "
                    "VALUES (?, ?, ?, ?, ?, ?, 'pending', ?)",
                    (reply_of, recipient, sender, workspace, shown, path, now),
                )

    def unsent(self, reply_of: str) -> list[ReplyFile]:
        """The files of a reply neither sent nor refused yet, in the order the reply names them."""
        rows = self._db.rows(
            "SELECT id, recipient, sender, workspace, shown, path FROM reply_files "
            "WHERE reply_of = ? AND state = 'pending' ORDER BY id",
            (reply_of,),
        )
        return [ReplyFile(*row) for row in rows]

    def replies_with_unsent(self, prefix: str) -> list[str]:
        """The ``reply_of`` of replies (those starting with ``prefix``) with files still to send, oldest first."""
        rows = self._db.rows(
            "SELECT reply_of FROM reply_files WHERE state = 'pending' AND substr(reply_of, 1, ?) = ? "
            "GROUP BY reply_of ORDER BY MIN(id)",
            (len(prefix), prefix),
        )
        return [str(row[0]) for row in rows]

    def mark_file_done(self, file_id: int, problem: str | None = None) -> None:
        """The file went (``problem`` None), or will not (why)."""
        self._db.write(
            "UPDATE reply_files SET state = ?, problem = ?, updated_at = ? WHERE id = ?",
            ("not_sent" if problem is not None else "sent", problem, self._db.now(), file_id),
        )

    def not_sent(self, sender: str, since: float) -> list[tuple[float, str, str]]:
        """(when, the name the reply showed, why) of the sender's files that did not go out since ``since``, oldest
        first."""
        rows = self._db.rows(
            "SELECT updated_at, shown, problem FROM reply_files WHERE sender = ? AND state = 'not_sent' "
            "AND updated_at >= ? ORDER BY updated_at, id", (sender, since),
        )
        return [(float(row[0]), str(row[1]), str(row[2] or "")) for row in rows]
