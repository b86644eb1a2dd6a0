"""Where the iMessage ingress keeps what it decided about the rows it took or skipped as copies (a guid seen
before, the other copy of a text to yourself): a table of the daemon's database, so that a copy arriving after a
restart is not run again (``echo.CopyRecord``; migration 8 of ``daemon.store.migrations`` made the table)."""

from __future__ import annotations

import sqlite3
from contextlib import AbstractContextManager
from typing import Any, Protocol

COPIES_KEEP = 10_000  # rows whose copy decision is kept per channel (a re-inserted row comes back within days)


class SqlAccess(Protocol):
    """What this table needs of a database: the daemon's (``daemon.store.Database``) has it."""

    def rows(self, sql: str, args: tuple[Any, ...] = ()) -> list[sqlite3.Row]: ...

    def write(self, sql: str, args: tuple[Any, ...] = ()) -> sqlite3.Cursor: ...

    def transaction(self) -> AbstractContextManager[None]: ...


class CopyTable:
    """One channel's decisions about copies (``echo.CopyRecord``)."""

    def __init__(self, db: SqlAccess, channel: str) -> None:
        self._db = db
        self._channel = channel

    def verdict(self, rowid: int) -> tuple[bool, int | None]:
        rows = self._db.rows("SELECT copy_of FROM copies WHERE channel = ? AND rowid = ?", (self._channel, rowid))
        return (False, None) if not rows else (True, None if rows[0][0] is None else int(rows[0][0]))

    def row_with_guid(self, guid: str) -> int | None:
        rows = self._db.rows(
            "SELECT COALESCE(copy_of, rowid) FROM copies WHERE channel = ? AND guid = ? ORDER BY id LIMIT 1",
            (self._channel, guid),
        )
        return int(rows[0][0]) if rows else None

    def take_pair(self, own_chat: str, text: str, from_me: bool, since: float) -> int | None:
        with self._db.transaction():
            rows = self._db.rows(
                "SELECT id, rowid FROM copies WHERE channel = ? AND own_chat = ? AND text = ? AND from_me != ? "
                "AND at >= ? AND copy_of IS NULL AND paired = 0 ORDER BY id LIMIT 1",
                (self._channel, own_chat, text, int(from_me), since),
            )
            if not rows:
                return None
            self._db.write("UPDATE copies SET paired = 1 WHERE id = ?", (rows[0][0],))
            return int(rows[0][1])

    def add(self, rowid: int, guid: str, own_chat: str, text: str, from_me: bool, at: float,
            copy_of: int | None) -> None:
        """Also keeps about the newest ``COPIES_KEEP`` of the channel (trimmed every 100 rows, not at each)."""
        with self._db.transaction():
            added = self._db.write(
                "INSERT OR REPLACE INTO copies (channel, rowid, guid, own_chat, text, from_me, at, copy_of) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (self._channel, rowid, guid, own_chat, text, int(from_me), at, copy_of),
            ).lastrowid
            if added is not None and added % 100 == 0:
                self._db.write(
                    "DELETE FROM copies WHERE channel = ? AND id <= (SELECT MAX(id) FROM copies WHERE channel = ?) - ?",
                    (self._channel, self._channel, COPIES_KEEP),
                )
