"""The replies to `health` and `status`: how the daemon is, and what the sender has running, queued, awaiting
approval and not delivered; the line on SMS and RCS messages not acted on (also the doctor's and the web page's)."""

from __future__ import annotations

from collections.abc import Callable

from apple_flow.daemon.deciding.approvals import Approvals
from apple_flow.daemon.deciding.decisions import Queued, View
from apple_flow.daemon.deciding.reports import clip
from apple_flow.daemon.deciding.state_view import StateView
from apple_flow.daemon.deciding.verify_command import VerifyCommands
from apple_flow.daemon.deciding.workspaces import WorkspaceError, Workspaces
from apple_flow.daemon.store import Event
from apple_flow.times import duration, moment

UNDELIVERED_WINDOW = 24 * 3600  # how far back `health` and `status` report replies that did not go out
# Events the runtime records for SMS and RCS messages it did not act on (counted in `health`).
FORGEABLE_EVENT = "sms_refused"


class StatusReplies:
    def __init__(
        self,
        store: StateView,
        approvals: Approvals,
        workspaces: Workspaces,
        connector_name: str,
        clock: Callable[[], float],
        verify_commands: VerifyCommands | None = None,
    ) -> None:
        self._store = store
        self._approvals = approvals
        self._workspaces = workspaces
        self._connector_name = connector_name
        self._clock = clock
        self._verify_commands = verify_commands
        self._started = clock()

    def health(self, view: View) -> str:
        uptime = duration(self._clock() - self._started)
        handled = self._store.messages.count_messages()
        text = (
            f"apple-flow is running (up {uptime}). Connector {self._connector_name}: {view.connector_status}. "
            f"Handled {handled} messages. Yours: {len(view.queued)} queued."
        ) + (f"\n{view.readiness}" if view.readiness else "")
        failed, latest = self._store.messages.failed_sends(self._clock() - UNDELIVERED_WINDOW)
        if latest is not None:
            text += (
                f"\nReplies not delivered in the last 24 h: {failed} (latest at {moment(latest.at, self._clock())} to "
                f"{latest.sender}: {clip(latest.reason, 200)})"
            )
        refused = self._store.events.count_events(FORGEABLE_EVENT)
        if refused:
            (newest,) = self._store.events.recent_events(1, FORGEABLE_EVENT)
            text += f"\n{forgeable_line(refused, newest)}"
        return text

    def status(self, sender: str, target: str | None, view: View, alias: str | None = None) -> str:
        if target is not None:
            return self._status_of(sender, target)
        lines = []
        if view.running:
            request, since = view.running
            lines.append(f"Running for {duration(self._clock() - since)}: {clip(request)}")
        if view.queued:
            lines.append(f"Queued: {len(view.queued)} — {requests_text(view.queued)}")
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
        if self._verify_commands is not None:
            try:
                workspace = self._workspaces.resolve(alias)
            except WorkspaceError as exc:
                lines.append(str(exc))
            else:
                lines.append(self._verify_commands.describe(workspace))
        return "\n".join(lines)

    def _status_of(self, sender: str, target: str) -> str:
        key = target.strip().lower()
        run = self._store.runs.get_run(key)
        if run is not None and run.sender == sender:
            result = f": {clip(run.result or '', 200)}" if run.result else ""
            return f"{run.id} ({run.kind}) {run.state}{result}"
        approval = self._store.approvals.get_approval(key)
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


def requests_text(queued: tuple[Queued, ...]) -> str:
    """The queued requests as status and cancel name them: in order, each clipped, approved tasks with their id."""
    return "; ".join(
        f'"{clip(q.request, 60)}"' + (f" ({q.approval.id})" if q.approval is not None else "") for q in queued
    )


def counted(n: int, noun: str) -> str:
    return f"{noun}" if n == 1 else f"{n} {noun}s"
