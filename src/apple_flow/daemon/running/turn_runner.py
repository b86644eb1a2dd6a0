"""One turn on a worker thread, from its work taken to its answer handed over (``TurnRunner``), and what its run
did, kept for the web page (``RunLog``).

A turn writes the store three times on its way: its work taken with its run begun (one transaction), the run's
end with its last events, the reply, the sent lines of it and of the progress still waiting (one transaction, the
reply recorded before it is sent), and what the work does once the reply is out (``jobs.Work.answer``).

The run log keeps the agent's stream-json events (tool calls and their results with output, exit code and diff,
notices, the result) as they arrive, a few transactions a second at most; the progress lines the turn sends (of
the activity the agent reports, at most one line an interval: ``ProgressThrottle``) ride those transactions.
Bounded three ways: one event at most ``EVENT_MAX_BYTES`` (its longest strings cut, saying so), one run at most
``RUN_MAX_BYTES`` (later events are counted as dropped, but the ``result`` event always has room), and only the
newest ``KEEP_RUNS`` runs keep their events. ``text`` deltas are not kept: the ``result`` event holds the answer.

Which turns run when, on how many threads, and stopping them, is the worker pool's (``workers``).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from apple_flow.channels.base import Noted
from apple_flow.config import Settings
from apple_flow.connectors.base import Connector, TurnOutcome, TurnRequest, TurnRun
from apple_flow.connectors.stream_events import Result, StreamEvent, Text
from apple_flow.daemon.deciding.decisions import TASK_KINDS, Turn, new_run_id
from apple_flow.daemon.running.jobs import Work
from apple_flow.daemon.running.scheduler import Job
from apple_flow.daemon.running.sending import ReplySender
from apple_flow.daemon.store import FinishedTurn, Store

log = logging.getLogger(__name__)

EVENT_MAX_BYTES = 16 * 1024
RUN_MAX_BYTES = 512 * 1024
KEEP_RUNS = 500
SKIPPED = (Text,)


FLUSH_SECONDS = 0.25  # how long an event may wait in memory for those after it to share its transaction
PROGRESS_MAX_CHARS = 160

# What a turn that has run means (``Conclusion.conclude``): (turn, run id, outcome, stop, keep_exchange).
Conclude = Callable[[Turn, str, TurnOutcome | Exception, str | None, bool], FinishedTurn]


class TurnRunner:
    """Runs one job's turn: its work taken with its run begun, the connector's turn followed by its run log (progress
    to the recipient, the agent's events kept), what the outcome means asked, the run's end recorded with the reply,
    and the reply handed to the job's work."""

    def __init__(self, settings: Settings, store: Store, sender: ReplySender, conclude: Conclude) -> None:
        self._settings = settings
        self._store = store
        self._sender = sender
        self._conclude = conclude
        self.abandon = threading.Event()  # shutdown killed the running turns: record nothing for them

    def run(self, job: Job[Work], connector: Connector) -> None:
        """Runs ``job``'s turn through ``connector`` (the daemon's, or the escalation's for an escalated task)."""
        work = job.payload
        turn = work.turn
        if work.withdrawn():
            return
        run_id = new_run_id()
        with self._store.transaction():  # its work taken (a message) and its run begun, together
            work.take()
            self._store.runs.start_run(run_id, turn.sender, turn.kind.value, str(turn.workspace), turn.request,
                                       work.run_message, turn.approval.id if turn.approval is not None else None,
                                       turn.escalates)
        job.run_id = run_id  # from now on `cancel <run id>` finds it
        window = connector.context_window
        exchanges = tuple(self._store.history.recent_exchanges(turn.sender, window))
        request = TurnRequest(
            turn.prompt, turn.workspace, exchanges, turn.read_only, turn.plan, sender=turn.sender,
            files_note=work.files_note(), verify=turn.verify, task=turn.kind in TASK_KINDS,
        )
        with RunLog(self._store, run_id, sender=self._sender, recipient=work.recipient,
                    progress_seconds=self._settings.limits.progress_interval_seconds) as record:
            self._finish(job, run_id, connector, request, record, keep_exchange=window > 0)

    def _finish(self, job: Job[Work], run_id: str, connector: Connector, request: TurnRequest, record: RunLog,
                keep_exchange: bool) -> None:
        """Runs the turn, then records its end with its last events and its reply (and the reply's files and sent
        lines), in one transaction, before the reply goes."""
        work = job.payload
        turn = work.turn
        outcome: TurnOutcome | Exception
        try:  # each of the agent's events goes into the run log, which passes its progress on to the recipient
            outcome = record.follow(connector.run(request))
        except Exception as exc:  # a connector bug must not take the daemon down; the sender hears about it
            log.exception("turn %s failed", run_id)
            outcome = exc
        stop = job.stop_reply if job.cancelled.is_set() else None
        finished = self._conclude(turn, run_id, outcome, stop, keep_exchange)
        if self.abandon.is_set():
            return
        noted: Noted | None = None
        with record.ending():  # the run's last events are written in this transaction, its last lines sent after it
            work.record_reply(finished.reply, finished.files)  # a reply's files are recorded with it
            self._store.record_turn(turn.sender, run_id, finished)
            if finished.reply is not None:
                noted = self._sender.note(work.recipient, finished.reply)
        work.answer(finished.reply, finished.approval.id if finished.approval is not None else None, noted,
                    with_files=bool(finished.files))


class ProgressThrottle:
    """Of the activity lines an agent reports, which are worth a message to the sender: at most one per interval,
    the first only after one interval (so quick turns send none). One turn's, on one thread; sends nothing itself."""

    def __init__(self, interval: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._interval = interval
        self._clock = clock
        self._last = clock()
        self.sent = 0

    def message(self, activity: str) -> str | None:
        """The progress message to send for ``activity`` now, or None when it is too soon (or there is nothing)."""
        text = " ".join(activity.split())
        if not text:
            return None
        now = self._clock()
        if now - self._last < self._interval:
            return None
        self._last = now
        self.sent += 1
        if len(text) > PROGRESS_MAX_CHARS:
            text = text[: PROGRESS_MAX_CHARS - 1] + "…"
        return f"… {text}"


class RunLog:
    """Records one run's events; follows the connector's turn (``follow``), or is called with each parsed event and
    the activity lines it makes, and closed when the run ends (a context manager).
    Events are written in batches, one transaction each: the first event of a batch waits at most
    ``FLUSH_SECONDS`` (a timer) for those that follow it, and the last ones (the ``result`` among them) are written
    by ``ending()``, in the transaction that records the run's end. So an agent streaming many events costs a few
    transactions a second instead of one per event, and the page still shows each within a quarter of a second.
    The run's budget is counted here: only this log writes its events.

    Progress lines (of the activity lines, those ``ProgressThrottle`` lets through every ``progress_seconds``)
    wait with the events and go out after the batch is written: the batch's transaction notes them in the channel's
    record of sent texts (``ReplySender.note``), so a line costs no transaction of its own, and lines that come
    together go as one text. Never raises: a run must not fail because its record could not be written."""

    def __init__(
        self, store: Store, run_id: str, flush_seconds: float = FLUSH_SECONDS, sender: ReplySender | None = None,
        recipient: str = "", progress_seconds: float = 0.0,
    ) -> None:
        self._store = store
        self.run_id = run_id
        self._flush_seconds = flush_seconds
        self._sender = sender  # where progress lines go (to ``recipient``); None: the run sends none
        self._recipient = recipient
        self._throttle = ProgressThrottle(progress_seconds)
        # Held by ``ending`` through the transaction recording the run's end (re-entrant: a flush inside it waits
        # for nothing). Always taken before the store's lock (the timer's writes and ``ending`` alike), never while
        # holding it, so the two cannot wait for each other.
        self._lock = threading.RLock()
        self._pending: list[tuple[str, str]] = []
        self._progress: list[str] = []  # progress lines waiting for the next write
        self._dropped = 0  # events over the budget since the last write
        self._used = 0  # characters of the run's events kept so far (written or pending)
        self._written = 0  # events written so far: the next one's number follows
        self._timer: threading.Timer | None = None

    def __enter__(self) -> RunLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __call__(self, event: StreamEvent, activity: tuple[str, ...] = ()) -> None:
        """Keeps ``event`` (``text`` deltas aside), and sends the progress lines its ``activity`` makes (the
        throttle's choice; none without a recipient)."""
        lines = [] if self._sender is None else [
            text for line in activity if (text := self._throttle.message(line)) is not None]
        kept = not isinstance(event, SKIPPED)
        if not kept and not lines:
            return
        body = bounded_json(event.raw) if kept else ""
        budget = RUN_MAX_BYTES if isinstance(event, Result) else RUN_MAX_BYTES - EVENT_MAX_BYTES
        with self._lock:
            if kept and self._used + len(body) > budget:
                self._dropped += 1
            elif kept:
                self._pending.append((event.type, body))
                self._used += len(body)
            self._progress += lines
            self._wait()

    def follow(self, turn: TurnRun) -> TurnOutcome:
        """Runs a connector's turn (``Connector.run``) to its outcome, keeping each of the agent's events as it
        comes. The log reads the events itself: the worker that started the turn has nothing to add to them. A turn
        left on an error is stopped."""
        try:
            for item in turn.events:
                self(item.event, item.progress)
        except BaseException:
            turn.close()
            raise
        return turn.outcome()

    def _wait(self) -> None:
        if self._timer is None:
            self._timer = threading.Timer(self._flush_seconds, self.flush)
            self._timer.daemon = True
            self._timer.start()

    def flush(self) -> None:
        """Writes the events waiting in memory now, then sends the progress lines that waited with them."""
        with self._lock:  # held while the progress goes: the next batch's lines follow this one's
            self._send(*self._write())

    @contextmanager
    def ending(self) -> Iterator[None]:
        """The run ends: opens the transaction that records its end (the caller records the rest in it: ``with
        record.ending(): store.runs.finish_run(...)``), writes the events still waiting in it and notes the progress
        lines still waiting; once it is committed, sends those lines. The log's lock is held throughout, taken
        before the store's, as a timer's write takes them."""
        with self._lock:
            with self._store.transaction():
                text, noted = self._write()
                yield
            self._send(text, noted)

    def close(self) -> None:
        self.flush()

    def _send(self, text: str | None, noted: Noted | None) -> None:
        if text is not None and self._sender is not None:
            self._sender.progress(self._recipient, text, noted=noted)

    def _write(self) -> tuple[str | None, Noted | None]:
        """Writes the waiting events and notes the waiting progress lines, in one transaction (the caller's, if it
        is in one); returns the lines (one text, None if none) and how they were noted (None: not)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        events, dropped, lines = self._pending, self._dropped, self._progress
        if not events and not dropped and not lines:
            return None, None
        self._pending, self._dropped, self._progress = [], 0, []
        text = "\n".join(lines) if lines else None
        noted: Noted | None = None
        try:
            with self._store.transaction():
                if events or dropped:
                    self._store.run_events.add_run_events(self.run_id, events, self._written + 1, dropped,
                                                          KEEP_RUNS if self._written == 0 else None)
                if text is not None and self._sender is not None:
                    noted = self._sender.note(self._recipient, text)
        except Exception:
            noted = None  # rolled back: the channel notes the text as it sends it
            log.exception("could not keep %d event(s) of run %s", len(events), self.run_id)
        self._written += len(events)
        return text, noted


def bounded_json(event: Mapping[str, Any], limit: int = EVENT_MAX_BYTES) -> str:
    """The event as JSON within ``limit`` bytes: the longest strings are cut (each ending in a marker) until it
    fits; an event that still does not fit keeps only its type and says so."""
    text = json.dumps(event, ensure_ascii=False)
    value: Any = dict(event)
    for _ in range(32):
        if len(text.encode()) <= limit:
            return text
        longest = _longest_string(value)
        if longest is None or len(longest) < 64:
            break
        over = len(text.encode()) - limit
        keep = max(0, len(longest) - over - 80)
        value = _replace_first(value, longest, f"{longest[:keep]} [... cut: {len(longest) - keep} characters]")
        text = json.dumps(value, ensure_ascii=False)
    if len(text.encode()) <= limit:
        return text
    return json.dumps({"type": event.get("type", "unknown"), "cut": f"an event of {len(text.encode())} bytes"})


def _longest_string(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    found = [s for s in (_longest_string(child) for child in children) if s is not None]
    return max(found, key=len) if found else None


def _replace_first(value: Any, target: str, replacement: str) -> Any:
    done = False

    def walk(item: Any) -> Any:
        nonlocal done
        if done:
            return item
        if isinstance(item, str) and item is target:
            done = True
            return replacement
        if isinstance(item, dict):
            return {key: walk(child) for key, child in item.items()}
        if isinstance(item, list):
            return [walk(child) for child in item]
        return item

    return walk(value)
