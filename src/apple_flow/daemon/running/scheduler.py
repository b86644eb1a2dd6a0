"""Which turn runs next: at most one at a time per sender, in arrival order. The runtime's worker threads take their
jobs from ``jobs()`` (``next()``, then ``done(job)`` once they ask for the one after); the scheduler itself runs
nothing and calls nothing."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass
class Job(Generic[T]):
    sender: str
    payload: T
    started_at: float | None = None
    cancelled: threading.Event = field(default_factory=threading.Event)
    stop_reply: str = ""  # set with ``cancelled``: what to tell the sender ("" when they already know)
    run_id: str | None = None  # the store's id for the job's run, once the worker has started it


class Scheduler(Generic[T]):
    def __init__(self) -> None:
        self._ready: deque[Job[T]] = deque()
        self._waiting: dict[str, deque[Job[T]]] = {}
        self._active: dict[str, Job[T]] = {}  # per sender: the job started or ready to start
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._closed = False

    def submit(self, job: Job[T]) -> None:
        with self._lock:
            if self._closed:
                raise RuntimeError("scheduler is closed")
            if job.sender in self._active:
                self._waiting.setdefault(job.sender, deque()).append(job)
            else:
                self._active[job.sender] = job
                self._ready.append(job)
                self._changed.notify_all()

    def jobs(self) -> Iterator[Job[T]]:
        """A worker thread's jobs, one after another as ``next`` gives them, each reported ``done`` when the worker
        asks for the one after it (or stops asking); ends once the scheduler is closed."""
        while (job := self.next()) is not None:
            try:
                yield job
            finally:
                self.done(job)

    def next(self) -> Job[T] | None:
        """The next job to run, marked started (waits for one); None once the scheduler is closed."""
        with self._lock:
            while True:
                if self._closed:
                    return None
                while self._ready:
                    job = self._ready.popleft()
                    if not job.cancelled.is_set() and self._active.get(job.sender) is job:
                        job.started_at = time.time()
                        return job
                self._changed.wait()

    def done(self, job: Job[T]) -> None:
        """``job`` has finished: the sender's next job, if any, becomes ready."""
        with self._lock:
            if self._active.get(job.sender) is job:
                del self._active[job.sender]
            waiting = self._waiting.get(job.sender)
            if waiting and not self._closed:
                following = waiting.popleft()
                if not waiting:
                    del self._waiting[job.sender]
                self._active[job.sender] = following
                self._ready.append(following)
            self._changed.notify_all()

    def active(self, sender: str) -> Job[T] | None:
        with self._lock:
            return self._active.get(sender)

    def running(self) -> list[Job[T]]:
        with self._lock:
            return [job for job in self._active.values() if job.started_at is not None]

    def queued(self, sender: str) -> list[Job[T]]:
        """The sender's jobs not started yet, in the order they will run."""
        with self._lock:
            return self._queued(sender)

    def drop_queued(self, sender: str) -> list[Job[T]]:
        """Takes the sender's jobs not started yet out (in order; marked cancelled): they will never run. The
        sender's running job and every other sender's jobs are left alone."""
        with self._lock:
            dropped = self._queued(sender)
            self._waiting.pop(sender, None)
            for job in dropped:
                job.cancelled.set()  # ``next()`` skips it if it is still in the ready queue
            if dropped and self._active.get(sender) is dropped[0]:
                del self._active[sender]
            self._changed.notify_all()
            return dropped

    def _queued(self, sender: str) -> list[Job[T]]:
        job = self._active.get(sender)
        ready = [job] if job is not None and job.started_at is None else []
        return ready + list(self._waiting.get(sender, ()))

    def busy(self) -> bool:
        with self._lock:
            return bool(self._active)

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Waits until no job runs or waits; False on timeout."""
        with self._changed:
            return self._changed.wait_for(lambda: not self._active, timeout)

    def close(self) -> None:
        """Accepts no more jobs and drops those not started (their messages are not recorded as finished: a
        restart redoes them); ``next()`` returns None from now on. Running jobs go on."""
        with self._lock:
            self._closed = True
            self._waiting.clear()
            self._ready.clear()
            for sender, job in list(self._active.items()):
                if job.started_at is None:
                    job.cancelled.set()
                    del self._active[sender]
            self._changed.notify_all()
