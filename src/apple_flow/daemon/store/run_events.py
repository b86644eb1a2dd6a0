"""What each run did, for the web page: the agent's stream-json events, size-bounded per run (the run log,
``daemon.running.turn_runner.RunLog``), those of the newest runs only."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from apple_flow.connectors.events import parse_line
from apple_flow.connectors.stream_events import Result, Start
from apple_flow.daemon.store.database import Database
from apple_flow.daemon.store.records import RunEvent, RunFacts


class RunEventTable:
    def __init__(self, db: Database) -> None:
        self._db = db

    def add_run_events(self, run_id: str, events: Sequence[tuple[str, str]], first_seq: int, dropped: int = 0,
            keep_runs: int | None = None) -> None:
        """Keeps a batch of a run's events, (type, body) numbered from ``first_seq``, and counts ``dropped`` more
        as dropped (over the run's budget, which the run log keeps), in one transaction. With ``keep_runs`` (the
        run's first batch) it also forgets the events of runs older than the newest ``keep_runs``, so the table
        stays bounded."""
        with self._db.transaction():
            if keep_runs is not None:
                self._db.write(
                    "DELETE FROM run_events WHERE run_id IN (SELECT id FROM runs ORDER BY started_at DESC, "
                    "rowid DESC LIMIT -1 OFFSET ?)",
                    (keep_runs,),
                )
            at = self._db.now()
            for seq, (event_type, body) in enumerate(events, start=first_seq):
                self._db.write(
                    "INSERT INTO run_events (run_id, seq, at, type, body) VALUES (?, ?, ?, ?, ?)",
                    (run_id, seq, at, event_type, body),
                )
            if dropped:
                self._db.write("UPDATE runs SET events_dropped = events_dropped + ? WHERE id = ?", (dropped, run_id))

    def facts(self, run_ids: list[str]) -> dict[str, RunFacts]:
        """The ``start`` and ``result`` events of these runs (the figures a list of runs shows: backend, model,
        tokens)."""
        found: dict[str, RunFacts] = {}
        for chunk in range(0, len(run_ids), 500):
            ids = run_ids[chunk : chunk + 500]
            marks = ",".join("?" * len(ids))
            rows = self._db.rows(
                f"SELECT run_id, type, body FROM run_events WHERE run_id IN ({marks}) AND type IN ('start', 'result')",
                tuple(ids),
            )
            for run_id, _, body in rows:
                event = parse_line(body)
                facts = found.get(str(run_id), RunFacts())
                if isinstance(event, Start):
                    found[str(run_id)] = replace(facts, start=event)
                elif isinstance(event, Result):
                    found[str(run_id)] = replace(facts, result=event)
        return found

    def of_run(self, run_id: str) -> list[RunEvent]:
        rows = self._db.rows("SELECT seq, at, type, body FROM run_events WHERE run_id = ? ORDER BY seq", (run_id,))
        return [RunEvent(*row) for row in rows]
