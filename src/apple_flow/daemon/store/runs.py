"""Each turn the agent ran: who asked what, where, how it ended (the connector's typed outcome) and what answered;
for ``history``, ``usage``, ``status`` and the web page."""

from __future__ import annotations

import json
from typing import Any

from apple_flow.daemon.store.database import Database
from apple_flow.daemon.store.records import FinishedTurn, Run


class RunTable:
    def __init__(self, db: Database) -> None:
        self._db = db

    def start_run(
        self, run_id: str, sender: str, kind: str, workspace: str, request: str, message: str | None = None,
        approval: str | None = None, escalated_from: str | None = None,
    ) -> None:
        """A run begins (``message``: "channel:rowid" of the message it answers; ``approval``: the request an
        approved task carries out; ``escalated_from``: the failed run an escalation runs again)."""
        self._db.write(
            "INSERT INTO runs (id, sender, kind, workspace, request, state, started_at, message, approval, "
            "escalated_from) VALUES (?, ?, ?, ?, ?, 'running', ?, ?, ?, ?)",
            (run_id, sender, kind, workspace, request, self._db.now(), message, approval, escalated_from),
        )

    def finish_run(self, run_id: str, turn: FinishedTurn) -> None:
        """The run's end and outcome, as the turn finished."""
        outcome = turn.outcome
        usage = outcome.usage if outcome is not None else None
        self._db.write(
            "UPDATE runs SET state = ?, result = ?, finished_at = ?, outcome = ?, files_changed = ?, "
            "commands_run = ?, input_tokens = ?, output_tokens = ?, backend = ?, tokens_estimated = ? "
            "WHERE id = ?",
            (
                turn.run_state, turn.run_result, self._db.now(),
                outcome.status.value if outcome is not None else None,
                json.dumps(list(outcome.files_changed)) if outcome is not None else None,
                outcome.commands_run if outcome is not None else None,
                usage.input_tokens if usage is not None else None,
                usage.output_tokens if usage is not None else None,
                turn.backend,
                int(usage.estimated) if usage is not None else None,
                run_id,
            ),
        )

    def get_run(self, run_id: str) -> Run | None:
        rows = self._db.rows("SELECT * FROM runs WHERE id = ?", (run_id,))
        return Run(**dict(rows[0])) if rows else None

    def of_sender(self, sender: str, limit: int = 5) -> list[Run]:
        """The sender's newest runs, newest first."""
        rows = self._db.rows(
            "SELECT * FROM runs WHERE sender = ? ORDER BY started_at DESC, rowid DESC LIMIT ?", (sender, limit)
        )
        return [Run(**dict(row)) for row in rows]

    def search(self, sender: str, query: str = "", limit: int = 5) -> list[Run]:
        """The sender's runs, newest first; with ``query``, only those whose request or result contains it (any
        case, any script: compared casefolded)."""
        needle = query.strip().casefold()
        where = "sender = ?" + (" AND instr(casefolded(request || char(10) || COALESCE(result, '')), ?) > 0"
                                if needle else "")
        args: tuple[Any, ...] = (sender, needle, limit) if needle else (sender, limit)
        rows = self._db.rows(f"SELECT * FROM runs WHERE {where} ORDER BY started_at DESC, rowid DESC LIMIT ?", args)
        return [Run(**dict(row)) for row in rows]

    def since(self, sender: str, since: float) -> list[Run]:
        """The sender's runs started at or after ``since``, oldest first."""
        rows = self._db.rows(
            "SELECT * FROM runs WHERE sender = ? AND started_at >= ? ORDER BY started_at, rowid", (sender, since)
        )
        return [Run(**dict(row)) for row in rows]

    def escalation_of(self, run_id: str) -> Run | None:
        """The latest run that escalated ``run_id`` (ran it again on another connector), or None."""
        rows = self._db.rows(
            "SELECT * FROM runs WHERE escalated_from = ? ORDER BY started_at DESC, rowid DESC LIMIT 1", (run_id,)
        )
        return Run(**dict(rows[0])) if rows else None

    def of_approval(self, approval_id: str) -> list[Run]:
        """The runs that carried out an approval request (and escalated it), newest first."""
        rows = self._db.rows(
            "SELECT * FROM runs WHERE approval = ? ORDER BY started_at DESC, rowid DESC", (approval_id,)
        )
        return [Run(**dict(row)) for row in rows]

    def recent_runs(self, limit: int = 50) -> list[Run]:
        """Every sender's runs, newest first."""
        rows = self._db.rows("SELECT * FROM runs ORDER BY started_at DESC, rowid DESC LIMIT ?", (limit,))
        return [Run(**dict(row)) for row in rows]

    def interrupt_running(self) -> int:
        """At start-up: runs still 'running' were cut short by a crash or kill."""
        cursor = self._db.write(
            "UPDATE runs SET state = 'interrupted', finished_at = ?, result = 'interrupted by a daemon restart' "
            "WHERE state = 'running'",
            (self._db.now(),),
        )
        return cursor.rowcount
