"""Requests waiting for the sender's yes (a planned task): pending until approved, denied or expired; a decision
names the message that made it, to replay it after a crash (``daemon.approvals`` decides, this records)."""

from __future__ import annotations

from collections.abc import Sequence

from apple_flow.daemon.store.database import Database
from apple_flow.daemon.store.records import Approval


class ApprovalTable:
    def __init__(self, db: Database) -> None:
        self._db = db

    def add_approval(self, approval: Approval) -> None:
        self._db.write(
            "INSERT INTO approvals (id, sender, task, plan, workspace, state, created_at, expires_at, decided_at, "
            "decided_by, extra, kind) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                approval.id, approval.sender, approval.task, approval.plan, approval.workspace, approval.state,
                approval.created_at, approval.expires_at, approval.decided_at, approval.decided_by, approval.extra,
                approval.kind,
            ),
        )

    def get_approval(self, approval_id: str) -> Approval | None:
        rows = self._db.rows("SELECT * FROM approvals WHERE id = ?", (approval_id,))
        return Approval(**dict(rows[0])) if rows else None

    def pending_or_decided_by(self, sender: str, decided_by: str) -> list[Approval]:
        """The sender's pending requests (expired ones too) and those the message ``decided_by`` ("channel:rowid")
        decided, in one read."""
        rows = self._db.rows(
            "SELECT * FROM approvals WHERE sender = ? AND (state = 'pending' OR decided_by = ?) ORDER BY created_at",
            (sender, decided_by),
        )
        return [Approval(**dict(row)) for row in rows]

    def all_pending(self) -> list[Approval]:
        """Every sender's pending requests (expired ones too: the caller compares with its clock)."""
        rows = self._db.rows("SELECT * FROM approvals WHERE state = 'pending' ORDER BY created_at")
        return [Approval(**dict(row)) for row in rows]

    def pending(self, sender: str) -> list[Approval]:
        rows = self._db.rows(
            "SELECT * FROM approvals WHERE sender = ? AND state = 'pending' ORDER BY created_at", (sender,)
        )
        return [Approval(**dict(row)) for row in rows]

    def record_decisions(self, decided: Sequence[Approval]) -> bool:
        """Records decisions (requests in their new state) on pending requests, all or none: False, and nothing
        written, when one of them was decided already (e.g. by a click on the web page a moment before)."""
        with self._db.transaction():  # BEGIN IMMEDIATE: nobody writes between the check and the updates
            for approval in decided:
                rows = self._db.rows("SELECT state FROM approvals WHERE id = ?", (approval.id,))
                if not rows or rows[0][0] != "pending":
                    return False
            for approval in decided:
                self._db.write(
                    "UPDATE approvals SET state = ?, decided_at = ?, decided_by = ?, extra = ? WHERE id = ?",
                    (approval.state, approval.decided_at, approval.decided_by, approval.extra, approval.id),
                )
            return True

    def note_messages(self, approval_id: str, message_ids: Sequence[str]) -> None:
        """The channel's ids of the messages that presented ``approval_id`` (a tapback names one of them)."""
        with self._db.transaction():
            for message_id in message_ids:
                self._db.write(
                    "INSERT OR REPLACE INTO approval_messages (message_id, approval_id) VALUES (?, ?)",
                    (message_id, approval_id),
                )

    def of_message(self, message_id: str) -> Approval | None:
        """The request whose plan the message ``message_id`` presented, or None."""
        rows = self._db.rows(
            "SELECT a.* FROM approvals AS a JOIN approval_messages AS m ON m.approval_id = a.id "
            "WHERE m.message_id = ?", (message_id,),
        )
        return Approval(**dict(rows[0])) if rows else None

    def reopen(self, approval_id: str) -> None:
        """An approval whose message was unsent before its task ran is pending again."""
        self._db.write(
            "UPDATE approvals SET state = 'pending', decided_at = NULL, decided_by = NULL, extra = NULL "
            "WHERE id = ? AND state = 'approved'",
            (approval_id,),
        )
