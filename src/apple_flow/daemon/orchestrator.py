"""Decides what each message is and does it: policy first, then commands (answered at once) or a turn for the
agent (run later by a worker through ``execute``). Knows nothing about threads, queues or channels."""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from apple_flow.channels.base import InboundMessage
from apple_flow.connectors.base import AgentEvent, Connector, Exchange, Status, TurnOutcome, TurnRequest
from apple_flow.daemon import failures
from apple_flow.daemon.approvals import Approvals
from apple_flow.daemon.commands import FAST, HELP_TEXT, Command, Kind, parse
from apple_flow.daemon.policy import Policy
from apple_flow.daemon.store import Approval, Store
from apple_flow.daemon.workspaces import WorkspaceError, Workspaces

log = logging.getLogger(__name__)

PLAN_PROMPT = (
    "Make a short numbered plan (at most 6 steps) for the task below. Do not change anything now: read what you "
    "need, then name the files you would change and how.\n\nTask: {task}"
)
EXECUTE_PROMPT = "Carry out this task in the workspace.\n\nTask: {task}\n\nPlan agreed with the user:\n{plan}"
IDEA_PROMPT = "Brainstorm a few concrete ideas. Do not change any files.\n\n{body}"
READONLY_PLAN_PROMPT = "Make a step-by-step plan. Do not change any files.\n\n{body}"
UNDELIVERED_WINDOW = 24 * 3600  # how far back `health` and `status` report replies that did not go out


class Activity(Protocol):
    """What the runtime knows about turns in flight (for status and cancel)."""

    def running(self, sender: str) -> tuple[str, float] | None:
        """The sender's running turn: (its request, when it started), if any."""
        ...

    def queued(self, sender: str) -> int: ...

    def cancel(self, sender: str) -> bool:
        """Stops the sender's running turn; False when nothing runs."""
        ...


@dataclass(frozen=True)
class Ignore:
    reason: str


@dataclass(frozen=True)
class Reply:
    text: str


@dataclass(frozen=True)
class Turn:
    kind: Kind  # CHAT, IDEA, PLAN, TASK (the planning turn) or APPROVE (the approved execution)
    sender: str
    request: str
    prompt: str
    workspace: Path
    read_only: bool = False
    plan: bool = False
    ack: str | None = None  # sent at once, before the turn is queued
    approval: Approval | None = None


@dataclass(frozen=True)
class TurnResult:
    reply: str | None  # None: send nothing (the turn was cancelled and the sender already told)
    commit: Callable[[], None] | None = field(default=None)  # store writes that belong with the reply


Decision = Ignore | Reply | Turn


