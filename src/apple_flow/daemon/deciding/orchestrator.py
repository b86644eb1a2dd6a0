"""Decides what to do with each message: policy first, then commands (answered at once) or a turn for the agent.
`health` and `status` are answered by ``status_replies``; what a finished turn means is ``conclusion``'s (the turn
workers ask it).

Deciding only: it reads the message, the store (through ``state_view.StateView``) and a ``View`` of what runs now,
and returns plain records (``decisions``: ``Ignore``, ``Hold``, ``Reply``, ``Turn``) that the
runtime applies. It writes nothing, runs nothing and calls nothing back; it knows no threads, queues or channels.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from apple_flow.channels.base import InboundMessage, Tapback
from apple_flow.daemon.deciding.approvals import Approvals
from apple_flow.daemon.deciding.commands import FAST, HELP_TEXT, Command, Kind, parse
from apple_flow.daemon.deciding.decisions import Decision, Hold, Ignore, LoginLinks, Queued, Reply, Turn, View
from apple_flow.daemon.deciding.escalation import NOT_SET_UP, Escalation, request_key, run_key
from apple_flow.daemon.deciding.files_to_send import ATTACH_HINT, asks_for_file
from apple_flow.daemon.deciding.policy import Policy
from apple_flow.daemon.deciding.reports import HISTORY_ENTRIES, history_reply, usage_reply, usage_since
from apple_flow.daemon.deciding.state_view import StateView
from apple_flow.daemon.deciding.status_replies import StatusReplies, counted, requests_text
from apple_flow.daemon.deciding.verify_command import VerifyCommands
from apple_flow.daemon.deciding.workspaces import WorkspaceError, Workspaces
from apple_flow.daemon.store import Approval, Run

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
# What a message that came by SMS or RCS (APPLE_FLOW_ALLOW_SMS) can never do: anyone can send one under your number.
DECIDING = frozenset({Kind.APPROVE, Kind.DENY, Kind.DENY_ALL, Kind.CANCEL, Kind.WEB})  # WEB: a login link approves
# The commands whose answer reads what runs now (``View``).
VIEWING = frozenset({Kind.STATUS, Kind.HEALTH, Kind.CANCEL, Kind.ESCALATE, Kind.RUN})
FORGEABLE_REFUSAL = (
    "{name} is not taken by SMS or RCS: anyone can send a text under your number. Send it by iMessage, or use the "
    "web page."
)

# An agent's question is the owner's alone: answered in the owner's own chat, never by what is said in a group.
GROUP_QUESTION_REFUSAL = "Questions from agents are answered in your own chat with this Mac, not in a group."


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
        send_files: bool = True,
        chat_read_only: bool = False,
        verify_commands: VerifyCommands | None = None,
        escalation: Escalation | None = None,
    ) -> None:
        self._store = store
        self._policy = policy
        self._approvals = approvals
        self._workspaces = workspaces
        self._connector_name = connector_name
        self._reply_to_unknown = reply_to_unknown
        self._clock = clock
        self._send_files = send_files  # the agent may send files back (ATTACH: lines)
        self._chat_read_only = chat_read_only  # plain chat only reads (the demo profile's small model)
        self._verify_commands = verify_commands  # the check approved tasks must pass; None: they are not checked
        self._escalation = escalation  # None: failed tasks are not offered elsewhere
        self._status = StatusReplies(store, approvals, workspaces, connector_name, clock, verify_commands)
        self.login_links: LoginLinks | None = None  # set once the web page serves

    # ------------------------------------------------------------------------------------------- decide

    def needs_view(self, message: InboundMessage, command: Command) -> bool:
        """Whether deciding ``message`` (which asks for ``command``: ``commands.parse`` of its text) reads what runs
        now (``status``, ``health``, ``cancel``, ``escalate``, and ``run``, whose held message may be one of them):
        the runtime builds the ``View`` only then, since a sender's queue can be long (a burst)."""
        return message.tapback is None and command.kind in VIEWING

    def decide(self, message: InboundMessage, command: Command, message_ref: str, view: View) -> Decision:
        """What to do with ``message``, which asks for ``command`` (``commands.parse`` of its text). ``view``: what
        runs now (an empty one unless ``needs_view``)."""
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
        return self._decide_allowed(message, command, message_ref, view)

    def _decide_allowed(
        self, message: InboundMessage, command: Command, message_ref: str, view: View, held: bool = False
    ) -> Decision:
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
        if message.reply_to is not None and self._names_question(command):
            return Reply(GROUP_QUESTION_REFUSAL)
        if command.kind is Kind.CHAT and message.text.strip() and not (held or message.forgeable or message.reply_to):
            answered = self._approvals.answer(sender, message.text.strip(), message_ref)
            if answered is not None:  # a plain reply while an agent's question is open answers it
                return Reply(answered.message, answered.decided)
        if command.kind in FAST:
            return self._fast(command, sender, message_ref, view)
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

    def _names_question(self, command: Command) -> bool:
        """Whether ``command`` decides an agent's question (`approve q_...`, `deny q_...`)."""
        if command.kind not in (Kind.APPROVE, Kind.DENY) or command.target is None:
            return False
        found = self._store.approvals.get_approval(command.target.strip().rstrip(".,!").lower())
        return found is not None and found.is_question

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
        self, message: InboundMessage, target: str | None, message_ref: str, view: View
    ) -> Decision:
        """`run`: the last of the messages listed after the Mac woke, as if it came now; `run <n>`: that one."""
        held = self._store.held.listing(message.sender)
        if not held:
            return Reply("Nothing from while this Mac was asleep or offline is waiting to run.")
        number = int(target) if target is not None else held[-1].number
        chosen = next((item for item in held if item.number == number), None)
        if chosen is None:
            return Reply(f"There is no {number}: `run 1` to `run {held[-1].number}`, or `run` for the last one.")
        # As if it came now, and by the way it came: one that came by SMS or RCS keeps its refusals and read-only rule.
        again = replace(message, text=chosen.text, attachments=(), late=False, tapback=None,
                        forgeable=message.forgeable or chosen.forgeable)
        return self._decide_allowed(again, parse(again.text), message_ref, view, held=True)

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
            return Reply(self._status.health(view))
        if command.kind is Kind.STATUS:
            return Reply(self._status.status(sender, command.target, view, command.alias))
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
        """`web`: a link that logs the sender's phone in to the page, once, for a few minutes; only on a channel
        that carries links (iMessage), only to the sender (never into a group)."""
        links = self.login_links
        if links is None:
            return Reply("The web page is not running on this Mac (APPLE_FLOW_WEB_ENABLED, or its log says why).")
        if not links.channel_carries:
            return Reply("Login links are not sent on this channel: text `web` from your phone.")
        if message.reply_to is not None:
            return Reply("Text `web` to this Mac directly: a login link is never sent into a group.")
        secret = secrets.token_urlsafe(32)
        text = (f"Log in to apple-flow's page (the link works once, for {links.minutes} minutes): "
                f"{links.base_url}/login/link/{secret}")
        if links.mac_only:
            text += "\nIt opens on this Mac only; for your phone set APPLE_FLOW_WEB_BASE_URL (docs/web.md says how)."
        if links.safari_note:
            text += f"\n{links.safari_note}"
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
        run = self._store.runs.get_run(target)
        if run is None or run.sender != sender:  # another sender's run is as unknown as a made-up id
            return Reply(f"No run {target} of yours. `history` lists your runs.")
        if run.id != view.running_run:
            return Reply(f"{run.id} is not running ({run.state}); nothing was stopped.")
        text = f"Stopped {run.id}."
        if view.queued:
            count, them = counted(len(view.queued), "queued request"), "it" if len(view.queued) == 1 else "them"
            text += f" Your {count} will still run (`cancel` alone drops {them}): {requests_text(view.queued)}."
        return Reply(text, cancel=True, cancel_run=run.id)

    def _dropped(self, queued: tuple[Queued, ...]) -> str:
        text = f"Dropped your {counted(len(queued), 'queued request')}, not run: {requests_text(queued)}."
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
        if decision.approval.is_question:  # nothing runs: the agent that asked is told
            return Reply(f"Approved {decision.approval.id}: the agent is told.", decision.decided)
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
        found = self._verify_commands.for_workspace(workspace) if self._verify_commands is not None else None
        return found.command if found is not None else None

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
        approval = self._store.approvals.get_approval(run.approval or "")
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
            run = self._store.runs.get_run(key)
        else:
            request = request_key(target)
            runs = [r for r in self._store.runs.of_approval(request) if r.kind == "approve"] if request else []
            run = runs[0] if runs else None
        if run is None or run.sender != sender:  # another sender's run is as unknown as a made-up id
            return f"No run {target} of yours. `history` lists your runs."
        return run
