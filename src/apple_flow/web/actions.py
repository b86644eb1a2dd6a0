"""Approve and Deny from the page: the same ``Approvals`` rules as the iMessage commands (one decision, expiry),
decided on behalf of the sender who asked, by the token holder (the Mac's owner), or by that sender in a session
a login link texted to them opened (``sender``: then only their own requests, as by text). An approved task is
handed to the daemon to run like one approved by text; its answer goes to the sender over their channel."""

from __future__ import annotations

import secrets
from collections.abc import Callable

from apple_flow.daemon.deciding.approvals import ApprovalDecision, Approvals
from apple_flow.daemon.store import Approval, Store


class WebDecisions:
    def __init__(self, store: Store, approvals: Approvals, run_approved: Callable[[Approval], None]) -> None:
        self._store = store
        self._approvals = approvals
        self._run_approved = run_approved

    def pending(self, sender: str | None = None) -> list[Approval]:
        """Every sender's pending requests, or ``sender``'s only."""
        senders = self._senders() if sender is None else [sender]
        return [a for who in senders for a in self._approvals.pending(who)]

    def _senders(self) -> list[str]:
        return list(dict.fromkeys(a.sender for a in self._store.approvals.all_pending()))

    def approve(self, approval_id: str, notes: str = "", sender: str | None = None) -> tuple[Approval | None, str]:
        """(the approved request, "") when it now runs; (None, why not) otherwise. ``sender``: decided by that
        sender, who may decide only their own requests (another's is as unknown to them as by text)."""
        found = self._find(approval_id, sender)
        if found is None:
            return None, f"No approval request {approval_id}."
        # A decision of its own for every click: "web:<approval>" alone would let a second click replay the first
        # (the replay rule that lets a message redo its own decision after a crash).
        # An agent's question runs nothing: approving it tells the agent (with the notes, if any).
        decision = self._decide(
            lambda: self._approvals.approve(found.sender, found.id, _decided_by(), notes.strip()),
            queue_run=not found.is_question,
        )
        if decision.approval is None:
            return None, decision.message
        if not decision.approval.is_question:
            self._run_approved(decision.approval)
        return decision.approval, ""

    def deny(self, approval_id: str, sender: str | None = None) -> tuple[bool, str]:
        found = self._find(approval_id, sender)
        if found is None:
            return False, f"No approval request {approval_id}."
        decision = self._decide(lambda: self._approvals.deny(found.sender, found.id, _decided_by()))
        return decision.approval is not None, decision.message

    def _find(self, approval_id: str, sender: str | None) -> Approval | None:
        found = self._store.approvals.get_approval(approval_id)
        return found if found is not None and (sender is None or found.sender == sender) else None

    def _decide(self, decide: Callable[[], ApprovalDecision], queue_run: bool = False) -> ApprovalDecision:
        """A decision, recorded; decided again when a text decided the request in between (it then says so).
        ``queue_run``: an approval's run is recorded with it, so that a restart before the run ends redoes it."""
        decision = decide()
        with self._store.transaction():
            recorded = self._store.approvals.record_decisions(decision.decided)
            if recorded and queue_run and decision.approval is not None:
                self._store.web_runs.queue_web_run(decision.approval.id)
        if recorded:
            return decision
        again = decide()
        return again if not again.decided else ApprovalDecision(None, "The request changed meanwhile. Reload the page.")


def _decided_by() -> str:
    return f"web:{secrets.token_hex(6)}"
