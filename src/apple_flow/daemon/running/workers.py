"""The worker pool: threads that take the jobs the scheduler hands out and run each turn (``turn_runner``, which does
what one turn does, with its run log) through the connector it needs; a watchdog stops turns past their time,
``cancel`` stops one on request, and shutdown kills what still runs.

The connectors are the daemon's and, when set up, the escalation's (APPLE_FLOW_ESCALATE_CONNECTOR), which runs
only the tasks the owner escalates."""

from __future__ import annotations

import logging
import threading
import time

from apple_flow.config import Settings
from apple_flow.connectors.base import Connector, ConnectorError
from apple_flow.daemon.deciding import failures
from apple_flow.daemon.deciding.decisions import Turn
from apple_flow.daemon.running.jobs import Work
from apple_flow.daemon.running.scheduler import Scheduler
from apple_flow.daemon.running.turn_runner import TurnRunner

log = logging.getLogger(__name__)

KILL_WAIT_SECONDS = 5.0  # after killing turns at shutdown, how long to wait for their threads to notice


class TurnWorkers:
    def __init__(
        self,
        settings: Settings,
        scheduler: Scheduler[Work],
        runner: TurnRunner,
        connector: Connector,
        escalation_connector: Connector | None,
        stop: threading.Event,
    ) -> None:
        self._settings = settings
        self._scheduler = scheduler
        self._runner = runner
        self._connector = connector
        self._escalation_connector = escalation_connector
        self._stop = stop
        self.status = "not checked yet"

    def start(self) -> None:
        """The worker threads and the watchdog. Daemon threads: a turn stuck in a connector must not keep the
        process alive after shutdown."""
        for index in range(self._settings.limits.max_concurrent_ai_calls):
            threading.Thread(target=self._work, name=f"turn-{index}", daemon=True).start()
        threading.Thread(target=self._watch_timeouts, name="watchdog", daemon=True).start()

    def stop_running(self) -> None:
        """Shutdown ran out of patience: kill what runs, record nothing for it (its message is redone next start)."""
        self._runner.abandon.set()
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
        for job in self._scheduler.jobs():  # each reported done as the next is asked for
            try:
                self._runner.run(job, self._connector_for(job.payload.turn))
            except Exception:  # keep the worker: one broken job must not shrink the pool
                log.exception("a turn of %s failed", job.sender)

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
