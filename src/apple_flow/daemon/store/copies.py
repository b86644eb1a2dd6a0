"""What a channel decided about the rows it took or skipped as copies (a guid seen before, the other copy of a text to
yourself), so that a copy arriving after a restart is not run again (migration 8 made the table). A channel sees one
channel's rows through ``ChannelCopies`` (``channels.base.CopyRecord``). A copy's decision is written when it is
made; a taken row's marks (``channels.base.CopyMarks``) with the daemon's first record of its message
(``MessageTable``), in that transaction."""

from __future__ import annotations

from apple_flow.channels.base import CopyMarks, Known
from apple_flow.daemon.store.database import Database

COPIES_KEEP = 10_000  # rows whose copy decision is kept per channel (a re-inserted row comes back within days)


class CopyTable:
    def __init__(self, db: Database) -> None:
        self._db = db

    def known(self, channel: str, rowid: int, guid: str) -> Known:
        """What was decided about the row before (if it was: the row it was found a copy of, None when it was taken),
        and the row first taken with its ``guid`` (none for ''): one query."""
        rows = self._db.rows(
            "SELECT rowid, guid, copy_of FROM copies WHERE channel = ? AND (rowid = ? OR (? != '' AND guid = ?)) "
            "ORDER BY id",
            (channel, rowid, guid, guid),
        )
        own = next((row for row in rows if row[0] == rowid), None)
        first = next((row[2] if row[2] is not None else row[0] for row in rows if guid and row[1] == guid), None)
        first = None if first is None else int(first)
        if own is None:
            return Known(first_with_guid=first)
        return Known(True, None if own[2] is None else int(own[2]), first)

    def unpaired_copy(self, channel: str, own_chat: str, text: str, from_me: bool, since: float) -> int | None:
        """The oldest taken row in ``own_chat`` with ``text``, of the other kind, at or after ``since``, whose other
        copy has not come: a row of that kind found a copy of it is that copy (``paired``: rows of before)."""
        rows = self._db.rows(
            "SELECT rowid FROM copies AS taken WHERE channel = ? AND own_chat = ? AND text = ? AND from_me != ? "
            "AND at >= ? AND copy_of IS NULL AND paired = 0 AND NOT EXISTS (SELECT 1 FROM copies AS other "
            "WHERE other.channel = taken.channel AND other.copy_of = taken.rowid AND other.from_me = ?) "
            "ORDER BY id LIMIT 1",
            (channel, own_chat, text, int(from_me), since, int(from_me)),
        )
        return int(rows[0][0]) if rows else None

    def add_copy(self, channel: str, rowid: int, guid: str, own_chat: str, text: str, from_me: bool, at: float,
                 copy_of: int | None) -> None:
        """Also keeps about the newest ``COPIES_KEEP`` of the channel (trimmed every 100 rows, not at each)."""
        with self._db.transaction():
            added = self._db.write(
                "INSERT OR REPLACE INTO copies (channel, rowid, guid, own_chat, text, from_me, at, copy_of) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (channel, rowid, guid, own_chat, text, int(from_me), at, copy_of),
            ).lastrowid
            if added is not None and added % 100 == 0:
                self._db.write(
                    "DELETE FROM copies WHERE channel = ? AND id <= (SELECT MAX(id) FROM copies WHERE channel = ?) - ?",
                    (channel, channel, COPIES_KEEP),
                )

    def keep_copy_marks(self, channel: str, rowid: int, marks: CopyMarks) -> None:
        """A taken row: its marks, for the copies that may come of it."""
        self.add_copy(channel, rowid, marks.guid, marks.own_chat, marks.text, marks.from_me, marks.at, None)

    def copies_of(self, channel: str) -> ChannelCopies:
        return ChannelCopies(self, channel)


class ChannelCopies:
    """One channel's decisions about copies (``channels.base.CopyRecord``)."""

    def __init__(self, table: CopyTable, channel: str) -> None:
        self._table = table
        self._channel = channel

    def known(self, rowid: int, guid: str) -> Known:
        return self._table.known(self._channel, rowid, guid)

    def take_pair(self, own_chat: str, text: str, from_me: bool, since: float) -> int | None:
        # Nothing to write: the copy's own row (``add``, found a copy of it) records that the pair is complete.
        return self._table.unpaired_copy(self._channel, own_chat, text, from_me, since)

    def add(self, rowid: int, guid: str, own_chat: str, text: str, from_me: bool, at: float,
            copy_of: int | None) -> None:
        self._table.add_copy(self._channel, rowid, guid, own_chat, text, from_me, at, copy_of)
