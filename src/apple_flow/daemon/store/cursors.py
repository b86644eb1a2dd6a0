"""Where each channel's ingress resumes: the last row it passed (``daemon.running.message_jobs.CursorTracker``
computes it)."""

from __future__ import annotations

from apple_flow.daemon.store.database import Database


class CursorTable:
    def __init__(self, db: Database) -> None:
        self._db = db

    def get_cursor(self, channel: str) -> int | None:
        rows = self._db.rows("SELECT last_rowid FROM cursor WHERE channel = ?", (channel,))
        return int(rows[0][0]) if rows else None

    def advance_cursor(self, channel: str, rowid: int) -> None:
        """Moves the cursor forward to ``rowid``; never back (callers on several threads may save out of order)."""
        self._db.write(
            "INSERT INTO cursor (channel, last_rowid) VALUES (?, ?) "
            "ON CONFLICT (channel) DO UPDATE SET last_rowid = MAX(last_rowid, excluded.last_rowid)",
            (channel, rowid),
        )

    def set_cursor(self, channel: str, rowid: int) -> None:
        self._db.write(
            "INSERT INTO cursor (channel, last_rowid) VALUES (?, ?) "
            "ON CONFLICT (channel) DO UPDATE SET last_rowid = excluded.last_rowid",
            (channel, rowid),
        )
