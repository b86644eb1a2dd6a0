"""Decides what to do with each message, and what a finished turn means: policy first, then commands (answered at
once) or a turn for the agent; once the turn has run, its reply and what to record.

Deciding only: it reads the message, the store (through ``StateView``) and a ``View`` of what runs now, and
returns plain records (``Ignore``, ``Reply``, ``Turn``; ``Finished``) that the runtime applies. It writes nothing,
runs nothing and calls nothing back; it knows no threads, queues or channels.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

from apple_flow.channels.base import InboundMessage, Tapback
from apple_flow.connectors.base import CheckReport, Exchange, Status, TurnOutcome
from apple_flow.daemon import failures
from apple_flow.daemon.approvals import ApprovalRecords, Approvals
from apple_flow.daemon.checks import Checks
from apple_flow.daemon.commands import FAST, HELP_TEXT, Command, Kind, parse
from apple_flow.daemon.escalation import NOT_SET_UP, Escalation, request_key, run_key
from apple_flow.daemon.outbox import ATTACH_HINT, asks_for_file, take_attach_lines
from apple_flow.daemon.policy import Policy
from apple_flow.daemon.reports import HISTORY_ENTRIES, clip, history_reply, usage_reply, usage_since
from apple_flow.daemon.store import Approval, Event, FailedSend, FinishedTurn, Held, Run
from apple_flow.daemon.workspaces import WorkspaceError, Workspaces
from apple_flow.times import duration, moment

log = logging.getLogger(__name__)

PLAN_PROMPT = (
    "Make a short numbered plan (at most 6 steps) for the task below. Do not change anything now: read what you "
    "need, then name the files you would change and how.\n\nTask: {task}"
)
EXECUTE_PROMPT = "Carry out this task in the workspace.\n\nTask: {task}\n\nPlan agreed with the user:\n{plan}"
IDEA_PROMPT = "Brainstorm a few concrete ideas. Do not change any files.\n\n{body}"
READONLY_PLAN_PROMPT = "Make a step-by-step plan. Do not change any files.\n\n{body}"
# The request of a message that is only files (the note on the files follows it in the prompt).
FILES_ONLY_REQUEST = "I sent you only files, no text. Look at them and tell me briefly what each one is."
RECENT_FOR_ESCALATE = 10  # a bare `escalate` looks for the latest task run among the sender's last runs
UNDELIVERED_WINDOW = 24 * 3600  # how far back `health` and `status` report replies that did not go out
# What a message that came by SMS or RCS (APPLE_FLOW_ALLOW_SMS) can never do: anyone can send one under your number.
DECIDING = frozenset({Kind.APPROVE, Kind.DENY, Kind.DENY_ALL, Kind.CANCEL, Kind.WEB})  # WEB: a login link approves
FORGEABLE_REFUSAL = (
    "{name} is not taken by SMS or RCS: anyone can send a text under your number. Send it by iMessage, or use the "
    "web page."
)
# Events the runtime records for SMS and RCS messages it did not act on (counted in `health`).
FORGEABLE_EVENT = "sms_refused"


class MessageReads(Protocol):
    """What the orchestrator reads of the store's messages."""

    def count(self, state: str | None = None) -> int: ...

    def failed_sends(self, since: float, sender: str | None = None) -> tuple[int, FailedSend | None]: ...


class EventReads(Protocol):
    """What the orchestrator (and the health checks) read of the store's events."""

    def count(self, kind: str) -> int: ...

    def recent(self, limit: int = 50, kind: str | None = None) -> list[Event]: ...


class RunReads(Protocol):
    """What the orchestrator reads of the store's runs."""

    def get(self, run_id: str) -> Run | None: ...

    def of_sender(self, sender: str, limit: int = 5) -> list[Run]: ...

    def search(self, sender: str, query: str = "", limit: int = 5) -> list[Run]: ...

    def since(self, sender: str, since: float) -> list[Run]: ...

    def escalation_of(self, run_id: str) -> Run | None: ...

    def of_approval(self, approval_id: str) -> list[Run]: ...


class HeldReads(Protocol):
    """What the orchestrator reads of the messages held from while the Mac slept."""

    def listing(self, sender: str) -> list[Held]: ...


class ReplyFileReads(Protocol):
    """What the orchestrator reads of the files replies sent."""

    def not_sent(self, sender: str, since: float) -> list[tuple[float, str, str]]: ...


