"""Messages that came while the Mac slept (older than the replay window, within the catch-up window): kept, not
run, listed to their sender once the backlog is read; `run` reads the sender's newest listing
(``daemon.catch_up``)."""

from __future__ import annotations

from apple_flow.daemon.store.database import Database
from apple_flow.daemon.store.records import Held


class HeldTable:
    def __init__(self, db: Database) -> None:
        self._db = db

    def hold(self, channel: str, rowid: int, sender: str, reply_to: str, text: str, sent_at: float,
             forgeable: bool = False) -> None:
        """Keeps a late message (once: a message read again after a restart is not kept twice). ``forgeable``: it
        came by SMS or RCS."""
        self._db.write(
            "INSERT OR IGNORE INTO held (channel, rowid, sender, reply_to, text, sent_at, forgeable) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (channel, rowid, sender, reply_to, text, sent_at, int(forgeable)),
        )

    def unlisted(self) -> list[tuple[str, str]]:
        """(sender, where their listing goes) for each sender with late messages not listed yet."""
        rows = self._db.rows(
            "SELECT sender, reply_to FROM held WHERE id IN "
            "(SELECT MAX(id) FROM held WHERE batch IS NULL GROUP BY sender) ORDER BY id"
        )
        return [(str(row[0]), str(row[1])) for row in rows]

    def list_new(self, sender: str) -> list[Held]:
        """The sender's late messages not listed yet become their newest listing, which is returned."""
        with self._db.transaction():
            newest = self._db.rows("SELECT COALESCE(MAX(batch), 0) FROM held")[0][0]
            self._db.write("UPDATE held SET batch = ? WHERE sender = ? AND batch IS NULL", (newest + 1, sender))
        return self.listing(sender)

    def listing(self, sender: str) -> list[Held]:
        """The sender's newest listing of late messages, numbered from 1 (the oldest)."""
        rows = self._db.rows(
            "SELECT text, sent_at, forgeable FROM held WHERE sender = ? AND batch = "
            "(SELECT MAX(batch) FROM held WHERE sender = ?) ORDER BY rowid, id", (sender, sender),
        )
        return [Held(number, str(row[0]), float(row[1]), bool(row[2])) for number, row in enumerate(rows, start=1)]