class Orchestrator:
    def __init__(
        self,
        store: Store,
        connector: Connector,
        policy: Policy,
        approvals: Approvals,
        workspaces: Workspaces,
        activity: Activity,
        connector_name: str = "afm",
        reply_to_unknown: bool = False,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._connector = connector
        self._policy = policy
        self._approvals = approvals
        self._workspaces = workspaces
        self._activity = activity
        self._connector_name = connector_name
        self._reply_to_unknown = reply_to_unknown
        self._clock = clock
        self._started = clock()
        self.connector_status = "not checked yet"

    # ------------------------------------------------------------------------------------------- decide

    def decide(self, message: InboundMessage, message_key: str) -> Decision:
        if message.is_from_me:
            return Ignore("sent by this Mac")
        verdict = self._policy.check(message.sender)
        if not verdict.allowed:
            if verdict.notify:
                return Reply("You are sending messages too fast; the ones over the limit are skipped. Wait a minute.")
            if verdict.reason == "unknown sender" and self._reply_to_unknown:
                return Reply("Sorry, this Mac does not take requests from you. Ask its owner to add you.")
            return Ignore(verdict.reason)
        command = parse(message.text)
        sender = message.sender
        if command.kind in FAST:
            return self._fast(command, sender, message_key)
        try:
            workspace = self._workspaces.resolve(command.alias)
        except WorkspaceError as exc:
            return Reply(str(exc))
        if not command.body:
            name = command.kind.value
            return Reply(f"{name}: needs some text, e.g. `{name}: add a test for the parser`.")
        return self._turn(command, sender, workspace)

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
        return Turn(Kind.CHAT, sender, command.body, command.body, workspace)

    def _fast(self, command: Command, sender: str, message_key: str) -> Decision:
        if command.kind is Kind.HELP:
            return Reply(HELP_TEXT)
        if command.kind is Kind.HEALTH:
            return Reply(self._health(sender))
        if command.kind is Kind.STATUS:
            return Reply(self._status(sender, command.target))
        if command.kind is Kind.CLEAR:
            self._store.clear(sender)
            return Reply("Context cleared: the next message starts a new conversation.")
        if command.kind is Kind.CANCEL:
            stopped = self._activity.cancel(sender)
            return Reply("Stopped your running request." if stopped else "Nothing of yours is running.")
        if command.kind is Kind.DENY_ALL:
            return Reply(self._approvals.deny_all(sender, message_key))
        if command.kind is Kind.DENY:
            return Reply(self._approvals.deny(sender, command.target, message_key).message)
        return self._approve(command, sender, message_key)

    def _approve(self, command: Command, sender: str, message_key: str) -> Decision:
        decision = self._approvals.approve(sender, command.target, message_key, command.body)
        approval = decision.approval
        if approval is None:
            return Reply(decision.message)
        prompt = EXECUTE_PROMPT.format(task=approval.task, plan=approval.plan)
        if approval.extra:
            prompt += f"\n\nNotes from the user: {approval.extra}"
        ack = f"Approved {approval.id}: working on it in {approval.workspace}."
        return Turn(Kind.APPROVE, sender, approval.task, prompt, Path(approval.workspace), plan=True, ack=ack,
                    approval=approval)

    # ------------------------------------------------------------------------------------------- execute

    def execute(
        self, turn: Turn, on_progress: Callable[[str], None], stopped: Callable[[], str | None]
    ) -> TurnResult:
        """Runs one turn with the connector. Never raises for agent failures: they become short replies.
        ``stopped`` says whether the turn was stopped from outside: None (it was not), "" (cancelled; the sender
        was told already), or the reply to send instead (e.g. it ran too long)."""
        run_id = f"run_{secrets.token_hex(3)}"
        self._store.start_run(run_id, turn.sender, turn.kind.value, str(turn.workspace), turn.request)
        window = self._connector.context_window
        request = TurnRequest(
            turn.prompt, turn.workspace, tuple(self._store.history(turn.sender, window)), turn.read_only, turn.plan,
            key=turn.sender,
        )
        try:
            outcome = TurnOutcome(Status.FAILED, detail="the connector ended the turn without an outcome")
            for item in self._connector.run(request):
                if isinstance(item, AgentEvent):
                    for line in item.progress:
                        on_progress(line)
                else:
                    outcome = item
        except Exception as exc:  # a connector bug must not take the daemon down; the sender hears about it
            log.exception("turn %s failed", run_id)
            reply = failures.explain_exception(exc)
            return TurnResult(reply, lambda: self._store.finish_run(run_id, "failed", reply))
        result = outcome.as_text()
        stop = stopped()
        if stop:
            return TurnResult(stop, lambda: self._store.finish_run(run_id, "failed", stop))
        if stop is not None:
            return TurnResult(None, lambda: self._store.finish_run(run_id, "cancelled", result))
        if not outcome.answered:
            reply = failures.explain(outcome)
            return TurnResult(reply, lambda: self._store.finish_run(run_id, "failed", result))
        # Kept with the reply: a turn redone after a crash leaves no exchange twice.
        exchange = Exchange(turn.prompt, outcome.text) if window > 0 else None
        if failures.is_blocker(result):  # passed on as is: no approval for a plan that is a question
            return TurnResult(result.strip(), self._finish(turn.sender, run_id, "blocked", result, exchange))
        if turn.kind is Kind.TASK:
            return self._announce_plan(turn, run_id, result, exchange)
        reply = result.strip()
        if turn.kind is Kind.APPROVE and turn.approval is not None:
            reply = f"Done ({turn.approval.id}, {run_id}):\n{reply}"
        return TurnResult(reply, self._finish(turn.sender, run_id, "done", result, exchange))

    def _finish(
        self, sender: str, run_id: str, state: str, result: str, exchange: Exchange | None,
        approval: Approval | None = None,
    ) -> Callable[[], None]:
        def commit() -> None:
            if exchange is not None:
                self._store.append(sender, exchange)
            if approval is not None:
                self._store.add_approval(approval)
            self._store.finish_run(run_id, state, result)

        return commit

    def _announce_plan(self, turn: Turn, run_id: str, plan: str, exchange: Exchange | None) -> TurnResult:
        approval = self._approvals.create(turn.sender, turn.request, plan.strip(), str(turn.workspace))
        reply = (
            f"Plan ({approval.id}, in {turn.workspace}):\n{plan.strip()}\n\n"
            f"Reply `approve {approval.id}` to run it (optionally with notes), or `deny {approval.id}`. "
            f"Expires in {self._approvals.ttl_minutes} minutes."
        )
        return TurnResult(reply, self._finish(turn.sender, run_id, "done", plan, exchange, approval))

    # ------------------------------------------------------------------------------------------- status

    def _health(self, sender: str) -> str:
        uptime = _duration(self._clock() - self._started)
        handled = self._store.count_messages()
        text = (
            f"apple-flow is running (up {uptime}). Connector {self._connector_name}: {self.connector_status}. "
            f"Handled {handled} messages. Yours: {self._activity.queued(sender)} queued."
        )
        failed, latest = self._store.failed_sends(self._clock() - UNDELIVERED_WINDOW)
        if latest is not None:
            text += (
                f"\nReplies not delivered in the last 24 h: {failed} (latest at {_clock_time(latest.at)} to "
                f"{latest.sender}: {_clip(latest.reason, 200)})"
            )
        return text

    def _status(self, sender: str, target: str | None) -> str:
        if target is not None:
            return self._status_of(sender, target)
        lines = []
        running = self._activity.running(sender)
        if running:
            request, since = running
            lines.append(f"Running for {_duration(self._clock() - since)}: {_clip(request)}")
        queued = self._activity.queued(sender)
        if queued:
            lines.append(f"Queued: {queued}")
        for approval in self._approvals.pending(sender):
            minutes = max(1, round((approval.expires_at - self._clock()) / 60))
            lines.append(f"Awaiting approval: {approval.id} ({minutes} min left): {_clip(approval.task)}")
        _, undelivered = self._store.failed_sends(self._clock() - UNDELIVERED_WINDOW, sender)
        if undelivered is not None:
            lines.append(
                f"Not delivered at {_clock_time(undelivered.at)}: your reply to {_clip(undelivered.request, 40)!r} "
                f"({_clip(undelivered.reason, 200)})"
            )
        runs = self._store.runs_of(sender, 3)
        if runs:
            lines.append("Recent: " + "; ".join(f"{r.id} {r.kind} {r.state}" for r in runs))
        return "\n".join(lines) if lines else "Nothing running, nothing pending."

    def _status_of(self, sender: str, target: str) -> str:
        key = target.strip().lower()
        run = self._store.run(key)
        if run is not None and run.sender == sender:
            result = f": {_clip(run.result or '', 200)}" if run.result else ""
            return f"{run.id} ({run.kind}) {run.state}{result}"
        approval = self._store.approval(key)
        if approval is not None and approval.sender == sender:
            state = approval.state
            if state == "pending" and approval.expires_at <= self._clock():
                state = "expired"
            return f"{approval.id} {state}: {_clip(approval.task)}"
        return f"No run or request {target}. Send `status` for yours."


def _clip(text: str, limit: int = 80) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _clock_time(at: float) -> str:
    return time.strftime("%H:%M", time.localtime(at))


def _duration(seconds: float) -> str:
    seconds = int(max(0, seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min"