class StateView(Protocol):
    """What the orchestrator reads from the store (and all it may do with it)."""

    @property
    def messages(self) -> MessageReads: ...

    @property
    def runs(self) -> RunReads: ...

    @property
    def events(self) -> EventReads: ...

    @property
    def approvals(self) -> ApprovalRecords: ...

    @property
    def held(self) -> HeldReads: ...

    @property
    def reply_files(self) -> ReplyFileReads: ...


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
    checks: str = ""  # what the channel's start-up checks found (the iMessage channel: its permissions)


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


Decision = Ignore | Reply | Turn | Hold


@dataclass(frozen=True)
class LoginLinks:
    """How `web` answers, once the web page serves: with a one-time login link to ``base_url``."""

    base_url: str  # APPLE_FLOW_WEB_BASE_URL, else the page's address on this Mac
    minutes: int  # how long a link works
    mac_only: bool  # no base URL: the link opens on this Mac only
    over_imessage: bool  # the channel is iMessage (a link is never printed on the console or sent another way)


def new_run_id() -> str:
    return f"run_{secrets.token_hex(3)}"


class Orchestrator:
    def __init__(
        self,
        store: StateView,
        policy: Policy,
        approvals: Approvals,
        workspaces: Workspaces,
        connector_name: str = "afm",
        reply_to_unknown: bool = False,
        clock: Callable[[], float] = time.time,
        run_links: str | None = None,
        send_files: bool = True,
        chat_read_only: bool = False,
        checks: Checks | None = None,
        escalation: Escalation | None = None,
    ) -> None:
        self._store = store
        self._policy = policy
        self._approvals = approvals
        self._workspaces = workspaces
        self._connector_name = connector_name
        self._reply_to_unknown = reply_to_unknown
        self._clock = clock
        self._run_links = run_links  # the web page's base URL: replies then end with a link to their run
        self._send_files = send_files  # the agent may send files back (ATTACH: lines)
        self._chat_read_only = chat_read_only  # plain chat only reads (the demo profile's small model)
        self._checks = checks  # the check approved tasks must pass; None: they are not checked
        self._escalation = escalation  # None: failed tasks are not offered elsewhere
        self._started = clock()
        self.login_links: LoginLinks | None = None  # set once the web page serves

    # ------------------------------------------------------------------------------------------- decide

    def decide(self, message: InboundMessage, message_ref: str, view: Callable[[], View]) -> Decision:
        """What to do with ``message``. ``view`` gives what runs now; it is asked only by the commands that show
        it (``status``, ``health``, ``cancel``), since a sender's queue can be long (a burst)."""
        if message.is_from_me:
            return Ignore("sent by this Mac")
        if message.late:  # a backlog is not a flood: held whatever its size, listed once
            return Hold() if self._policy.is_allowed(message.sender) else Ignore("unknown sender")
        verdict = self._policy.check(message.sender)
        if not verdict.allowed:
            if verdict.notify:
                return Reply("You are sending messages too fast; the ones over the limit are skipped. Wait a minute.")
            if verdict.reason == "unknown sender" and self._reply_to_unknown:
                return Reply("Sorry, this Mac does not take requests from you. Ask its owner to add you.")
            return Ignore(verdict.reason)
        if message.tapback is not None:
            if message.forgeable:  # a like or dislike decides an approval: never by SMS or RCS
                return Reply(FORGEABLE_REFUSAL.format(name="A tapback"))
            return self._tapback(message.tapback, message.sender, message_ref)
        return self._decide_allowed(message, message_ref, view)

    def _decide_allowed(
        self, message: InboundMessage, message_ref: str, view: Callable[[], View], held: bool = False
    ) -> Decision:
        command = parse(message.text)
        sender = message.sender
        if command.kind is Kind.RUN:
            if held:
                return Reply("That message was `run` itself: nothing to run.")
            return self._run_held(message, command.target, message_ref, view)
        if message.attachments and not command.body and command.kind not in FAST:
            command = Command(command.kind, FILES_ONLY_REQUEST, command.target, command.alias)
        if message.forgeable and command.kind in DECIDING:
            return Reply(FORGEABLE_REFUSAL.format(name=f"`{command.kind.value.replace('_', ' ')}`"))
        if command.kind is Kind.WEB:
            return self._login_link(message)
        if command.kind in FAST:
            return self._fast(command, sender, message_ref, view())
        try:
            workspace = self._workspaces.resolve(command.alias)
        except WorkspaceError as exc:
            return Reply(str(exc))
        if not command.body:
            name = command.kind.value
            return Reply(f"{name}: needs some text, e.g. `{name}: add a test for the parser`.")
        turn = self._turn(command, sender, workspace)
        # By SMS or RCS (taken with APPLE_FLOW_ALLOW_SMS): the sender may be forged, so the agent only reads.
        return replace(turn, read_only=True) if message.forgeable else turn

    def _tapback(self, tapback: Tapback, sender: str, message_ref: str) -> Decision:
        """A like or love on the message that presented the sender's plan approves it as `approve <id>` would; a
        dislike denies it. On any other message, or from anyone else, it does nothing."""
        approval = self._store.approvals.of_message(tapback.target)
        if approval is None or approval.sender != sender:
            return Ignore("tapback on no plan of the sender's")
        if tapback.approves:
            return self._approve(Command(Kind.APPROVE, target=approval.id), sender, message_ref)
        decision = self._approvals.deny(sender, approval.id, message_ref)
        return Reply(decision.message, decision.decided)

    def _run_held(
        self, message: InboundMessage, target: str | None, message_ref: str, view: Callable[[], View]
    ) -> Decision:
        """`run`: the last of the messages listed after the Mac woke, as if it came now; `run <n>`: that one."""
        held = self._store.held.listing(message.sender)
        if not held:
            return Reply("Nothing from while this Mac was asleep or offline is waiting to run.")
        number = int(target) if target is not None else held[-1].number
        chosen = next((item for item in held if item.number == number), None)
        if chosen is None:
            return Reply(f"There is no {number}: `run 1` to `run {held[-1].number}`, or `run` for the last one.")
        again = replace(message, text=chosen.text, attachments=(), late=False, tapback=None)
        return self._decide_allowed(again, message_ref, view, held=True)

    def _turn(self, command: Command, sender: str, workspace: Path) -> Turn:
        if command.kind is Kind.TASK:
            prompt = PLAN_PROMPT.format(task=command.body)
            return Turn(Kind.TASK, sender, command.body, prompt, workspace, read_only=True)
        if command.kind is Kind.IDEA:
            prompt = IDEA_PROMPT.format(body=command.body)
            return Turn(Kind.IDEA, sender, command.body, prompt, workspace, read_only=True)
        if command.kind is Kind.PLAN:
            prompt = READONLY_PLAN_PROMPT.format(body=command.body)
            return Turn(Kind.PLAN, sender, command.body, prompt, workspace, read_only=True)
        wants = self._wants_file(command.body)
        prompt = f"{command.body}\n\n{ATTACH_HINT}" if wants else command.body
        return Turn(Kind.CHAT, sender, command.body, prompt, workspace, read_only=self._chat_read_only,
                    wants_file=wants)

    def _wants_file(self, request: str) -> bool:
        return self._send_files and asks_for_file(request)

    def _fast(self, command: Command, sender: str, message_ref: str, view: View) -> Decision:
        if command.kind is Kind.HELP:
            return Reply(HELP_TEXT)
        if command.kind is Kind.HEALTH:
            return Reply(self._health(view))
        if command.kind is Kind.STATUS:
            return Reply(self._status(sender, command.target, view, command.alias))
        if command.kind is Kind.CLEAR:
            return Reply("Context cleared: the next message starts a new conversation.", clear_history=True)
        if command.kind is Kind.CANCEL:
            return self._cancel(sender, command.target, view)
        if command.kind is Kind.HISTORY:
            # One more than shown: whether older ones match too.
            runs = self._store.runs.search(sender, command.body, HISTORY_ENTRIES + 1)
            return Reply(history_reply(runs[:HISTORY_ENTRIES], command.body, more=len(runs) > HISTORY_ENTRIES))
        if command.kind is Kind.USAGE:
            now = self._clock()
            return Reply(usage_reply(self._store.runs.since(sender, usage_since(now)), now))
        if command.kind is Kind.DENY_ALL:
            decision = self._approvals.deny_all(sender, message_ref)
            return Reply(decision.message, decision.decided)
        if command.kind is Kind.DENY:
            decision = self._approvals.deny(sender, command.target, message_ref)
            return Reply(decision.message, decision.decided)
        if command.kind is Kind.ESCALATE:
            return self._escalate(sender, command.target, message_ref, view)
        return self._approve(command, sender, message_ref)

    def _login_link(self, message: InboundMessage) -> Reply:
        """`web`: a link that logs the sender's phone in to the page, once, for a few minutes; only over iMessage,
        only to the sender (never into a group)."""
        links = self.login_links
        if links is None:
            return Reply("The web page is not running on this Mac (APPLE_FLOW_WEB_ENABLED, or its log says why).")
        if not links.over_imessage:
            return Reply("Login links are sent over iMessage only.")
        if message.reply_to is not None:
            return Reply("Text `web` to this Mac directly: a login link is never sent into a group.")
        secret = secrets.token_urlsafe(32)
        text = (f"Log in to apple-flow's page (the link works once, for {links.minutes} minutes): "
                f"{links.base_url}/login/link/{secret}")
        if links.mac_only:
            text += "\nIt opens on this Mac only; for your phone set APPLE_FLOW_WEB_BASE_URL (docs/web.md says how)."
        return Reply(text, login_link=secret)

    def _cancel(self, sender: str, target: str | None, view: View) -> Reply:
        """Plain `cancel` stops all the sender asked for and has not got yet: the running turn and the queued ones
        (which then never run). `cancel <run id>` stops that run only; the queued ones go on, and it says so."""
        if target is None:
            if view.running is None and not view.queued:
                return Reply("Nothing of yours is running or queued.")
            lines = ["Stopped your running request."] if view.running is not None else []
            if view.queued:
                lines.append(self._dropped(view.queued))
            return Reply("\n".join(lines), cancel=True, drop_queued=True)
        run = self._store.runs.get(target)
        if run is None or run.sender != sender:  # another sender's run is as unknown as a made-up id
            return Reply(f"No run {target} of yours. `history` lists your runs.")
        if run.id != view.running_run:
            return Reply(f"{run.id} is not running ({run.state}); nothing was stopped.")
        text = f"Stopped {run.id}."
        if view.queued:
            count, them = _count(len(view.queued), "queued request"), "it" if len(view.queued) == 1 else "them"
            text += f" Your {count} will still run (`cancel` alone drops {them}): {_requests(view.queued)}."
        return Reply(text, cancel=True, cancel_run=run.id)

    def _dropped(self, queued: tuple[Queued, ...]) -> str:
        text = f"Dropped your {_count(len(queued), 'queued request')}, not run: {_requests(queued)}."
        for approval in (q.approval for q in queued if q.approval is not None):
            if approval.expires_at > self._clock():
                text += f" {approval.id} is pending again (`approve {approval.id}` runs it, `deny {approval.id}` not)."
            else:
                text += f" {approval.id} has expired; send the task again to redo it."
        return text

    def _approve(self, command: Command, sender: str, message_ref: str) -> Decision:
        decision = self._approvals.approve(sender, command.target, message_ref, command.body)
        if decision.approval is None:
            return Reply(decision.message)
        return self.approved_turn(decision.approval, decision.decided)

    def approved_turn(self, approval: Approval, decided: tuple[Approval, ...] = ()) -> Turn:
        """The turn that carries out an approved request: approved by text (``decided`` holds the decision, to be
        recorded as the message is taken) or on the web page (recorded there already)."""
        prompt = EXECUTE_PROMPT.format(task=approval.task, plan=approval.plan)
        if approval.extra:
            prompt += f"\n\nNotes from the user: {approval.extra}"
        wants = self._wants_file(f"{approval.task} {approval.extra or ''}")
        if wants:
            prompt += f"\n\n{ATTACH_HINT}"
        ack = f"Approved {approval.id}: working on it in {approval.workspace}."
        return Turn(Kind.APPROVE, approval.sender, approval.task, prompt, Path(approval.workspace), plan=True,
                    ack=ack, approval=approval, decided=decided, wants_file=wants,
                    verify=self._check_of(Path(approval.workspace)))

    def _check_of(self, workspace: Path) -> str | None:
        check = self._checks.for_workspace(workspace) if self._checks is not None else None
        return check.command if check is not None else None

    def _escalate(self, sender: str, target: str | None, message_ref: str, view: View) -> Decision:
        """`escalate [run]`: the approved task of a failed apple-code run, run again on the escalation connector.
        Without a run named, the sender's latest task run. A run escalated already is not escalated again, except by
        the message that did it (handled again after a restart: its turn was cut short)."""
        escalation = self._escalation
        if escalation is None:
            return Reply(NOT_SET_UP)
        run = self._escalated_run(sender, target)
        if isinstance(run, str):
            return Reply(run)
        refusal = escalation.refusal(run, self._clock())
        if refusal is not None:
            return Reply(refusal)
        earlier = self._store.runs.escalation_of(run.id)
        if earlier is not None and earlier.message != message_ref:
            return Reply(f"{run.id} was escalated already: {earlier.id} ({earlier.state}).")
        approval = self._store.approvals.get(run.approval or "")
        if approval is None or approval.sender != sender:
            return Reply(f"The request {run.id} carried out is gone; send the task again.")
        if any(q.approval is not None and q.approval.id == approval.id for q in view.queued):
            return Reply(f"{approval.id} is queued to run already.")
        prompt = EXECUTE_PROMPT.format(task=approval.task, plan=approval.plan)
        if approval.extra:
            prompt += f"\n\nNotes from the user: {approval.extra}"
        ack = f"Escalating {run.id} ({approval.id}) to {escalation.connector}: working on it in {approval.workspace}."
        return Turn(Kind.ESCALATE, sender, approval.task, prompt, Path(approval.workspace), ack=ack,
                    approval=approval, verify=self._check_of(Path(approval.workspace)),
                    connector=escalation.connector, escalates=run.id)

    def _escalated_run(self, sender: str, target: str | None) -> Run | str:
        """The run `escalate` names (a run id, or the request it carried out; none: the sender's latest task run),
        or what to tell the sender."""
        if target is None:  # the latest approved task's run, even if a chat ("why did it fail?") came after it
            runs = [r for r in self._store.runs.of_sender(sender, RECENT_FOR_ESCALATE) if r.kind == Kind.APPROVE.value]
            if not runs:
                return "You have no recent task runs to escalate."
            return runs[0]
        key = run_key(target)
        if key is not None:
            run = self._store.runs.get(key)
        else:
            request = request_key(target)
            runs = [r for r in self._store.runs.of_approval(request) if r.kind == "approve"] if request else []
            run = runs[0] if runs else None
        if run is None or run.sender != sender:  # another sender's run is as unknown as a made-up id
            return f"No run {target} of yours. `history` lists your runs."
        return run

    # ------------------------------------------------------------------------------------------- conclude

    def conclude(
        self, turn: Turn, run_id: str, outcome: TurnOutcome | Exception, stop: str | None, keep_exchange: bool
    ) -> FinishedTurn:
        """What a turn that has run means: its reply and what to record. ``outcome`` is the connector's, or the
        exception it raised (a bug: the sender hears about it, the daemon goes on). ``stop`` says whether the
        turn was stopped from outside: None (it was not), "" (cancelled; the sender was told already), or the
        reply to send instead (it ran too long). ``keep_exchange``: the conversation is kept (the connector
        wants earlier exchanges). With the web page's base URL set, the reply ends with its run page's address."""
        finished = self._conclude(turn, run_id, outcome, stop, keep_exchange)
        if turn.kind in (Kind.APPROVE, Kind.ESCALATE) and turn.approval is not None and finished.reply:
            finished = replace(finished, reply=self._task_reply(turn, run_id, finished, outcome))
        finished = replace(finished, backend=self._backend(outcome, turn.connector))
        if self._run_links and finished.reply:
            return replace(finished, reply=f"{finished.reply}\n\n{self._run_links}/runs/{run_id}")
        return finished

    def _backend(self, outcome: TurnOutcome | Exception, connector: str | None = None) -> str:
        """What answered, for ``usage``: the connector, with the backend and model the agent reported."""
        label = connector or self._connector_name
        if isinstance(outcome, TurnOutcome):
            label += f":{outcome.backend}" if outcome.backend else ""
            label += f" ({outcome.model})" if outcome.model else ""
        return label

    def _conclude(
        self, turn: Turn, run_id: str, outcome: TurnOutcome | Exception, stop: str | None, keep_exchange: bool
    ) -> FinishedTurn:
        if isinstance(outcome, Exception):
            reply = failures.explain_exception(outcome)
            return FinishedTurn(reply, "failed", reply)
        result = outcome.as_text()
        if stop:
            return FinishedTurn(stop, "failed", stop, outcome)
        if stop is not None:
            return FinishedTurn(None, "cancelled", result, outcome)
        if not outcome.answered:
            return FinishedTurn(failures.explain(outcome), "failed", result, outcome)
        exchange = Exchange(turn.prompt, outcome.text) if keep_exchange else None
        if failures.is_blocker(result):  # passed on as is: no approval for a plan that is a question
            return FinishedTurn(result.strip(), "blocked", result, outcome, exchange)
        if turn.kind is Kind.TASK:
            approval = self._approvals.create(turn.sender, turn.request, result.strip(), str(turn.workspace))
            reply = (
                f"Plan ({approval.id}, in {turn.workspace}):\n{result.strip()}\n\n"
                f"Reply `approve {approval.id}` to run it (optionally with notes), or `deny {approval.id}`; or like "
                "this message to approve it, dislike it to deny. "
                f"Expires in {self._approvals.ttl_minutes} minutes."
            )
            return FinishedTurn(reply, "done", result, outcome, exchange, approval)
        reply, files = self._files_to_send(turn, result.strip(), outcome)
        return FinishedTurn(reply, "done", result, outcome, exchange, files=files)

    def _task_reply(self, turn: Turn, run_id: str, finished: FinishedTurn, outcome: TurnOutcome | Exception) -> str:
        """An approved (or escalated) task's reply: what happened, the agent's answer, and a last line on its check;
        a failed apple-code run ends with the offer to escalate it, where one is set up."""
        assert turn.approval is not None and finished.reply is not None
        ids = f"{turn.approval.id}, {run_id}"
        where = f" on {turn.connector}" if turn.kind is Kind.ESCALATE and turn.connector else ""
        answered = outcome if isinstance(outcome, TurnOutcome) else None
        check = answered.check if answered is not None else None
        if finished.run_state == "done":
            head = (f"Done ({ids}{where}):" if turn.kind is Kind.APPROVE
                    else f"Escalated {turn.escalates}{where} ({ids}):")
            text = f"{head}\n{finished.reply}"
        elif answered is not None and answered.status is Status.CHECK_FAILED:
            rounds = f" after {_rounds(check.rounds)}" if check is not None else ""
            partial = f"\n{answered.text}" if answered.text else ""
            text = f"Not done ({ids}{where}): the check still fails{rounds}.{partial}"
        else:
            text = f"Not done ({ids}{where}): {finished.reply}" if finished.run_state == "failed" else finished.reply
        line = self._check_line(turn, check, finished.run_state)
        if line:
            text += f"\n\n{line}"
        if self._escalation is not None and turn.kind is Kind.APPROVE and turn.connector is None \
                and self._escalation.stuck(finished.run_state, answered.status if answered is not None else None):
            text += f"\n{self._escalation.offer(run_id)}"
        return text

    def _check_line(self, turn: Turn, check: CheckReport | None, state: str) -> str:
        """The task reply's last line on its check: passed, or failed with its first failing line."""
        if state not in ("done", "failed"):
            return ""
        if check is not None and not check.ran:  # the run ended before a final answer to check
            return f"Check not run: `{check.command}`."
        if check is not None:
            if check.passed:
                after = f" (after {_rounds(check.rounds)})" if check.rounds else ""
                return f"Check passed: `{check.command}`{after}."
            failing = check.failing_line()
            return f"Check failed: `{check.command}`" + (f": {clip(failing, 200)}" if failing else ".")
        if state != "done" or turn.verify is None:  # no check for the workspace: `status` says why
            return ""
        agent = turn.connector or self._connector_name
        return f"Not checked by apple-flow: {agent} was asked to run `{turn.verify}` itself."

    def _files_to_send(self, turn: Turn, answer: str, outcome: TurnOutcome) -> tuple[str, tuple[str, ...]]:
        """The answer without its ``ATTACH:`` lines, and the files to send: those lines' files, or, when the user
        asked for a file and the answer names none, the files the agent changed."""
        text, named = take_attach_lines(answer)
        if not self._send_files:
            return answer, ()
        if not named and turn.wants_file:
            named = list(outcome.files_changed)
        return text or "Here you are.", tuple(named)

    # ------------------------------------------------------------------------------------------- status

    def _health(self, view: View) -> str:
        uptime = duration(self._clock() - self._started)
        handled = self._store.messages.count()
        text = (
            f"apple-flow is running (up {uptime}). Connector {self._connector_name}: {view.connector_status}. "
            f"Handled {handled} messages. Yours: {len(view.queued)} queued."
        ) + (f"\n{view.checks}" if view.checks else "")
        failed, latest = self._store.messages.failed_sends(self._clock() - UNDELIVERED_WINDOW)
        if latest is not None:
            text += (
                f"\nReplies not delivered in the last 24 h: {failed} (latest at {moment(latest.at, self._clock())} to "
                f"{latest.sender}: {clip(latest.reason, 200)})"
            )
        refused = self._store.events.count(FORGEABLE_EVENT)
        if refused:
            (newest,) = self._store.events.recent(1, FORGEABLE_EVENT)
            text += f"\n{forgeable_line(refused, newest)}"
        return text

    def _status(self, sender: str, target: str | None, view: View, alias: str | None = None) -> str:
        if target is not None:
            return self._status_of(sender, target)
        lines = []
        if view.running:
            request, since = view.running
            lines.append(f"Running for {duration(self._clock() - since)}: {clip(request)}")
        if view.queued:
            lines.append(f"Queued: {len(view.queued)} — {_requests(view.queued)}")
        for approval in self._approvals.pending(sender):
            minutes = max(1, round((approval.expires_at - self._clock()) / 60))
            lines.append(f"Awaiting approval: {approval.id} ({minutes} min left): {clip(approval.task)}")
        _, undelivered = self._store.messages.failed_sends(self._clock() - UNDELIVERED_WINDOW, sender)
        if undelivered is not None:
            lines.append(
                f"Not delivered at {moment(undelivered.at, self._clock())}: your reply to "
                f"{clip(undelivered.request, 40)!r} "
                f"({clip(undelivered.reason, 200)})"
            )
        for at, shown, problem in self._store.reply_files.not_sent(sender, self._clock() - UNDELIVERED_WINDOW)[-3:]:
            lines.append(f"File not sent at {moment(at, self._clock())}: {shown} ({clip(problem, 120)})")
        runs = self._store.runs.of_sender(sender, 3)
        if runs:
            lines.append("Recent: " + "; ".join(f"{r.id} {r.kind} {r.state}" for r in runs))
        if not lines:
            lines.append("Nothing running, nothing pending.")
        if self._checks is not None:
            try:
                workspace = self._workspaces.resolve(alias)
            except WorkspaceError as exc:
                lines.append(str(exc))
            else:
                lines.append(self._checks.describe(workspace))
        return "\n".join(lines)

    def _status_of(self, sender: str, target: str) -> str:
        key = target.strip().lower()
        run = self._store.runs.get(key)
        if run is not None and run.sender == sender:
            result = f": {clip(run.result or '', 200)}" if run.result else ""
            return f"{run.id} ({run.kind}) {run.state}{result}"
        approval = self._store.approvals.get(key)
        if approval is not None and approval.sender == sender:
            state = approval.state
            if state == "pending" and approval.expires_at <= self._clock():
                state = "expired"
            return f"{approval.id} {state}: {clip(approval.task)}"
        return f"No run or request {target}. Send `status` for yours."


def forgeable_line(count: int, newest: Event) -> str:
    """`health`'s line on the SMS and RCS messages that were not acted on (also the doctor's and the web page's)."""
    return (
        f"Not acted on: {count} SMS/RCS message{'' if count == 1 else 's'} (the sender can be forged; latest "
        f"{moment(newest.at)} from {newest.sender or 'unknown'}). "
        "APPLE_FLOW_ALLOW_SMS=true takes them read-only."
    )


def _requests(queued: tuple[Queued, ...]) -> str:
    """The queued requests as status and cancel name them: in order, each clipped, approved tasks with their id."""
    return "; ".join(
        f'"{clip(q.request, 60)}"' + (f" ({q.approval.id})" if q.approval is not None else "") for q in queued
    )


def _rounds(n: int) -> str:
    return f"{n} repair round" + ("" if n == 1 else "s")


def _count(n: int, noun: str) -> str:
    return f"{noun}" if n == 1 else f"{n} {noun}s"
