"""Tasks approved on the web page: no message that a restart handles again carries them, so each is kept here from
the approval on ('queued'), its answer recorded before it is sent ('replied'), then 'sent'; a restart redoes what
is missing, as it does for a message."""

from __future__ import annotations

from apple_flow.daemon.store.database import Database
from apple_flow.daemon.store.records import Approval


class WebRunTable:
    def __init__(self, db: Database) -> None:
        self._db = db

    def queue_web_run(self, approval_id: str) -> None:
        """A request approved on the web page is to run (recorded with the decision, in its transaction)."""
        self._db.write(
            "INSERT INTO web_runs (approval_id, state, updated_at) VALUES (?, 'queued', ?) "
            "ON CONFLICT (approval_id) DO UPDATE SET state = 'queued', reply = NULL, updated_at = excluded.updated_at",
            (approval_id, self._db.now()),
        )

    def record_web_reply(self, approval_id: str, reply: str | None) -> None:
        """Its run's answer, before it is sent (``None``: nothing to send, e.g. cancelled)."""
        self._db.write(
            "UPDATE web_runs SET state = ?, reply = ?, updated_at = ? WHERE approval_id = ?",
            ("replied" if reply is not None else "sent", reply, self._db.now(), approval_id),
        )

    def mark_web_sent(self, approval_id: str) -> None:
        self._db.write(
            "UPDATE web_runs SET state = 'sent', updated_at = ? WHERE approval_id = ?", (self._db.now(), approval_id)
        )

    def unfinished(self) -> list[tuple[Approval, str | None]]:
        """At start-up: requests approved on the web page whose run did not finish (reply None: run it again) or
        whose answer was recorded but not sent (the reply), oldest first."""
        rows = self._db.rows(
            "SELECT a.*, w.state AS web_state, w.reply AS web_reply FROM web_runs w "
            "JOIN approvals a ON a.id = w.approval_id WHERE w.state != 'sent' ORDER BY w.updated_at, a.created_at"
        )
        found = []
        for row in rows:
            fields = dict(row)
            state, reply = fields.pop("web_state"), fields.pop("web_reply")
            found.append((Approval(**fields), reply if state == "replied" else None))
        return found
