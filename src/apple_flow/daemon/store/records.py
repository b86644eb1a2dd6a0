"""The records the store's tables read and write: plain frozen values, one per row kind."""

from __future__ import annotations

from dataclasses import dataclass

from apple_flow.connectors.base import Exchange, TurnOutcome
from apple_flow.connectors.stream_events import Result, Start


@dataclass(frozen=True)
class MessageRecord:
    channel: str
    rowid: int
    sender: str
    text: str
    state: str
    reply: str | None
    note: str | None


@dataclass(frozen=True)
class FailedSend:
    """A reply that did not go out (state ``send_failed``)."""

    sender: str
    request: str  # the message it answered
    reason: str
    at: float


@dataclass(frozen=True)
class Run:
    id: str
    sender: str
    kind: str
    workspace: str
    request: str
    state: str
    result: str | None
    started_at: float
    finished_at: float | None
    message: str | None = None  # "channel:rowid" of the message the run answers
    events_dropped: int = 0  # events not kept once the run's share of the store was used up
    outcome: str | None = None  # how the agent's turn ended (a connectors.base.Status value)
    files_changed: str | None = None  # JSON list, as the agent reported
    commands_run: int | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    backend: str | None = None  # what answered: the connector, with the backend and model the agent reported
    tokens_estimated: int | None = None  # 1: the token counts are the agent's estimate, not the model's count
    approval: str | None = None  # the approval request an approved task's run (or its escalation) carried out
    escalated_from: str | None = None  # an escalation: the failed run it runs again on another connector


@dataclass(frozen=True)
class FinishedTurn:
    """A turn that has run: what to send and what to record of it, written together by ``Store.record_turn``."""

    reply: str | None  # None: send nothing (the turn was cancelled and the sender already told)
    run_state: str  # done | failed | blocked | cancelled
    run_result: str  # what the run row keeps: the agent's text, or the failure
    outcome: TurnOutcome | None = None  # the connector's, when it gave one
    exchange: Exchange | None = None  # the conversation's new exchange, to keep
    approval: Approval | None = None  # a new request the reply announces
    # The files that go with the reply: (as the answer named it, its path), checked (``deciding.files_to_send``).
    files: tuple[tuple[str, str], ...] = ()
    backend: str | None = None  # what answered (see ``Run.backend``)


@dataclass(frozen=True)
class ReplyFile:
    """A file a reply names, not sent yet (``ReplyFiles.unsent``)."""

    id: int
    recipient: str
    sender: str
    workspace: str
    shown: str
    path: str


@dataclass(frozen=True)
class RunEvent:
    seq: int
    at: float
    type: str
    body: str  # JSON


@dataclass(frozen=True)
class RunFacts:
    """What a list of runs shows of each from its agent's events: backend, model, tokens."""

    start: Start | None = None
    result: Result | None = None


@dataclass(frozen=True)
class Approval:
    id: str
    sender: str
    task: str
    plan: str
    workspace: str
    state: str
    created_at: float
    expires_at: float
    decided_at: float | None
    decided_by: str | None
    extra: str | None
    #: task: a planned task that runs once approved; question: an agent's question to the owner (ask_owner), which
    #: runs nothing: approved, denied, answered (a plain reply, its text in ``extra``) or left to time out.
    kind: str = "task"

    @property
    def is_question(self) -> bool:
        return self.kind == "question"


@dataclass(frozen=True)
class Event:
    at: float
    kind: str
    sender: str | None
    detail: str


@dataclass(frozen=True)
class Held:
    """A message from while the Mac slept, kept for `run`: its number in its sender's listing (1 the oldest)."""

    number: int
    text: str
    sent_at: float  # when the sender sent it (chat.db's date)
    forgeable: bool = False  # came by SMS or RCS (taken with APPLE_FLOW_ALLOW_SMS): its sender may be forged
