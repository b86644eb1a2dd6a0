"""Turns run in a bounded pool of worker threads, one at a time per sender, in arrival order."""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

T = TypeVar("T")
log = logging.getLogger(__name__)


@dataclass
class Job(Generic[T]):
    sender: str
    payload: T
    started_at: float | None = None
    cancelled: threading.Event = field(default_factory=threading.Event)
    stop_reply: str = ""  # set with ``cancelled``: what to tell the sender ("" when they already know)


class Scheduler(Generic[T]):
    def __init__(self, workers: int, run: Callable[[Job[T]], None], name: str = "turn") -> None:
        self._run = run
        self._name = name
        self._ready: queue.Queue[Job[T] | None] = queue.Queue()
        self._waiting: dict[str, deque[Job[T]]] = {}
        self._active: dict[str, Job[T]] = {}  # per sender: the job started or handed to the pool
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._closed = False
        # Daemon threads: a turn stuck in a connector must not keep the process alive after shutdown.
        self._threads = [
            threading.Thread(target=self._work, name=f"{name}-{i}", daemon=True) for i in range(workers)
        ]
        for thread in self._threads:
            thread.start()

    def submit(self, job: Job[T]) -> None:
        with self._lock:
            if self._closed:
                raise RuntimeError("scheduler is closed")
            if job.sender in self._active:
                self._waiting.setdefault(job.sender, deque()).append(job)
            else:
                self._active[job.sender] = job
                self._ready.put(job)

    def active(self, sender: str) -> Job[T] | None:
        with self._lock:
            return self._active.get(sender)

    def running(self) -> list[Job[T]]:
        with self._lock:
            return [job for job in self._active.values() if job.started_at is not None]

    def waiting(self, sender: str) -> int:
        with self._lock:
            job = self._active.get(sender)
            not_started = 1 if job is not None and job.started_at is None else 0
            return len(self._waiting.get(sender, ())) + not_started

    def busy(self) -> bool:
        with self._lock:
            return bool(self._active)

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Waits until no job runs or waits; False on timeout."""
        with self._idle:
            return self._idle.wait_for(lambda: not self._active, timeout)

    def close(self) -> None:
        """Accepts no more jobs and drops those not started (they stay 'taken' in the store: a restart redoes
        them). Running jobs go on."""
        with self._lock:
            self._closed = True
            self._waiting.clear()
            for sender, job in list(self._active.items()):
                if job.started_at is None:
                    job.cancelled.set()
                    del self._active[sender]
            self._idle.notify_all()
        for _ in self._threads:
            self._ready.put(None)

    def _work(self) -> None:
        while True:
            job = self._ready.get()
            if job is None:
                return
            with self._lock:
                if job.cancelled.is_set() or self._active.get(job.sender) is not job:
                    continue
                job.started_at = time.time()
            try:
                self._run(job)
            except Exception:  # keep the worker: one broken job must not shrink the pool
                log.exception("a %s job of %s failed", self._name, job.sender)
            finally:
                self._next(job)

    def _next(self, job: Job[T]) -> None:
        with self._lock:
            if self._active.get(job.sender) is job:
                del self._active[job.sender]
            waiting = self._waiting.get(job.sender)
            if waiting and not self._closed:
                following = waiting.popleft()
                if not waiting:
                    del self._waiting[job.sender]
                self._active[job.sender] = following
                self._ready.put(following)
            self._idle.notify_all()
