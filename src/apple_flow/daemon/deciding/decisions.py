"""The plain records the orchestrator decides and the runtime applies: ``Ignore``, ``Hold``, ``Reply`` or a
``Turn`` for the agent, and the ``View`` of what runs now that a decision may read."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path

from apple_flow.daemon.deciding.commands import Kind
from apple_flow.daemon.store import Approval


@dataclass(frozen=True)
class Queued:
    """One of the sender's turns waiting to run (it has no run id yet)."""

    request: str
    approval: Approval | None = None  # an approved task waiting to be carried out (or escalated)


@dataclass(frozen=True)
class View:
    """What runs now, as the runtime saw it when the message came."""

    running: tuple[str, float] | None = None  # the sender's running turn: (its request, when it started)
    running_run: str | None = None  # that turn's run id, once it has one
    queued: tuple[Queued, ...] = ()  # the sender's turns waiting to run, in the order they will run
    connector_status: str = "not checked yet"
    readiness: str = ""  # what the channel needs before reading, as found (the iMessage channel: its permissions)


@dataclass(frozen=True)
class Ignore:
    reason: str


@dataclass(frozen=True)
class Hold:
    """A message from while the Mac slept: kept, not run; its sender hears of it once the backlog is read."""


@dataclass(frozen=True)
class Reply:
    text: str
    decided: tuple[Approval, ...] = ()  # requests this message decided (new state), recorded with the reply
    clear_history: bool = False  # forget the sender's conversation
    cancel: bool = False  # stop the sender's running turn
    cancel_run: str | None = None  # with ``cancel``: only if the running turn is this run
    drop_queued: bool = False  # drop the sender's turns waiting to run (recorded as not run, with this reply)
    login_link: str | None = None  # the secret of the web login link this reply holds, recorded with it


@dataclass(frozen=True)
class Turn:
    kind: Kind  # CHAT, IDEA, PLAN, TASK (the planning turn), APPROVE (the approved execution) or ESCALATE
    sender: str
    request: str
    prompt: str
    workspace: Path
    read_only: bool = False
    plan: bool = False
    ack: str | None = None  # sent at once, before the turn is queued
    approval: Approval | None = None  # APPROVE: the approved request
    decided: tuple[Approval, ...] = ()  # the approval, when this message decided it: recorded as it is taken
    wants_file: bool = False  # the user asked to be sent a file: the files the agent changed go if it names none
    verify: str | None = None  # APPROVE, ESCALATE: the workspace's check, which the work must pass
    connector: str | None = None  # the connector that runs it; None: the daemon's (ESCALATE: the escalation's)
    escalates: str | None = None  # ESCALATE: the failed run it runs again


# A task's turns: its plan (TASK), its approved work (APPROVE) and that work again (ESCALATE).
TASK_KINDS = frozenset({Kind.TASK, Kind.APPROVE, Kind.ESCALATE})


Decision = Ignore | Reply | Turn | Hold


@dataclass(frozen=True)
class LoginLinks:
    """How `web` answers, once the web page serves: with a one-time login link to ``base_url``."""

    base_url: str  # APPLE_FLOW_WEB_BASE_URL, else the page's address on this Mac
    minutes: int  # how long a link works
    mac_only: bool  # no base URL: the link opens on this Mac only
    channel_carries: bool  # the channel reaches the owner's own phone (``Channel.carries_links``; never a terminal)
    safari_note: str = ""  # the page's name does not open in Safari on this Mac: why, and the fix


def new_run_id() -> str:
    return f"run_{secrets.token_hex(3)}"
