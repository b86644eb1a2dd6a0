"""What each run did, for the web page: the agent's stream-json events, size-bounded per run (``daemon.run_log``),
those of the newest runs only."""

from __future__ import annotations

import json
from typing import Any

from apple_flow.daemon.store.database import Database
from apple_flow.daemon.store.records import RunEvent


class RunEventTable:
    def __init__(self, db: Database) -> None:
        self._db = db

    def add(self, run_id: str, event_type: str, body: str, budget: int, keep_runs: int) -> bool:
        """Keeps one event of a run unless the run's events already take ``budget`` bytes (then it is counted as
        dropped). The first event of a run also forgets the events of runs older than the newest ``keep_runs``,
        so the table stays bounded. Returns whether the event was kept."""
        with self._db.transaction():
            used, count = self._db.rows(
                "SELECT COALESCE(SUM(LENGTH(body)), 0), COUNT(*) FROM run_events WHERE run_id = ?", (run_id,)
            )[0]
            if count == 0:
                self._db.write(
                    "DELETE FROM run_events WHERE run_id IN (SELECT id FROM runs ORDER BY started_at DESC, "
                    "rowid DESC LIMIT -1 OFFSET ?)",
                    (keep_runs,),
                )
            if used + len(body) > budget:
                self._db.write("UPDATE runs SET events_dropped = events_dropped + 1 WHERE id = ?", (run_id,))
                return False
            self._db.write(
                "INSERT INTO run_events (run_id, seq, at, type, body) VALUES (?, ?, ?, ?, ?)",
                (run_id, count + 1, self._db.now(), event_type, body),
            )
            return True

    def facts(self, run_ids: list[str]) -> dict[str, dict[str, dict[str, Any]]]:
        """The ``start`` and ``result`` events of these runs, decoded: {run_id: {"start": {...}, "result": {...}}}
        (the figures a list of runs shows: backend, model, tokens)."""
        found: dict[str, dict[str, dict[str, Any]]] = {}
        for chunk in range(0, len(run_ids), 500):
            ids = run_ids[chunk : chunk + 500]
            marks = ",".join("?" * len(ids))
            rows = self._db.rows(
                f"SELECT run_id, type, body FROM run_events WHERE run_id IN ({marks}) AND type IN ('start', 'result')",
                tuple(ids),
            )
            for run_id, event_type, body in rows:
                try:
                    event = json.loads(body)
                except ValueError:
                    continue
                if isinstance(event, dict):
                    found.setdefault(str(run_id), {})[str(event_type)] = event
        return found

    def of_run(self, run_id: str) -> list[RunEvent]:
        rows = self._db.rows("SELECT seq, at, type, body FROM run_events WHERE run_id = ? ORDER BY seq", (run_id,))
        return [RunEvent(*row) for row in rows]
