"""Runs the turns the scheduler hands out: worker threads take each job, run it through its connector (progress
to the recipient, the agent's events into the run log), ask what the outcome means, record it with the reply and
hand the reply to the job's work; a watchdog stops turns past their time, and ``cancel`` stops one on request.

A turn writes the store three times on its way: its work taken with its run begun (one transaction), the run's
end with its last events, the reply, the sent lines of it and of the progress still waiting (one transaction, the
reply recorded before it is sent), and what the work does once the reply is out (``jobs.Work.answer``). The
run's events and progress lines of a longer turn ride the run log's batches (``run_log``).

The connectors are the daemon's and, when set up, the escalation's (APPLE_FLOW_ESCALATE_CONNECTOR), which runs
only the tasks the owner escalates."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from apple_flow.channels.base import Noted
from apple_flow.config import Settings
from apple_flow.connectors.base import Connector, ConnectorError, TurnOutcome, TurnRequest
from apple_flow.daemon.deciding import failures
from apple_flow.daemon.deciding.decisions import Turn, new_run_id
from apple_flow.daemon.running.jobs import Work
from apple_flow.daemon.running.run_log import RunLog
from apple_flow.daemon.running.scheduler import Job, Scheduler
from apple_flow.daemon.running.sending import ReplySender
from apple_flow.daemon.store import FinishedTurn, Store

log = logging.getLogger(__name__)

KILL_WAIT_SECONDS = 5.0  # after killing turns at shutdown, how long to wait for their threads to notice

# What a turn that has run means (``Conclusion.conclude``): (turn, run id, outcome, stop, keep_exchange).
Conclude = Callable[[Turn, str, TurnOutcome | Exception, str | None, bool], FinishedTurn]


class TurnWorkers:
    def __init__(
        self,
        settings: Settings,
        store: Store,
        scheduler: Scheduler[Work],
        sender: ReplySender,
        conclude: Conclude,
        connector: Connector,
        escalation_connector: Connector | None,
        stop: threading.Event,
    ) -> None:
        self._settings = settings
        self._store = store
        self._scheduler = scheduler
        self._sender = sender
        self._conclude = conclude
        self._connector = connector
        self._escalation_connector = escalation_connector
        self._stop = stop
        self.abandon = threading.Event()  # shutdown killed the running turns: record nothing for them
        self.status = "not checked yet"

    def start(self) -> None:
        """The worker threads and the watchdog. Daemon threads: a turn stuck in a connector must not keep the
        process alive after shutdown."""
        for index in range(self._settings.limits.max_concurrent_ai_calls):
            threading.Thread(target=self._work, name=f"turn-{index}", daemon=True).start()
        threading.Thread(target=self._watch_timeouts, name="watchdog", daemon=True).start()

    def stop_running(self) -> None:
        """Shutdown ran out of patience: kill what runs, record nothing for it (its message is redone next start)."""
        self.abandon.set()
        for connector in self.connectors:
            connector.cancel()
        self._scheduler.wait_idle(KILL_WAIT_SECONDS)

    def shutdown(self) -> None:
        for connector in self.connectors:
            connector.shutdown()

    def check(self) -> None:
        """Whether the connectors can run turns now (``health`` says what it found)."""
        try:
            self._connector.ensure_started()
        except ConnectorError as exc:
            self.status = f"not ready: {exc}"
            log.warning("the connector is not ready: %s", exc)
        else:
            self.status = "ready"
        if self._escalation_connector is not None:
            try:
                self._escalation_connector.ensure_started()
            except ConnectorError as exc:  # offered anyway: the escalated turn's reply says what is wrong
                self.status += f"; escalation to {self._settings.escalate_connector} not ready: {exc}"
                log.warning("the escalation connector is not ready: %s", exc)
            else:
                self.status += f"; escalation to {self._settings.escalate_connector} ready"

    @property
    def connectors(self) -> list[Connector]:
        return [self._connector] + ([self._escalation_connector] if self._escalation_connector is not None else [])

    def _connector_for(self, turn: Turn) -> Connector:
        """The daemon's connector, or for an escalated task the escalation's."""
        if turn.connector is not None and self._escalation_connector is not None:
            return self._escalation_connector
        return self._connector

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
        connector = self._connector_for(turn)
        window = connector.context_window
        exchanges = tuple(self._store.history.recent_exchanges(turn.sender, window))
        request = TurnRequest(
            turn.prompt, turn.workspace, exchanges, turn.read_only, turn.plan, sender=turn.sender,
            files_note=work.files_note(), verify=turn.verify,
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

    def cancel(self, sender: str, run_id: str | None = None) -> bool:
        """Stops the sender's running turn (the sender was told), with ``run_id`` only if it is that run; False
        when nothing (or another run, the named one having ended meanwhile) runs."""
        job = self._scheduler.active(sender)
        if job is None or job.started_at is None or (run_id is not None and job.run_id != run_id):
            return False
        job.cancelled.set()
        for connector in self.connectors:
            connector.cancel(sender)
        return True

    def _watch_timeouts(self) -> None:
        """A turn past ``turn_timeout_seconds`` is killed here even if the connector's own timeout failed. Sleeps
        until the first running turn's time is up: a turn that starts later ends no sooner than ``limit`` from now,
        so with none running the next look is that far away (an idle daemon does not wake for it)."""
        limit = self._settings.turn_timeout_seconds
        pause = limit
        while not self._stop.wait(pause):
            now = time.time()
            pause = limit
            for job in self._scheduler.running():
                if job.started_at is None or job.cancelled.is_set():
                    continue
                if now - job.started_at > limit:
                    log.warning("a turn of %s exceeded %g s: stopping it", job.sender, limit)
                    job.stop_reply = failures.timed_out(limit)
                    job.cancelled.set()
                    for connector in self.connectors:
                        connector.cancel(job.sender)
                else:
                    pause = min(pause, job.started_at + limit - now)
            pause = max(pause, 0.01) + 0.01  # just past the time, so the turn counts as over it
