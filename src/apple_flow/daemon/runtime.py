"""The daemon loop, which does everything the orchestrator decides: messages from the ingress, a decision for each,
turns run on worker threads, replies to the egress, every step recorded in the store first.

Data flows one way: the runtime pulls messages from the ingress, asks the orchestrator (a plain decision back),
pulls the turn's events and outcome from the connector, asks the orchestrator what the outcome means, records it,
and hands the reply to the egress. Nothing below it calls back into it.

The channel's interface (``channels.base``) declares all the runtime uses of it, with defaults: the ingress yields
messages and the rows it skips, says whether a message was unsent and waits (bounded) for a message's files still
arriving; the egress sends replies, progress and files, notes what it sent in the store's record of sent texts
(which its ingress reads to skip echoes, across restarts) and says whether a reply went out before a crash.

Files: a turn's message's files are copied into its workspace (``arrivals``) when the turn starts; the files its
answer names (``outbox``) are checked against the workspace, announced in the reply, recorded with it and sent
after it.

Crash safety: a message is recorded as taken before its turn runs; its reply is recorded (with the run's end, the
conversation's new exchange, any approval request and the files it sends, in one transaction) before it is sent;
each file is marked as it is sent or refused; the cursor passes a message only once it is finished, its reply and
then its files out. After ``kill -9`` the restart reads from the cursor: finished messages are skipped, a recorded
but unsent reply is sent, the files of a reply not sent yet follow it (each checked again: one deleted or grown
past the limit meanwhile gets the usual "Could not send" line), a taken message is handled again. Queued turns
dropped by `cancel` are recorded as finished in the transaction that records its reply, so a restart runs none of
them. A task approved on the web page has no message: its run is recorded as queued with the approval, and its
reply and files before they are sent (``web_runs``, ``reply_files``), so a restart runs it again or sends what is
left in the same way. A file whose send the kill cut short goes again: unlike a text, the channel cannot tell
whether it went.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

from apple_flow.channels.base import Egress, InboundMessage, Ingress, SendError, Skipped
from apple_flow.config import Settings
from apple_flow.connectors.base import AgentEvent, Connector, ConnectorError, TurnOutcome, TurnRequest
from apple_flow.daemon import failures, orphans
from apple_flow.daemon.approvals import Approvals
from apple_flow.daemon.arrivals import FileLimits, describe, receive
from apple_flow.daemon.cursor import CursorTracker
from apple_flow.daemon.orchestrator import (
    FORGEABLE_EVENT,
    Decision,
    Ignore,
    Orchestrator,
    Queued,
    Reply,
    Turn,
    View,
    new_run_id,
)
from apple_flow.daemon.outbox import Outgoing, check, check_all, note
from apple_flow.daemon.policy import Policy
from apple_flow.daemon.progress import ProgressThrottle
from apple_flow.daemon.run_log import RunLog
from apple_flow.daemon.scheduler import Job, Scheduler
from apple_flow.daemon.store import WEB_REPLY_PREFIX, Approval, FinishedTurn, Store, message_reply, web_reply
from apple_flow.daemon.workspaces import Workspaces

log = logging.getLogger(__name__)

CHILD_TOKEN_KEY = "child_token"
FINISHED = frozenset({"sent", "ignored", "send_failed"})
KILL_WAIT_SECONDS = 5.0  # after killing turns at shutdown, how long to wait for their threads to notice
DECIDE_ATTEMPTS = 3  # deciding again when an approval request changed between deciding and recording


@dataclass(frozen=True)
class Work:
    message: InboundMessage | None  # None: a task approved on the web page (no message to record the reply on)
    turn: Turn


@dataclass(frozen=True)
class _WebApproval:
    """A request approved on the web page (and recorded there), to run like one approved by text."""

    approval: Approval


class _End:
    """The ingress ran out (end of piped input)."""


class StartError(RuntimeError):
    """The daemon cannot start reading messages (e.g. chat.db unreadable); the message says what to do."""


class StartupChecks(Protocol):
    """What the channel needs before messages can be read (the iMessage channel: its macOS permissions)."""

    def wait_until_ready(self, stop: threading.Event) -> bool:
        """True once ready; False when ``stop`` was set first. Says why it waits (log) meanwhile."""
        ...

    def summary(self) -> str:
        """One paragraph for ``health``."""
        ...


class Daemon:
    def __init__(
        self,
        settings: Settings,
        store: Store,
        connector: Connector,
        ingress: Ingress,
        egress: Egress,
        channel_key: str,
        local_senders: Iterable[str] = (),
        checks: StartupChecks | None = None,
    ) -> None:
        self._settings = settings
        self._store = store
        self._connector = connector
        self._ingress = ingress
        self._egress = egress
        self._channel = channel_key
        self._checks = checks
        policy = Policy(
            settings.allowed_senders, settings.max_messages_per_minute, settings.default_region, local_senders
        )
        self.orchestrator = Orchestrator(
            store, policy, Approvals(store, settings.approval_ttl_minutes), Workspaces(settings),
            connector_name=settings.connector, reply_to_unknown=settings.reply_to_unknown_senders,
            run_links=settings.web_base_url if settings.web_enabled else None,
            send_files=settings.send_files_per_reply > 0, chat_read_only=settings.chat_read_only,
        )
        self.connector_status = "not checked yet"
        self._scheduler: Scheduler[Work] = Scheduler()
        # Daemon threads: a turn stuck in a connector must not keep the process alive after shutdown.
        for index in range(settings.max_concurrent_ai_calls):
            threading.Thread(target=self._work, name=f"turn-{index}", daemon=True).start()
        self._stop = threading.Event()
        self._abandon = threading.Event()  # shutdown killed the running turns: record nothing for them
        self._inbox: queue.Queue[InboundMessage | _WebApproval | _End | BaseException] = queue.Queue()
        self._tracker: CursorTracker | None = None
        self._catchup: tuple[int, float] | None = None  # first start: (up to this rowid, skip if older than)
        self._send_lock = threading.Lock()
        self.ready = threading.Event()

    # ------------------------------------------------------------------------------------------- lifecycle

    def request_stop(self) -> None:
        """From a signal handler or another thread: stop reading, finish or kill running turns, return."""
        self._stop.set()

    def run(self) -> int:
        """Runs until the input ends (then drains every pending turn) or a stop is requested. Returns the exit
        status: 0, or 1 when the ingress failed."""
        previous = self._store.meta(CHILD_TOKEN_KEY)
        if previous:
            orphans.kill_orphans(previous)
        self._store.set_meta(CHILD_TOKEN_KEY, orphans.mark_children())
        interrupted = self._store.interrupt_running_runs()
        if interrupted:
            log.warning("%d run(s) were cut short by the previous shutdown; their messages are handled again",
                        interrupted)
        self._check_connector()
        # A daemon that exited here would be restarted by launchd every 10 s; it waits instead, saying why.
        if self._checks is not None and not self._checks.wait_until_ready(self._stop):
            self._shutdown()
            return 0
        start = self._store.cursor(self._channel)
        if start is None:
            start = self._first_start()
        else:
            self._catchup = self._saved_catchup()
        self._tracker = CursorTracker(start)
        self._resume_web_approvals()
        threading.Thread(target=self._read, args=(start,), name="ingress", daemon=True).start()
        watchdog = threading.Thread(target=self._watch_timeouts, name="watchdog", daemon=True)
        watchdog.start()
        self._store.log_event("start", f"channel {self._channel}, cursor {start}")
        log.info("apple-flow daemon ready (channel %s, cursor %d)", self._channel, start)
        self.ready.set()
        status = 0
        while not self._stop.is_set():
            try:
                item = self._inbox.get(timeout=0.2)
            except queue.Empty:
                continue
            if isinstance(item, _End):
                while not self._scheduler.wait_idle(0.2) and not self._stop.is_set():
                    pass  # drain: finish every pending turn (a stop request cuts it short)
                break
            if isinstance(item, _WebApproval):
                self._queue_approved(item.approval)
                continue
            if isinstance(item, BaseException):
                log.error("reading messages failed: %s", item)
                self._store.log_event("ingress_error", str(item))
                status = 1
                break
            try:
                self._dispatch(item)
            except Exception as exc:  # e.g. the database cannot be written: stop; a restart redoes the message
                log.exception("handling message %d failed; stopping", item.rowid)
                self._store_event_quietly("dispatch_error", f"{type(exc).__name__}: {exc}")
                status = 1
                break
        self._shutdown()
        return status

    def _first_start(self) -> int:
        """A fresh install does not answer history: it starts at the newest row, less the last few rows that
        are recent enough to be waiting for it (``startup_catchup_window_seconds``, at most
        ``max_startup_replay_rows``)."""
        try:
            latest = self._ingress.latest_rowid()
        except Exception as exc:
            self._store.log_event("ingress_error", str(exc))
            raise StartError(str(exc)) from exc
        start = max(0, latest - self._settings.max_startup_replay_rows)
        self._catchup = (latest, time.time() - self._settings.startup_catchup_window_seconds)
        # Saved with the cursor: a first run stopped before it passed the old rows must not answer them next time.
        with self._store.transaction():
            self._store.set_meta(self._catchup_key, f"{self._catchup[0]} {self._catchup[1]}")
            self._store.set_cursor(self._channel, start)
        return start

    @property
    def _catchup_key(self) -> str:
        return f"catchup:{self._channel}"

    def _saved_catchup(self) -> tuple[int, float] | None:
        saved = (self._store.meta(self._catchup_key) or "").split()
        return (int(saved[0]), float(saved[1])) if len(saved) == 2 else None

    def _read(self, after: int) -> None:
        try:
            tracker = self._require_tracker()
            for item in self._ingress.messages(after, self._stop):
                if isinstance(item, Skipped):  # passed at once (an echo, a reaction): a restart must not re-read it
                    if item.forgeable:  # counted for `health` (once: with the cursor), so the owner knows why
                        with self._store.transaction():
                            self._store.log_event(FORGEABLE_EVENT, item.reason, item.sender)
                            self._finished(item.rowid, skipped=True)
                        continue
                    self._finished(item.rowid, skipped=True)
                    continue
                # Opened here, before the ingress moves on to later (maybe skipped) rows, so the cursor cannot
                # pass this message while it waits in the inbox.
                tracker.opened(item.rowid)
                self._inbox.put(item)
        except Exception as exc:  # the main loop reports it and stops
            self._inbox.put(exc)
            return
        self._inbox.put(_End())

    def _check_connector(self) -> None:
        try:
            self._connector.ensure_started()
        except ConnectorError as exc:
            self.connector_status = f"not ready: {exc}"
            log.warning("the connector is not ready: %s", exc)
        else:
            self.connector_status = "ready"

    def _shutdown(self) -> None:
        self._scheduler.close()
        grace = self._settings.shutdown_grace_seconds
        if not self._scheduler.wait_idle(grace):
            log.warning("turns still running after %.0f s: stopping them (their messages are redone next start)",
                        grace)
            self._abandon.set()
            self._connector.cancel()
            self._scheduler.wait_idle(KILL_WAIT_SECONDS)
        try:
            self._connector.shutdown()
        finally:
            self._store.log_event("stop", f"channel {self._channel}")

    # ------------------------------------------------------------------------------------------- messages

    def _dispatch(self, message: InboundMessage) -> None:
        record = self._store.message(self._channel, message.rowid)
        if record is not None and record.state in FINISHED:
            self._finish_message(message)  # its reply's files that a crash left unsent go first
            return
        if record is not None and record.state == "replied" and record.reply is not None:
            if self._egress.went_out(message.reply_target, record.reply, message.rowid):  # sent just before a crash
                self._store.mark_sent(self._channel, message.rowid)
                self._finish_message(message)
            else:
                self._deliver(message, record.reply)  # recorded before a crash, never sent
            return
        for _ in range(DECIDE_ATTEMPTS):
            if self._apply(message, self._decide(message)):
                return
        # Approval requests this message decides kept being decided elsewhere first (not seen in practice).
        self._apply(message, Reply("Sorry, that request changed while I was handling it. Send it again."))

    def _decide(self, message: InboundMessage) -> Decision:
        key = f"{self._channel}:{message.rowid}"
        try:
            return self._stale(message) or self.orchestrator.decide(message, key, self._view(message.sender))
        except Exception as exc:
            log.exception("handling message %s failed", key)
            return Reply(failures.explain_exception(exc))

    def _view(self, sender: str) -> View:
        job = self._scheduler.active(sender)
        started = job.started_at if job is not None else None
        running = (job.payload.turn.request, started) if job is not None and started is not None else None
        run_id = job.run_id if job is not None and started is not None else None
        checks = self._checks.summary() if self._checks is not None else ""
        queued = tuple(Queued(j.payload.turn.request, j.payload.turn.approval) for j in self._scheduler.queued(sender))
        return View(running, run_id, queued, self.connector_status, checks)

    def _apply(self, message: InboundMessage, decision: Decision) -> bool:
        """Does what the orchestrator decided; what it records, it records in one transaction. False (nothing
        done) when an approval request it decides was decided elsewhere in between: decide again."""
        store, sender = self._store, message.sender
        if isinstance(decision, Ignore):
            log.info("ignored a message from %s (%s)", sender, decision.reason)
            with store.transaction():
                store.ignore(self._channel, message.rowid, sender, message.text, decision.reason)
                store.log_event("ignored", f"{decision.reason}: {message.text[:80]!r}", sender)
                self._finished(message.rowid)
        elif isinstance(decision, Reply):
            with store.transaction():
                if not store.decide_approvals(decision.decided):
                    return False
                store.take(self._channel, message.rowid, sender, message.text)
                if decision.clear_history:
                    store.clear(sender)
                store.record_reply(self._channel, message.rowid, decision.text)
                # Recorded with the reply that tells of them: a restart neither runs them nor tells of them twice.
                # (A turn that started since the reply was decided is not dropped here: the cancel below stops it.)
                for job in self._scheduler.drop_queued(sender) if decision.drop_queued else ():
                    self._record_dropped(job)
            if decision.cancel:
                self._cancel(sender, decision.cancel_run)
            self._deliver(message, decision.text)
        else:
            with store.transaction():
                if not store.decide_approvals(decision.decided):
                    return False
                store.take(self._channel, message.rowid, sender, message.text)
            if decision.ack:
                self._progress(message.reply_target, decision.ack)
            self._scheduler.submit(Job(sender, Work(message, decision)))
        return True

    def run_approved(self, approval: Approval) -> None:
        """From the web page (any thread): a request approved there runs in the sender's queue, and its answer
        goes to the sender like any reply."""
        self._inbox.put(_WebApproval(approval))

    def _resume_web_approvals(self) -> None:
        """At start-up: requests approved on the web page whose run a crash or stop cut short run again (a message
        is handled again instead); an answer recorded but not sent is sent."""
        for approval, reply in self._store.unfinished_web_runs():
            if reply is None:
                log.info("%s was approved on the web page and did not finish: running it again", approval.id)
                self._inbox.put(_WebApproval(approval))
            else:
                self._send_web_reply(approval, reply)
        for reply_of in self._store.replies_with_unsent_files(WEB_REPLY_PREFIX):  # answers sent, files cut short
            self._send_reply_files(reply_of)

    def _send_web_reply(self, approval: Approval, reply: str) -> None:
        failed = self._send(approval.sender, reply)
        with self._store.transaction():
            self._store.web_reply_sent(approval.id)
            if failed is not None:
                self._store.log_event("send_failed", failed, approval.sender)
        self._send_reply_files(web_reply(approval.id))

    def _queue_approved(self, approval: Approval) -> None:
        turn = self.orchestrator.approved_turn(approval)
        if turn.ack:
            self._progress(turn.sender, turn.ack)
        self._scheduler.submit(Job(turn.sender, Work(None, turn)))

    def _stale(self, message: InboundMessage) -> Ignore | None:
        if self._catchup is None:
            return None
        up_to, oldest = self._catchup
        if message.rowid <= up_to and message.date.timestamp() < oldest:
            return Ignore("sent before the daemon was first started")
        return None

    # ------------------------------------------------------------------------------------------- turns

    def _work(self) -> None:
        """A worker thread: runs the turns the scheduler hands out until it closes."""
        while (job := self._scheduler.next()) is not None:
            try:
                self._run_job(job)
            except Exception:  # keep the worker: one broken job must not shrink the pool
                log.exception("a turn of %s failed", job.sender)
            finally:
                self._scheduler.done(job)

    def _run_job(self, job: Job[Work]) -> None:
        message, turn = job.payload.message, job.payload.turn
        if message is not None and self._ingress.unsent(message.rowid):  # withdrawn while it waited
            self._withdrawn(message, turn)
            return
        run_id = new_run_id()
        key = f"{self._channel}:{message.rowid}" if message is not None else None
        self._store.start_run(run_id, turn.sender, turn.kind.value, str(turn.workspace), turn.request, key)
        job.run_id = run_id  # from now on `cancel <run id>` finds it
        window = self._connector.context_window
        request = TurnRequest(
            turn.prompt, turn.workspace, tuple(self._store.history(turn.sender, window)), turn.read_only, turn.plan,
            key=turn.sender, files_note=self._receive_files(message, turn),
        )
        outcome: TurnOutcome | Exception
        try:
            recipient = message.reply_target if message is not None else turn.sender
            outcome = self._turn(request, recipient, RunLog(self._store, run_id))
        except Exception as exc:  # a connector bug must not take the daemon down; the sender hears about it
            log.exception("turn %s failed", run_id)
            outcome = exc
        stop = job.stop_reply if job.cancelled.is_set() else None
        finished = self.orchestrator.conclude(turn, run_id, outcome, stop, keep_exchange=window > 0)
        if self._abandon.is_set():
            return
        finished, outgoing = self._check_files(finished, turn.workspace)
        recipient = message.reply_target if message is not None else turn.sender
        reply_of = (message_reply(self._channel, message.rowid) if message is not None
                    else web_reply(turn.approval.id) if turn.approval is not None else None)
        with self._store.transaction():
            self._store.record_turn(self._channel, message.rowid if message else None, turn.sender, run_id, finished)
            if message is None and turn.approval is not None:  # approved on the web page: its reply is kept there
                self._store.record_web_reply(turn.approval.id, finished.reply)
            if reply_of is not None and finished.reply is not None:  # the files go with the reply, or not at all
                self._store.record_reply_files(
                    reply_of, recipient, turn.sender, str(turn.workspace),
                    [(item.shown, str(item.path)) for item in outgoing if item.path is not None],
                )
        if message is None:
            if turn.approval is not None and finished.reply is not None:
                self._send_web_reply(turn.approval, finished.reply)
        elif finished.reply is None:
            self._finished(message.rowid)
        else:
            self._deliver(message, finished.reply)

    def _receive_files(self, message: InboundMessage | None, turn: Turn) -> str:
        """Copies the message's files into the turn's workspace; the note telling the agent about them."""
        if message is None or not message.attachments:
            return ""
        attachments = self._ingress.settle_attachments(message, self._stop)
        limits = FileLimits(self._settings.attachment_max_bytes, self._settings.attachment_max_message_bytes)
        arrivals = receive(attachments, turn.workspace, message.rowid, limits)
        for arrival in arrivals:
            if arrival.path is None:
                log.info("message %d: %r not received (%s)", message.rowid, arrival.name, arrival.problem)
        self._store.log_event(
            "files", ", ".join(a.path or f"{a.name!r} missing" for a in arrivals)[:300], message.sender
        )
        return describe(arrivals)

    def _turn(self, request: TurnRequest, recipient: str, record: RunLog) -> TurnOutcome:
        """Runs the connector's turn to its outcome, passing its progress on to ``recipient`` (throttled) and
        keeping the agent's events with the run (for the web page)."""
        throttle = ProgressThrottle(self._settings.progress_interval_seconds)
        with contextlib.closing(self._connector.run(request)) as items:
            for item in items:
                if isinstance(item, TurnOutcome):
                    return item
                assert isinstance(item, AgentEvent)
                record(item.data)
                for activity in item.progress:
                    text = throttle.message(activity)
                    if text is not None:
                        self._progress(recipient, text)
        raise ConnectorError("the connector ended the turn without an outcome")

    # ------------------------------------------------------------------------------------------- sending

    def _withdrawn(self, message: InboundMessage, turn: Turn) -> None:
        """Not run; an approval it carried is pending again, and the sender, told it was approved, hears so."""
        log.info("message %d of %s was unsent before its turn started: not run", message.rowid, message.sender)
        self._store.log_event("unsent", f"not run: {message.text[:80]!r}", message.sender)
        if turn.approval is None:
            with self._store.transaction():
                self._store.record_reply(self._channel, message.rowid, None, "unsent before it ran")
                self._finished(message.rowid)
            return
        note = (f"Not run: you unsent `{message.text.strip()}` before it started. "
                f"{turn.approval.id} is pending again.")
        with self._store.transaction():
            self._store.reopen_approval(turn.approval.id)
            self._store.record_reply(self._channel, message.rowid, note)
        self._deliver(message, note)

    def _record_dropped(self, job: Job[Work]) -> None:
        """A queued turn dropped by `cancel` (in the caller's transaction): finished without a reply; the approval
        it was to carry out is pending again."""
        message, turn = job.payload.message, job.payload.turn
        self._store.log_event("dropped", f"not run (cancel): {turn.request[:80]!r}", turn.sender)
        if turn.approval is not None:
            self._store.reopen_approval(turn.approval.id)
        if message is None:  # approved on the web page
            if turn.approval is not None:
                self._store.record_web_reply(turn.approval.id, None)
            return
        self._store.record_reply(self._channel, message.rowid, None, "cancelled before it ran")
        self._finished(message.rowid)

    def _deliver(self, message: InboundMessage, reply: str) -> None:
        # The sender, or e.g. the group chat the message came from.
        failed = self._send(message.reply_target, reply)
        with self._store.transaction():
            self._store.mark_sent(self._channel, message.rowid, failed=failed)
            if failed is not None:
                self._store.log_event("send_failed", failed, message.sender)
        self._finish_message(message)

    def _finish_message(self, message: InboundMessage) -> None:
        """Once its reply is out (or failed): the reply's files not sent yet, then the cursor may pass the message
        (so a restart after a crash in between reads it again and sends the rest)."""
        self._send_reply_files(message_reply(self._channel, message.rowid))
        self._finished(message.rowid)

    def _send(self, recipient: str, reply: str) -> str | None:
        """Sends a reply (the channel notes it in the store's record of sent texts, for echoes); returns why it
        could not be sent, or None."""
        try:
            with self._send_lock:
                self._egress.send(recipient, reply)
        except Exception as exc:  # SendError, or a channel bug: recorded by the caller, never fatal
            if not isinstance(exc, SendError):
                log.exception("the channel failed sending to %s", recipient)
            log.error("could not send the reply to %s: %s", recipient, exc)
            return str(exc)
        return None

    def _check_files(self, finished: FinishedTurn, workspace: Path) -> tuple[FinishedTurn, list[Outgoing]]:
        """Which of the files the answer names may go (inside the workspace, within the limits); the reply then
        says which are being sent and which not, and why."""
        if not finished.files or finished.reply is None:
            return finished, []
        s = self._settings
        outgoing = check_all(finished.files, workspace, s.send_file_max_bytes, s.send_files_per_reply)
        return replace(finished, reply=f"{finished.reply}\n\n{note(outgoing)}"), outgoing

    def _send_reply_files(self, reply_of: str) -> None:
        """Sends the files a reply names that are not sent yet (recorded with the reply), each marked as it goes.
        Each is checked again first: after a crash it may have gone or grown past the limit. One that cannot go
        gets a line saying why."""
        for item in self._store.unsent_reply_files(reply_of):
            if self._settings.send_files_per_reply <= 0:  # turned off before a restart
                problem: str | None = "sending files is turned off"
            else:
                checked = check(item.path, Path(item.workspace), self._settings.send_file_max_bytes)
                problem = checked.problem if checked.path is None else self._send_file(item.recipient, checked.path)
            if problem is not None:
                # Said before it is marked: a crash in between tries the file again rather than keep silent.
                self._progress(item.recipient, f"Could not send {item.shown}: {problem}")
            with self._store.transaction():
                self._store.reply_file_done(item.id, problem)
                if problem is None:
                    self._store.log_event("file_sent", item.shown, item.sender)
                else:
                    self._store.log_event("file_not_sent", f"{item.shown}: {problem}", item.sender)

    def _send_file(self, recipient: str, path: Path) -> str | None:
        """Sends one checked file; returns why it could not be sent, or None."""
        try:
            with self._send_lock:
                self._egress.send_file(recipient, path)
        except Exception as exc:  # SendError, or a channel bug: said to the sender, never fatal
            if not isinstance(exc, SendError):
                log.exception("the channel failed sending %s to %s", path, recipient)
            return str(exc)
        return None

    def _finished(self, rowid: int, skipped: bool = False) -> None:
        """The message (or skipped row) is done: the cursor may pass it."""
        tracker = self._require_tracker()
        position = tracker.passed(rowid) if skipped else tracker.finished(rowid)
        if position is not None:
            self._store.advance_cursor(self._channel, position)

    def _progress(self, recipient: str, text: str) -> None:
        """Best effort: progress is not recorded with the message, and a failure to send it does not stop the
        turn."""
        try:
            with self._send_lock:
                self._egress.send_progress(recipient, text)
        except Exception as exc:
            log.warning("could not send progress to %s: %s", recipient, exc)

    # ------------------------------------------------------------------------------------------- stopping turns

    def _cancel(self, sender: str, run_id: str | None = None) -> bool:
        """Stops the sender's running turn (the sender was told), with ``run_id`` only if it is that run; False
        when nothing (or another run, the named one having ended meanwhile) runs."""
        job = self._scheduler.active(sender)
        if job is None or job.started_at is None or (run_id is not None and job.run_id != run_id):
            return False
        job.cancelled.set()
        self._connector.cancel(sender)
        return True

    def _watch_timeouts(self) -> None:
        """A turn past ``turn_timeout_seconds`` is killed here even if the connector's own timeout failed."""
        limit = self._settings.turn_timeout_seconds
        while not self._stop.wait(0.5):
            now = time.time()
            for job in self._scheduler.running():
                if job.started_at is not None and now - job.started_at > limit and not job.cancelled.is_set():
                    log.warning("a turn of %s exceeded %g s: stopping it", job.sender, limit)
                    job.stop_reply = failures.timed_out(limit)
                    job.cancelled.set()
                    self._connector.cancel(job.sender)

    def _store_event_quietly(self, kind: str, detail: str) -> None:
        try:
            self._store.log_event(kind, detail)
        except Exception:
            log.exception("could not record the %s event", kind)

    def _require_tracker(self) -> CursorTracker:
        if self._tracker is None:
            raise RuntimeError("the daemon is not running")
        return self._tracker
