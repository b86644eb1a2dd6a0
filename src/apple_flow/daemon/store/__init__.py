"""The daemon's durable state: one SQLite database (``Database``: the connection, its lock, ``transaction()``, the
migrations) and one small table class per concern over it, gathered in ``Store``. The records they read and write
are in ``records``. A channel keeps its decisions about copies here (``copies``; the marks of a taken row go with its
message's first record).

Writes that belong together go in one ``store.transaction()``: a turn's record (``Store.record_turn``) is the
composition of the run's end, the conversation's new exchange and the approval its reply announces; the caller
adds the reply and the files it sends in the same transaction.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from apple_flow.daemon.store.approvals import ApprovalTable
from apple_flow.daemon.store.copies import CopyTable
from apple_flow.daemon.store.cursors import CursorTable
from apple_flow.daemon.store.database import Database, StoreError
from apple_flow.daemon.store.events import EventTable
from apple_flow.daemon.store.held import HeldTable
from apple_flow.daemon.store.history import HISTORY_KEEP, HistoryTable
from apple_flow.daemon.store.messages import MessageTable
from apple_flow.daemon.store.meta import MetaTable
from apple_flow.daemon.store.migrations import MIGRATIONS, SCHEMA_VERSION
from apple_flow.daemon.store.records import (
    Approval,
    Event,
    FailedSend,
    FinishedTurn,
    Held,
    MessageRecord,
    ReplyFile,
    Run,
    RunEvent,
    RunFacts,
)
from apple_flow.daemon.store.reply_files import WEB_REPLY_PREFIX, ReplyFileTable, message_reply, web_reply
from apple_flow.daemon.store.run_events import RunEventTable
from apple_flow.daemon.store.runs import RunTable
from apple_flow.daemon.store.sent import SentRecord, SentTable
from apple_flow.daemon.store.web_logins import WebLoginTable
from apple_flow.daemon.store.web_runs import WebRunTable

__all__ = [
    "HISTORY_KEEP", "MIGRATIONS", "SCHEMA_VERSION", "WEB_REPLY_PREFIX", "Approval", "Database", "Event",
    "FailedSend", "FinishedTurn", "Held", "MessageRecord", "ReplyFile", "Run", "RunEvent", "RunFacts", "SentRecord",
    "Store",
    "StoreError", "message_reply", "web_reply",
]


class Store:
    """The database and its tables."""

    def __init__(self, path: Path, clock: Callable[[], float] = time.time) -> None:
        self.db = Database(path, clock)
        self.meta = MetaTable(self.db)
        self.cursors = CursorTable(self.db)
        self.copies = CopyTable(self.db)
        self.messages = MessageTable(self.db, self.copies)
        self.reply_files = ReplyFileTable(self.db)
        self.sent = SentTable(self.db)
        self.history = HistoryTable(self.db)
        self.runs = RunTable(self.db)
        self.run_events = RunEventTable(self.db)
        self.approvals = ApprovalTable(self.db)
        self.web_runs = WebRunTable(self.db)
        self.web_logins = WebLoginTable(self.db, self.meta)
        self.events = EventTable(self.db)
        self.held = HeldTable(self.db)
        # All writes inside happen together or not at all; nests (inner blocks join the outer one).
        self.transaction = self.db.transaction

    @property
    def path(self) -> Path:
        return self.db.path

    def now(self) -> float:
        """The store's clock (what it stamps rows with)."""
        return self.db.now()

    def record_turn(self, sender: str, run_id: str, turn: FinishedTurn) -> None:
        """A finished turn's record: the run's end and outcome, the conversation's new exchange, the request its
        reply announces; together (the caller records the reply itself, and its files, in the same transaction)."""
        with self.db.transaction():
            self.runs.finish_run(run_id, turn)
            if turn.exchange is not None:
                self.history.append_exchange(sender, turn.exchange)
            if turn.approval is not None:
                self.approvals.add_approval(turn.approval)

    def close(self) -> None:
        self.db.close()
