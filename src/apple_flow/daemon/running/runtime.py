"""The daemon loop, which does everything the orchestrator decides: messages from the ingress, a decision for each,
turns run on worker threads, replies to the egress, every step recorded in the store first.

Data flows one way: the runtime pulls messages from the ingress, asks the orchestrator (a plain decision back),
pulls the turn's events and outcome from the connector, asks the orchestrator what the outcome means, records it,
and hands the reply to the egress. Nothing below it calls back into it.

Its parts (``Parts``, built by ``apple_flow.assemble``: the runtime builds none of them): work comes from two
origins, a message (``message_jobs``: its turn, and the message's way from taken to passed by the cursor) and a task
approved on the web page (``web_jobs``); each kind of ``Work`` (``jobs``) carries what differs, computed where it is
created, so ``turn_runner.TurnRunner`` runs either the same way. ``ReplySender`` sends replies, progress and files.
Threads (turn workers, the ingress reader, the watchdog) start in ``run()``.

The channel's interface (``channels.base``) declares all the runtime uses of it, with defaults: the ingress yields
messages and the rows it skips, says whether a message was unsent and waits (bounded) for a message's files still
arriving; the egress sends replies, progress and files, notes what it sent in the store's record of sent texts
(which its ingress reads to skip echoes, across restarts) and says whether a reply went out before a crash.

Files: a turn's message's files are copied into its workspace (``arrivals``) when the turn starts; the files its
answer names (``files_to_send``) are checked against the workspace, announced in the reply, recorded with it and sent
after it.

Crash safety: a message is recorded as taken before its turn runs (as it starts, with the run); its reply is
recorded (with the run's end, the conversation's new exchange, any approval request, the files it sends and its
lines in the channel's record of sent texts, in one transaction) before it is sent;
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

import logging
import queue
import threading
import time
from dataclasses import dataclass

from apple_flow.channels.base import Channel, InboundMessage, Skipped
from apple_flow.config import Settings
from apple_flow.daemon.deciding import failures
from apple_flow.daemon.deciding.catch_up import listing
from apple_flow.daemon.deciding.commands import parse
from apple_flow.daemon.deciding.decisions import Decision, Hold, Ignore, LoginLinks, Queued, Reply, View
from apple_flow.daemon.deciding.orchestrator import Orchestrator
from apple_flow.daemon.deciding.status_replies import FORGEABLE_EVENT
from apple_flow.daemon.running import orphans
from apple_flow.daemon.running.jobs import Work
from apple_flow.daemon.running.message_jobs import MessageLedger
from apple_flow.daemon.running.owner_link import OwnerLink
from apple_flow.daemon.running.scheduler import Job, Scheduler
from apple_flow.daemon.running.sending import ReplySender
from apple_flow.daemon.running.web_jobs import WebLedger
from apple_flow.daemon.running.workers import TurnWorkers
from apple_flow.daemon.store import Approval, Store

log = logging.getLogger(__name__)

CHILD_TOKEN_KEY = "child_token"
KILL_WAIT_SECONDS = 5.0  # after killing turns at shutdown, how long to wait for their threads to notice
DECIDE_ATTEMPTS = 3  # deciding again when an approval request changed between deciding and recording


@dataclass(frozen=True)
class _WebApproval:
    """A request approved on the web page (and recorded there), to run like one approved by text."""

    approval: Approval


class _End:
    """The ingress ran out (end of piped input)."""


class _Wake:
    """A stop was requested: the main loop, blocked waiting for the next item, looks at it."""


class StartError(RuntimeError):
    """The daemon cannot start reading messages (e.g. chat.db unreadable); the message says what to do."""


@dataclass(frozen=True)
class Parts:
    """What the runtime runs, built from the settings by ``apple_flow.assemble`` (the workers and the message
    ledger share its ``scheduler`` and its ``stop``)."""

    channel: Channel
    orchestrator: Orchestrator
    scheduler: Scheduler[Work]
    stop: threading.Event
    sender: ReplySender
    turns: TurnWorkers
    messages: MessageLedger
    web: WebLedger
    owner_link: OwnerLink


class Runtime:
    def __init__(self, settings: Settings, store: Store, parts: Parts) -> None:
        self._settings = settings
        self._store = store
        self._channel = parts.channel
        self._ingress = parts.channel.ingress
        self._readiness = parts.channel.permissions  # what the channel needs the system to allow first
        self.orchestrator = parts.orchestrator
        self._scheduler = parts.scheduler
        self._stop = parts.stop
        self._stopping = False
        # A SimpleQueue: its put() may be called from a signal handler (request_stop) while the main thread waits.
        self._inbox: queue.SimpleQueue[InboundMessage | _WebApproval | _End | _Wake | BaseException] = (
            queue.SimpleQueue()
        )
        self._catchup: tuple[int, float] | None = None  # first start: (up to this rowid, skip if older than)
        self._sender = parts.sender
        self._turns = parts.turns
        self._messages = parts.messages
        self._web = parts.web
        self._owner_link = parts.owner_link
        self._held_unlisted = True  # late messages may wait to be listed (checked once the backlog is read)
        self.ready = threading.Event()

    @property
    def channel(self) -> Channel:
        """The channel it reads and answers on (its caller closes it after the run)."""
        return self._channel

    @property
    def connector_status(self) -> str:
        return self._turns.status

    # ------------------------------------------------------------------------------------------- lifecycle

    def request_stop(self) -> None:
        """From a signal handler or another thread: stop reading, finish or kill running turns, return."""
        # A second signal can arrive while the handler of the first is inside Event.set, whose lock is not
        # reentrant: the nested call must not take it again (that hung the daemon on launchd's double SIGTERM).
        if self._stopping:
            return
        self._stopping = True
        self._stop.set()
        self._inbox.put(_Wake())

    def run(self) -> int:
        """Runs until the input ends (then drains every pending turn) or a stop is requested. Returns the exit
        status: 0, or 1 when the ingress failed."""
        previous = self._store.meta.get_meta(CHILD_TOKEN_KEY)
        if previous:
            orphans.kill_orphans(previous)
        self._store.meta.set_meta(CHILD_TOKEN_KEY, orphans.mark_children())
        interrupted = self._store.runs.interrupt_running()
        if interrupted:
            log.warning("%d run(s) were cut short by the previous shutdown; their messages are handled again",
                        interrupted)
        self._turns.check()
        # A daemon that exited here would be restarted by launchd every 10 s; it waits instead, saying why.
        if self._readiness is not None and not self._readiness.wait_until_ready(self._stop):
            self._shutdown()
            return 0
        start = self._store.cursors.get_cursor(self._key)
        if start is None:
            start = self._first_start()
        else:
            self._catchup = self._saved_catchup()
        self._messages.start(start)
        self._turns.start()
        for approval in self._web.resume():  # a message is handled again instead, when the ingress reads it
            self._inbox.put(_WebApproval(approval))
        threading.Thread(target=self._read, args=(start,), name="ingress", daemon=True).start()
        self._owner_link.start()
        self._store.events.log("start", f"channel {self._key}, cursor {start}")
        log.info("apple-flow daemon ready (channel %s, cursor %d)", self._key, start)
        self.ready.set()
        status = 0
        while not self._stop.is_set():
            try:
                # Blocks: every producer, and request_stop, puts something. Only while late messages wait to be
                # listed does it look every 0.2 s whether the ingress has caught up.
                item = self._inbox.get(timeout=0.2 if self._held_unlisted else None)
            except queue.Empty:
                self._list_held()
                continue
            if isinstance(item, _Wake):
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
                self._store.events.log("ingress_error", str(item))
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
            self._store.events.log("ingress_error", str(exc))
            raise StartError(str(exc)) from exc
        start = max(0, latest - self._settings.imessage.max_startup_replay_rows)
        self._catchup = (latest, time.time() - self._settings.imessage.startup_catchup_window_seconds)
        # Saved with the cursor: a first run stopped before it passed the old rows must not answer them next time.
        with self._store.transaction():
            self._store.meta.set_meta(self._catchup_key, f"{self._catchup[0]} {self._catchup[1]}")
            self._store.cursors.set_cursor(self._key, start)
        return start

    @property
    def _key(self) -> str:
        return self._channel.key

    @property
    def _catchup_key(self) -> str:
        return f"catchup:{self._key}"

    def _saved_catchup(self) -> tuple[int, float] | None:
        saved = (self._store.meta.get_meta(self._catchup_key) or "").split()
        return (int(saved[0]), float(saved[1])) if len(saved) == 2 else None

    def _read(self, after: int) -> None:
        try:
            for item in self._ingress.messages(after, self._stop):
                if isinstance(item, Skipped):  # passed at once (an echo, a reaction): a restart must not re-read it
                    if item.forgeable:  # counted for `health` (once: with the cursor), so the owner knows why
                        with self._store.transaction():
                            self._store.events.log(FORGEABLE_EVENT, item.reason, item.sender)
                            self._messages.done(item.rowid, skipped=True)
                        continue
                    self._messages.done(item.rowid, skipped=True)
                    continue
                # Opened here, before the ingress moves on to later (maybe skipped) rows, so the cursor cannot
                # pass this message while it waits in the inbox.
                self._messages.opened(item.rowid)
                self._inbox.put(item)
        except Exception as exc:  # the main loop reports it and stops
            self._inbox.put(exc)
            return
        self._inbox.put(_End())

    def _shutdown(self) -> None:
        self._owner_link.stop()
        self._scheduler.close()
        grace = self._settings.limits.shutdown_grace_seconds
        if not self._scheduler.wait_idle(grace):
            log.warning("turns still running after %.0f s: stopping them (their messages are redone next start)",
                        grace)
            self._turns.stop_running()
        # Replies sent and being confirmed: recorded as sent or failed before the process ends (else the next start
        # asks chat.db whether they went out).
        if not self._sender.wait_confirmations(self._settings.imessage.send_confirm_seconds + 1):
            log.warning("replies still unconfirmed at shutdown: the next start checks whether they went out")
        try:
            self._turns.shutdown()
        finally:
            self._store.events.log("stop", f"channel {self._key}")

    # ------------------------------------------------------------------------------------------- messages

    def _dispatch(self, message: InboundMessage) -> None:
        if self._messages.replay(message):
            return
        for _ in range(DECIDE_ATTEMPTS):
            if self._apply(message, self._decide(message)):
                return
        # Approval requests this message decides kept being decided elsewhere first (not seen in practice).
        self._apply(message, Reply("Sorry, that request changed while I was handling it. Send it again."))

    def _decide(self, message: InboundMessage) -> Decision:
        ref = self._messages.ref(message)
        try:
            command = parse(message.text)  # what it asks for, read once
            view = self._view(message.sender) if self.orchestrator.needs_view(message, command) else View()
            return self._stale(message) or self.orchestrator.decide(message, command, ref, view)
        except Exception as exc:
            log.exception("handling message %s failed", ref)
            return Reply(failures.explain_exception(exc))

    def _view(self, sender: str) -> View:
        job = self._scheduler.active(sender)
        started = job.started_at if job is not None else None
        running = (job.payload.turn.request, started) if job is not None and started is not None else None
        run_id = job.run_id if job is not None and started is not None else None
        readiness = self._readiness.summary() if self._readiness is not None else ""
        queued = tuple(Queued(j.payload.turn.request, j.payload.turn.approval) for j in self._scheduler.queued(sender))
        return View(running, run_id, queued, self._turns.status, readiness)

    def _apply(self, message: InboundMessage, decision: Decision) -> bool:
        """Does what the orchestrator decided; what it records, it records in one transaction. False (nothing
        done) when an approval request it decides was decided elsewhere in between: decide again."""
        store, sender = self._store, message.sender
        if isinstance(decision, Ignore):
            log.info("ignored a message from %s (%s)", sender, decision.reason)
            with store.transaction():
                store.messages.ignore_message(self._key, message.rowid, sender, message.text, decision.reason,
                                              message.copy_marks)
                store.events.log("ignored", f"{decision.reason}: {message.text[:80]!r}", sender)
                self._messages.done(message.rowid)
        elif isinstance(decision, Hold):
            with store.transaction():
                store.messages.ignore_message(self._key, message.rowid, sender, message.text,
                                              "late: listed, runs on `run`", message.copy_marks)
                store.held.hold(self._key, message.rowid, sender, message.reply_target, message.text,
                                message.date.timestamp(), forgeable=message.forgeable)
                store.events.log("held", f"came while offline: {message.text[:80]!r}", sender)
                self._messages.done(message.rowid)
            self._held_unlisted = True
        elif isinstance(decision, Reply):
            recipient = message.reply_target
            with store.transaction():  # the reply and its sent lines recorded before it goes
                if not store.approvals.record_decisions(decision.decided):
                    return False
                self._messages.take(message)
                if decision.clear_history:
                    store.history.clear_history(sender)
                store.messages.record_message_reply(self._key, message.rowid, decision.text)
                if decision.login_link is not None:
                    store.web_logins.add_link(decision.login_link, sender, self._settings.web.link_minutes * 60)
                # Recorded with the reply that tells of them: a restart neither runs them nor tells of them twice.
                # (A turn that started since the reply was decided is not dropped here: the cancel below stops it.)
                for job in self._scheduler.drop_queued(sender) if decision.drop_queued else ():
                    self._record_dropped(job.payload)
                noted = self._sender.note(recipient, decision.text)
            if decision.cancel:
                self._turns.cancel(sender, decision.cancel_run)
            # Files come with turns.
            self._messages.deliver(message, recipient, decision.text, noted=noted, with_files=False)
        else:
            # Taken when its turn starts (``TurnRunner``), in the transaction that begins its run; the requests it
            # decides are recorded now, with it taken.
            if decision.decided:
                with store.transaction():
                    if not store.approvals.record_decisions(decision.decided):
                        return False
                    self._messages.take(message)
            if decision.ack:
                self._sender.progress(message.reply_target, decision.ack)
            self._scheduler.submit(Job(sender, self._messages.work(message, decision)))
        return True

    def page_started(self, local_url: str) -> None:
        """The web page serves at ``local_url``: `web` now answers with login links (to the base URL if set)."""
        from apple_flow.local_name import safari_problem

        base = self._settings.web.base_url
        self.orchestrator.login_links = LoginLinks(
            base or local_url, self._settings.web.link_minutes, mac_only=base is None,
            channel_carries=self._channel.carries_links, safari_note="" if base else safari_problem(local_url),
        )

    def send_notice(self, recipient: str, text: str) -> str | None:
        """A text of the daemon's own (not a reply: e.g. telling the owner it is ready), sent like a reply, under
        the same lock; returns why it could not be sent, or None."""
        return self._sender.send(recipient, text)

    def run_approved(self, approval: Approval) -> None:
        """From the web page (any thread): a request approved there runs in the sender's queue, and its answer
        goes to the sender like any reply."""
        self._inbox.put(_WebApproval(approval))

    def _queue_approved(self, approval: Approval) -> None:
        turn = self.orchestrator.approved_turn(approval)
        if turn.ack:
            self._sender.progress(turn.sender, turn.ack)
        self._scheduler.submit(Job(turn.sender, self._web.work(approval, turn)))

    def _list_held(self) -> None:
        """Once a backlog (after sleep) has been read whole: each sender with late messages gets one listing of
        them; `run` runs one."""
        if not self._held_unlisted or not self._ingress.caught_up():
            return
        self._held_unlisted = False
        for sender, reply_to in self._store.held.unlisted():
            held = self._store.held.list_new(sender)  # recorded first: a crash does not list them twice
            failed = self._sender.send(reply_to, listing(held))
            if failed is not None:
                self._store.events.log("send_failed", failed, sender)

    def _stale(self, message: InboundMessage) -> Ignore | None:
        if self._catchup is None:
            return None
        up_to, oldest = self._catchup
        if message.rowid <= up_to and message.date.timestamp() < oldest:
            return Ignore("sent before the daemon was first started")
        return None

    def _record_dropped(self, work: Work) -> None:
        """A queued turn dropped by `cancel` (in the caller's transaction): finished without a reply; the approval
        it was to carry out is pending again."""
        turn = work.turn
        self._store.events.log("dropped", f"not run (cancel): {turn.request[:80]!r}", turn.sender)
        if turn.approval is not None:
            self._store.approvals.reopen(turn.approval.id)
        work.dropped()

    def _store_event_quietly(self, kind: str, detail: str) -> None:
        try:
            self._store.events.log(kind, detail)
        except Exception:
            log.exception("could not record the %s event", kind)
