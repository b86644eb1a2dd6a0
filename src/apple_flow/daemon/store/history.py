"""Each sender's conversation: the exchanges a connector is given as context, the newest ``HISTORY_KEEP`` kept."""

from __future__ import annotations

from apple_flow.connectors.base import Exchange
from apple_flow.daemon.store.database import Database

HISTORY_KEEP = 50  # exchanges kept per thread; connectors inject far fewer


class HistoryTable:
    def __init__(self, db: Database) -> None:
        self._db = db

    def recent_exchanges(self, thread_id: str, limit: int) -> list[Exchange]:
        """The newest ``limit`` exchanges, oldest first."""
        if limit <= 0:
            return []
        rows = self._db.rows(
            "SELECT user, assistant FROM history WHERE thread = ? ORDER BY id DESC LIMIT ?", (thread_id, limit)
        )
        return [Exchange(user=row[0], assistant=row[1]) for row in reversed(rows)]

    def append_exchange(self, thread_id: str, exchange: Exchange) -> None:
        with self._db.transaction():
            self._db.write(
                "INSERT INTO history (thread, user, assistant, at) VALUES (?, ?, ?, ?)",
                (thread_id, exchange.user, exchange.assistant, self._db.now()),
            )
            self._db.write(
                "DELETE FROM history WHERE thread = ? AND id NOT IN "
                "(SELECT id FROM history WHERE thread = ? ORDER BY id DESC LIMIT ?)",
                (thread_id, thread_id, HISTORY_KEEP),
            )

    def clear_history(self, thread_id: str) -> None:
        self._db.write("DELETE FROM history WHERE thread = ?", (thread_id,))
