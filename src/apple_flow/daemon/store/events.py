"""What happened, for ``health``, the logs and the web page: start, stop, send failures, files, errors."""

from __future__ import annotations

from apple_flow.daemon.store.database import Database
from apple_flow.daemon.store.records import Event


class EventTable:
    def __init__(self, db: Database) -> None:
        self._db = db

    def log(self, kind: str, detail: str, sender: str | None = None) -> None:
        self._db.write(
            "INSERT INTO events (at, kind, sender, detail) VALUES (?, ?, ?, ?)", (self._db.now(), kind, sender, detail)
        )

    def count_events(self, kind: str) -> int:
        return int(self._db.rows("SELECT COUNT(*) FROM events WHERE kind = ?", (kind,))[0][0])

    def recent_events(self, limit: int = 50, kind: str | None = None) -> list[Event]:
        """The newest ``limit`` events (of ``kind``), oldest first."""
        if kind is None:
            rows = self._db.rows("SELECT at, kind, sender, detail FROM events ORDER BY id DESC LIMIT ?", (limit,))
        else:
            rows = self._db.rows(
                "SELECT at, kind, sender, detail FROM events WHERE kind = ? ORDER BY id DESC LIMIT ?", (kind, limit)
            )
        return [Event(*row) for row in reversed(rows)]
