"""Escalation on the owner's word: an approved task whose apple-code run failed (its check still failing,
max turns, a context overflow, a guardrail, a rate limit, the timeout) may be run again, once the owner says
`escalate <run>`, on the other connector ``APPLE_FLOW_ESCALATE_CONNECTOR`` names (a cloud CLI, or Ollama). Local
first: nothing goes elsewhere unless that run got stuck and the owner asks.

Pure rules: which runs may be escalated, and what the replies say. The orchestrator applies them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from apple_flow.connectors.base import Status
from apple_flow.daemon.store import Run

# How a failed run ended that escalation may help with. Not: no model or no binary (the set-up is broken, not the
# task stuck), or stopped by the sender (state cancelled).
STUCK = frozenset({Status.CHECK_FAILED, Status.FAILED, Status.TIMED_OUT, Status.EMPTY, Status.CANCELLED})
_RUN = re.compile(r"^(?:run_)?([0-9a-f]{6})$", re.IGNORECASE)
_REQUEST = re.compile(r"^req_[0-9a-f]{8}$", re.IGNORECASE)
NOT_SET_UP = ("Escalation is not set up: the owner sets APPLE_FLOW_ESCALATE_CONNECTOR (e.g. claude-cli) to run a "
              "failed task again there.")


@dataclass(frozen=True)
class Escalation:
    connector: str  # where an escalated task runs
    window_seconds: float  # how long after its run ended a failed task may be escalated (the approval's lifetime)

    def offer(self, run_id: str) -> str:
        return f"Reply `escalate {run_id}` to run it again on {self.connector}."

    @staticmethod
    def stuck(state: str, status: Status | None) -> bool:
        """A finished apple-code run of an approved task that escalation may help with."""
        return state == "failed" and status in STUCK

    def refusal(self, run: Run, now: float) -> str | None:
        """Why ``run`` (the sender's) cannot be escalated, or None when it can."""
        if run.kind != "approve" or run.approval is None:
            return f"{run.id} is not an approved task's run; only those can be escalated."
        if run.state == "running":
            return f"{run.id} is still running."
        status = _status(run.outcome)
        if not self.stuck(run.state, status):
            how = run.outcome or "no outcome"
            return f"{run.id} did not get stuck ({run.state}, {how}); only a failed run can be escalated."
        if run.finished_at is not None and now - run.finished_at > self.window_seconds:
            minutes = round(self.window_seconds / 60)
            return f"{run.id} ended more than {minutes} minutes ago; send the task again to redo it."
        return None


def run_key(target: str) -> str | None:
    """``run_ab12cd`` (or ``ab12cd``) as the store names runs; None when ``target`` is not a run id."""
    match = _RUN.match(target.strip().rstrip(".,!"))
    return f"run_{match.group(1).lower()}" if match else None


def request_key(target: str) -> str | None:
    """``req_...`` as the store names approval requests; None when ``target`` is not one."""
    text = target.strip().rstrip(".,!").lower()
    return text if _REQUEST.match(text) else None


def _status(value: str | None) -> Status | None:
    try:
        return Status(value) if value is not None else None
    except ValueError:
        return None
