"""The daemon loop: messages from the ingress, decisions from the orchestrator, turns on the scheduler's workers,
replies to the egress, every step recorded in the store first.

Crash safety: a message is recorded as taken before its turn runs; its reply is recorded before it is sent; the
cursor passes a message only once it is finished. After ``kill -9`` the restart reads from the cursor: finished
messages are skipped, a recorded but unsent reply is sent, a taken message is handled again.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from apple_flow.channels.base import Egress, InboundMessage, Ingress, SendError
from apple_flow.config import Settings
from apple_flow.connectors.base import Connector, ConnectorError
from apple_flow.daemon import failures, orphans
from apple_flow.daemon.approvals import Approvals
from apple_flow.daemon.cursor import CursorTracker
from apple_flow.daemon.orchestrator import Ignore, Orchestrator, Reply, Turn
from apple_flow.daemon.policy import Policy
from apple_flow.daemon.progress import ProgressThrottle
from apple_flow.daemon.scheduler import Job, Scheduler
from apple_flow.daemon.store import Store
from apple_flow.daemon.workspaces import Workspaces

log = logging.getLogger(__name__)

CHILD_TOKEN_KEY = "child_token"
FINISHED = frozenset({"sent", "ignored", "send_failed"})
KILL_WAIT_SECONDS = 5.0  # after killing turns at shutdown, how long to wait for their threads to notice


@dataclass(frozen=True)
class Work:
    message: InboundMessage
    turn: Turn


class _End:
    """The ingress ran out (end of piped input)."""


class StartError(RuntimeError):
    """The daemon cannot start reading messages (e.g. chat.db unreadable); the message says what to do."""


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
    ) -> None:
        self._settings = settings
        self._store = store
        self._connector = connector
        self._ingress = ingress
        self._egress = egress
        self._channel = channel_key
        policy = Policy(
            settings.allowed_senders, settings.max_messages_per_minute, settings.default_region, local_senders
        )
        self.orchestrator = Orchestrator(
            store, connector, policy, Approvals(store, settings.approval_ttl_minutes), Workspaces(settings),
            activity=self, connector_name=settings.connector,
            reply_to_unknown=settings.reply_to_unknown_senders,
        )
        self._scheduler: Scheduler[Work] = Scheduler(settings.max_concurrent_ai_calls, self._run_job)
        self._stop = threading.Event()
        self._abandon = threading.Event()  # shutdown killed the running turns: record nothing for them
        self._inbox: queue.Queue[InboundMessage | _End | BaseException] = queue.Queue()
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
        start = self._store.cursor(self._channel)
        if start is None:
            start = self._first_start()
        else:
            self._catchup = self._saved_catchup()
        tracker = CursorTracker(start, lambda position: self._store.set_cursor(self._channel, position))
        self._tracker = tracker
        self._remember_recent_sends()
        if hasattr(self._ingress, "on_skip"):
            # Rows the ingress skips (its own echoes, reactions) must be passed too, or a restart would re-read
            # them once the in-memory echo record is gone.
            self._ingress.on_skip = lambda skipped: tracker.passed(skipped.rowid)
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

    def _remember_recent_sends(self) -> None:
        """Hands the egress what the previous run sent within the echo window: their echoes may still be on the
        way (a person texting themselves), and the egress's own record of them died with that run."""
        recent = self._store.sent_since(self._channel, time.time() - self._settings.echo_window_seconds)
        remember: Callable[[str, str], None] | None = getattr(self._egress, "remember", None)
        if remember is None:  # a channel without echoes (the console)
            return
        for recipient, text in recent:
            remember(recipient, text)

    def _read(self, after: int) -> None:
        try:
            tracker = self._require_tracker()
            for message in self._ingress.messages(after, self._stop):
                # Opened here, before the ingress moves on and reports later skipped rows, so the cursor cannot
                # pass this message while it waits in the inbox.
                tracker.opened(message.rowid)
                self._inbox.put(message)
        except Exception as exc:  # the main loop reports it and stops
            self._inbox.put(exc)
            return
        self._inbox.put(_End())

    def _check_connector(self) -> None:
        try:
            self._connector.ensure_started()
        except ConnectorError as exc:
            self.orchestrator.connector_status = f"not ready: {exc}"
            log.warning("the connector is not ready: %s", exc)
        else:
            self.orchestrator.connector_status = "ready"

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
        tracker = self._require_tracker()
        record = self._store.message(self._channel, message.rowid)
        if record is not None and record.state in FINISHED:
            tracker.finished(message.rowid)
            return
        if record is not None and record.state == "replied" and record.reply is not None:
            if self._went_out(message, record.reply):  # sent just before a crash: the channel shows it
                self._store.mark_sent(self._channel, message.rowid)
                tracker.finished(message.rowid)
            else:
                self._deliver(message, record.reply)  # recorded before a crash, never sent
            return
        key = f"{self._channel}:{message.rowid}"
        try:
            decision = self._stale(message) or self.orchestrator.decide(message, key)
        except Exception as exc:
            log.exception("handling message %s failed", key)
            decision = Reply(failures.explain_exception(exc))
        if isinstance(decision, Ignore):
            self._store.ignore(self._channel, message.rowid, message.sender, message.text, decision.reason)
            self._store.log_event("ignored", f"{decision.reason}: {message.text[:80]!r}", message.sender)
            log.info("ignored a message from %s (%s)", message.sender, decision.reason)
            tracker.finished(message.rowid)
        elif isinstance(decision, Reply):
            with self._store.transaction():
                self._store.take(self._channel, message.rowid, message.sender, message.text)
                self._store.record_reply(self._channel, message.rowid, decision.text)
            self._deliver(message, decision.text)
        else:
            self._store.take(self._channel, message.rowid, message.sender, message.text)
            if decision.ack:
                self._progress(message.reply_target, decision.ack)
            self._scheduler.submit(Job(message.sender, Work(message, decision)))

    def _stale(self, message: InboundMessage) -> Ignore | None:
        if self._catchup is None:
            return None
        up_to, oldest = self._catchup
        if message.rowid <= up_to and message.date.timestamp() < oldest:
            return Ignore("sent before the daemon was first started")
        return None

    def _run_job(self, job: Job[Work]) -> None:
        message, turn = job.payload.message, job.payload.turn
        if self._unsent(message):
            self._withdrawn(message, turn)
            return
        throttle = ProgressThrottle(
            self._settings.progress_interval_seconds, lambda text: self._progress(message.reply_target, text)
        )
        result = self.orchestrator.execute(
            turn, throttle, lambda: job.stop_reply if job.cancelled.is_set() else None
        )
        if self._abandon.is_set():
            return
        reply = result.reply
        with self._store.transaction():
            if result.commit is not None:
                result.commit()
            self._store.record_reply(self._channel, message.rowid, reply, "cancelled" if reply is None else None)
        if reply is None:
            self._require_tracker().finished(message.rowid)
        else:
            self._deliver(message, reply)

    def _went_out(self, message: InboundMessage, reply: str) -> bool:
        went_out: Callable[[str, str, int], bool] | None = getattr(self._egress, "went_out", None)
        return went_out is not None and went_out(message.reply_target, reply, message.rowid)

    def _unsent(self, message: InboundMessage) -> bool:
        """The sender unsent the message while its turn waited (a channel that can tell offers ``unsent``)."""
        unsent: Callable[[int], bool] | None = getattr(self._ingress, "unsent", None)
        return unsent is not None and unsent(message.rowid)

    def _withdrawn(self, message: InboundMessage, turn: Turn) -> None:
        """Not run; an approval it carried is pending again, and the sender, told it was approved, hears so."""
        log.info("message %d of %s was unsent before its turn started: not run", message.rowid, message.sender)
        self._store.log_event("unsent", f"not run: {message.text[:80]!r}", message.sender)
        if turn.approval is None:
            self._store.record_reply(self._channel, message.rowid, None, "unsent before it ran")
            self._require_tracker().finished(message.rowid)
            return
        note = (f"Not run: you unsent `{message.text.strip()}` before it started. "
                f"{turn.approval.id} is pending again.")
        with self._store.transaction():
            self._store.reopen_approval(turn.approval.id)
            self._store.record_reply(self._channel, message.rowid, note)
        self._deliver(message, note)

    def _deliver(self, message: InboundMessage, reply: str) -> None:
        target = message.reply_target  # the sender, or e.g. the group chat the message came from
        self._store.record_sent(self._channel, target, reply, self._settings.echo_window_seconds)
        try:
            with self._send_lock:
                self._egress.send(target, reply)
        except Exception as exc:  # SendError, or a channel bug: recorded, never fatal
            if not isinstance(exc, SendError):
                log.exception("the channel failed sending to %s", message.sender)
            log.error("could not send the reply to %s: %s", message.sender, exc)
            self._store.mark_sent(self._channel, message.rowid, failed=str(exc))
            self._store.log_event("send_failed", str(exc), message.sender)
        else:
            self._store.mark_sent(self._channel, message.rowid)
        self._require_tracker().finished(message.rowid)

    def _progress(self, recipient: str, text: str) -> None:
        """Best effort: progress is not recorded, and a failure to send it does not stop the turn."""
        send: Callable[[str, str], None] = getattr(self._egress, "send_progress", self._egress.send)
        try:
            with self._send_lock:
                self._store.record_sent(self._channel, recipient, text, self._settings.echo_window_seconds)
                send(recipient, text)
        except Exception as exc:
            log.warning("could not send progress to %s: %s", recipient, exc)

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

    # ------------------------------------------------------------------------------------------- Activity

    def running(self, sender: str) -> tuple[str, float] | None:
        job = self._scheduler.active(sender)
        if job is None or job.started_at is None:
            return None
        return job.payload.turn.request, job.started_at

    def queued(self, sender: str) -> int:
        return self._scheduler.waiting(sender)

    def cancel(self, sender: str) -> bool:
        job = self._scheduler.active(sender)
        if job is None or job.started_at is None:
            return False
        job.cancelled.set()
        self._connector.cancel(sender)
        return True
