"""The conversation history the daemon lends its connector: read from the store at once, but an exchange the
connector appends after a turn waits for the daemon to record that turn's reply, and is written in the same
transaction. A crash in between then redoes the turn without leaving its first run's exchange behind."""

from __future__ import annotations

import threading

from apple_flow.connectors.base import Exchange
from apple_flow.daemon.store import Store


class TurnHistory:
    """A ``HistoryStore`` over the daemon's store (one turn at a time per thread, as the scheduler runs them)."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._pending: dict[str, list[Exchange]] = {}
        self._lock = threading.Lock()

    def history(self, thread_id: str, limit: int) -> list[Exchange]:
        return self._store.history(thread_id, limit)

    def append(self, thread_id: str, exchange: Exchange) -> None:
        with self._lock:
            self._pending.setdefault(thread_id, []).append(exchange)

    def clear(self, thread_id: str) -> None:
        with self._lock:
            self._pending.pop(thread_id, None)
        self._store.clear(thread_id)

    def commit(self, thread_id: str) -> None:
        """Writes the thread's waiting exchanges (call inside the transaction that records the reply)."""
        with self._lock:
            waiting = self._pending.pop(thread_id, [])
        for exchange in waiting:
            self._store.append(thread_id, exchange)

    def discard(self, thread_id: str) -> None:
        with self._lock:
            self._pending.pop(thread_id, None)
