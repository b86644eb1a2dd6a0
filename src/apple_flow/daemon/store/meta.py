"""Small facts about the daemon itself, by key (e.g. the token its children carry, to find them after a kill -9)."""

from __future__ import annotations

from apple_flow.daemon.store.database import Database


class MetaTable:
    def __init__(self, db: Database) -> None:
        self._db = db

    def get_meta(self, key: str) -> str | None:
        rows = self._db.rows("SELECT value FROM meta WHERE key = ?", (key,))
        return str(rows[0][0]) if rows else None

    def set_meta(self, key: str, value: str) -> None:
        self._db.write(
            "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (key, value),
        )
