"""What the daemon sent lately (replies and progress, as the channel noted each part), so that the echoes of its own
texts (a person texting themselves) are recognised, also after a restart. A channel sees it through ``SentRecord``
(``channels.base.SentTexts``)."""

from __future__ import annotations

from collections.abc import Callable

from apple_flow.daemon.store.database import Database


class SentTable:
    def __init__(self, db: Database) -> None:
        self._db = db

    def record_sent(self, channel: str, recipient: str, text: str, keep_seconds: float) -> None:
        """Records a text about to be sent; entries older than ``keep_seconds`` go (the table stays small)."""
        now = self._db.now()
        with self._db.transaction():
            self._db.write("DELETE FROM sent WHERE channel = ? AND at < ?", (channel, now - keep_seconds))
            self._db.write(
                "INSERT INTO sent (channel, recipient, text, at) VALUES (?, ?, ?, ?)", (channel, recipient, text, now)
            )

    def take_sent(self, channel: str, recipient: str, text: str, since: float, from_me: bool = False) -> bool:
        """True when ``text`` was sent to ``recipient`` on ``channel`` at or after ``since`` and this copy of it
        (the sent one, ``from_me``, or the received one) has not come back yet; the oldest such entry notes it, and
        goes once both copies have. Writes only when there is one."""
        copy = "sent" if from_me else "received"
        rows = self._db.rows(
            "SELECT id, seen FROM sent WHERE channel = ? AND recipient = ? AND text = ? AND at >= ? AND seen != ? "
            "ORDER BY id LIMIT 1",
            (channel, recipient, text, since, copy),
        )
        if not rows:
            return False
        entry, seen = rows[0]
        if seen:
            self._db.write("DELETE FROM sent WHERE id = ?", (entry,))
        else:
            self._db.write("UPDATE sent SET seen = ? WHERE id = ?", (copy, entry))
        return True

    def for_channel(self, channel: str, window_seconds: float) -> SentRecord:
        """The record of texts sent on ``channel`` that the channel uses: entries count for ``window_seconds``."""
        return SentRecord(self, self._db.now, channel, window_seconds)


class SentRecord:
    """One channel's view of the record of sent texts (``channels.base.SentTexts``)."""

    def __init__(self, table: SentTable, clock: Callable[[], float], channel: str, window_seconds: float) -> None:
        self._table = table
        self._clock = clock
        self._channel = channel
        self._window = window_seconds

    def record(self, recipient: str, text: str) -> None:
        self._table.record_sent(self._channel, recipient, text, self._window)

    def take_echo(self, sender: str, text: str, from_me: bool = False) -> bool:
        since = self._clock() - self._window
        return self._table.take_sent(self._channel, sender, text, since, from_me)
