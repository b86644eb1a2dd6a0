"""Approval requests for tasks: created after a read-only planning turn, decided by the same sender only, with an
expiry. A decision remembers the message that made it, so replaying that message after a crash finds its own
decision instead of "already approved".

This module only reads the store: each decision comes back with the requests in their new state, which the
caller records (``ApprovalTable.record_decisions``) together with the message that decided them. A request decided by
someone else between the two (the web page and a text at once) makes that recording fail: decide again, and the
answer says it was already decided."""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Protocol

from apple_flow.daemon.store import Approval


class ApprovalRecords(Protocol):
    """The store's approval records (``store.approvals``), read-only."""

    def get_approval(self, approval_id: str) -> Approval | None: ...

    def pending(self, sender: str) -> list[Approval]: ...

    def pending_or_decided_by(self, sender: str, decided_by: str) -> list[Approval]: ...

    def of_message(self, message_id: str) -> Approval | None: ...


@dataclass(frozen=True)
class ApprovalDecision:
    approval: Approval | None  # set when the request may run (approve) or was denied (deny)
    message: str  # what to tell the sender
    decided: tuple[Approval, ...] = ()  # requests in their new state, to record with the message that decided them


def new_id() -> str:
    return f"req_{secrets.token_hex(4)}"


def new_question_id() -> str:
    return f"q_{secrets.token_hex(4)}"


class Approvals:
    def __init__(self, records: ApprovalRecords, ttl_minutes: int, clock: Callable[[], float] = time.time) -> None:
        self._records = records
        self._ttl = ttl_minutes * 60
        self._clock = clock

    def create(self, sender: str, task: str, plan: str, workspace: str) -> Approval:
        """A new pending request (not yet stored: the caller stores it together with the reply announcing it)."""
        now = self._clock()
        return Approval(
            id=new_id(), sender=sender, task=task, plan=plan, workspace=workspace, state="pending",
            created_at=now, expires_at=now + self._ttl, decided_at=None, decided_by=None, extra=None,
        )

    def ask(self, owner: str, question: str, details: str, timeout_seconds: float) -> Approval:
        """An agent's question to ``owner`` (``apple-flow mcp``'s ask_owner), open for ``timeout_seconds``; stored by
        the caller before it is texted, so that an answer finds it."""
        now = self._clock()
        return Approval(
            id=new_question_id(), sender=owner, task=question, plan=details, workspace="", state="pending",
            created_at=now, expires_at=now + timeout_seconds, decided_at=None, decided_by=None, extra=None,
            kind="question",
        )

    def answer(self, sender: str, text: str, decided_by: str) -> ApprovalDecision | None:
        """A plain reply of the sender's answers their newest open question with its text; None when they have none
        open (the message is then an ordinary one)."""
        pending, replayed = self._read(sender, decided_by, "answered")
        if replayed:  # this very message answered it before a restart
            return ApprovalDecision(replayed[0], answered_text(replayed[0]))
        questions = [a for a in pending if a.is_question]
        if not questions:
            return None
        answered = self._decide(questions[-1], "answered", decided_by, text)
        return ApprovalDecision(answered, answered_text(answered), (answered,))

    @property
    def ttl_minutes(self) -> int:
        return self._ttl // 60

    def pending(self, sender: str) -> list[Approval]:
        now = self._clock()
        return [a for a in self._records.pending(sender) if a.expires_at > now]

    def _find(
        self, sender: str, approval_id: str | None, verb: str, pending: list[Approval]
    ) -> tuple[Approval | None, str]:
        """The request ``approval_id`` names (None: the sender's only ``pending`` one), or why there is none."""
        if approval_id is None:
            if len(pending) == 1:
                return pending[0], ""
            if not pending:
                return None, "You have no pending approval requests."
            ids = ", ".join(a.id for a in pending)
            return None, f"Which one? Pending: {ids}. Reply `{verb} <id>`."
        found = self._records.get_approval(approval_id.strip().rstrip(".,!").lower())
        if found is None or found.sender != sender:
            # Someone else's request looks exactly like an unknown one: ids are not shared.
            hint = f" Pending: {', '.join(a.id for a in pending)}." if pending else " You have none pending."
            return None, f"No approval request {approval_id}.{hint}"
        return found, ""

    def approve(self, sender: str, approval_id: str | None, decided_by: str, extra: str = "") -> ApprovalDecision:
        pending, replayed = self._read(sender, decided_by, "approved")
        if replayed:
            return ApprovalDecision(replayed[0], "")  # this very message approved it before a restart: run it again
        found, error = self._find(sender, approval_id, "approve", pending)
        if found is None:
            return ApprovalDecision(None, error)
        refusal = self._refusal(found)
        if refusal:
            return ApprovalDecision(None, refusal)
        approved = self._decide(found, "approved", decided_by, extra or None)
        return ApprovalDecision(approved, "", (approved,))

    def deny(self, sender: str, approval_id: str | None, decided_by: str) -> ApprovalDecision:
        pending, replayed = self._read(sender, decided_by, "denied")
        if replayed:
            # Replayed after a restart.
            return ApprovalDecision(replayed[0], f"Denied {replayed[0].id}; nothing was changed.")
        found, error = self._find(sender, approval_id, "deny", pending)
        if found is None:
            return ApprovalDecision(None, error)
        refusal = self._refusal(found)
        if refusal:
            return ApprovalDecision(None, refusal)
        denied = self._decide(found, "denied", decided_by)
        if found.is_question:
            return ApprovalDecision(denied, f"Denied {found.id}: the agent is told.", (denied,))
        return ApprovalDecision(denied, f"Denied {found.id}; nothing was changed.", (denied,))

    def deny_all(self, sender: str, decided_by: str) -> ApprovalDecision:
        pending, replayed = self._read(sender, decided_by, "denied")
        if replayed:  # this very message denied them before a restart: say it again, record nothing new
            return ApprovalDecision(None, self._denied_all(replayed))
        denied = tuple(self._decide(a, "denied", decided_by) for a in pending)
        if not denied:
            return ApprovalDecision(None, "You have no pending approval requests.")
        return ApprovalDecision(None, self._denied_all(denied), denied)

    @staticmethod
    def _denied_all(denied: list[Approval] | tuple[Approval, ...]) -> str:
        return f"Denied {len(denied)} request(s): {', '.join(a.id for a in denied)}."

    def _decide(self, approval: Approval, state: str, decided_by: str, extra: str | None = None) -> Approval:
        return replace(approval, state=state, decided_at=self._clock(), decided_by=decided_by, extra=extra)

    def _read(self, sender: str, decided_by: str, state: str) -> tuple[list[Approval], list[Approval]]:
        """The sender's requests still pending (not expired), and those the message ``decided_by`` already brought
        to ``state`` (when it is handled again after a restart), in one read of the store."""
        now = self._clock()
        found = self._records.pending_or_decided_by(sender, decided_by)
        return ([a for a in found if a.state == "pending" and a.expires_at > now],
                [a for a in found if a.decided_by == decided_by and a.state == state])

    def _refusal(self, approval: Approval) -> str:
        if approval.state != "pending":
            return f"{approval.id} was already {approval.state}."
        if approval.expires_at <= self._clock() and approval.is_question:
            return f"{approval.id} timed out: the agent was told there was no answer."
        if approval.expires_at <= self._clock():
            return f"{approval.id} expired (requests last {self.ttl_minutes} minutes). Send the task again."
        return ""


def answered_text(question: Approval) -> str:
    return f"Passed your answer to {question.id} on to the agent."
