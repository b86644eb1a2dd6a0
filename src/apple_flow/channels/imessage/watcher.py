"""Waiting for chat.db to change: file events on the database and its ``-wal``/``-shm`` (inotify on Linux, kqueue
on macOS: ``fileevents``), with a slow poll as the safety net for missed or unsupported events.

The wait blocks until an event, the timeout or ``stop``: nothing wakes the process while no message arrives (the
watchfiles notifier used before returned to Python every 20 ms to check ``stop``). ``stop`` is a plain
``threading.Event``, which cannot wake a blocked wait by itself, so a thread of the waiter's own blocks on it and
wakes the wait when it is set.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

from apple_flow.channels.imessage.fileevents import Notifier, watch_names

log = logging.getLogger(__name__)


class DbChangeWaiter:
    """``wait()`` returns True when the database files changed, False after the timeout or when ``stop`` is set.
    Falls back to plain sleeping (and tries to watch again on the next call) when the folder cannot be watched,
    e.g. while the database is missing."""

    def __init__(self, db_path: Path, poll_seconds: float, stop: threading.Event) -> None:
        self._folder = db_path.parent
        self._names = (db_path.name, f"{db_path.name}-wal", f"{db_path.name}-shm")
        self._poll_seconds = poll_seconds
        self._stop = stop
        self._notify: Notifier | None = None
        self._lock = threading.Lock()  # guards _notify against the stop relay
        self._relay: threading.Thread | None = None

    @property
    def watching(self) -> bool:
        return self._notify is not None

    def start(self) -> None:
        """Starts watching now (events from here on are kept until the next ``wait``)."""
        if self._notify is None and self._folder.is_dir():
            try:
                notify = watch_names(self._folder, self._names)
            except OSError as exc:  # e.g. out of inotify watches: the poll still works
                log.warning("cannot watch %s (%s); polling every %.1fs", self._folder, exc, self._poll_seconds)
                return
            with self._lock:
                self._notify = notify

    def wait(self, timeout: float | None = None) -> bool:
        seconds = self._poll_seconds if timeout is None else timeout
        if self._stop.is_set():
            return False
        self.start()
        notify = self._notify
        if notify is None:
            self._stop.wait(seconds)
            return False
        self._relay_stop()
        deadline = time.monotonic() + seconds
        while not self._stop.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            try:
                if notify.wait(remaining):
                    return True
            except OSError as exc:  # e.g. the folder vanished: keep going by polling
                log.warning("watching %s failed (%s); polling instead", self._folder, exc)
                self.close()
                self._stop.wait(max(deadline - time.monotonic(), 0))
                return False
        return False

    def _relay_stop(self) -> None:
        """Once per waiter: a thread that wakes the blocked wait when ``stop`` is set."""
        if self._relay is None:
            self._relay = threading.Thread(target=self._wake_on_stop, name="chatdb-stop", daemon=True)
            self._relay.start()

    def _wake_on_stop(self) -> None:
        self._stop.wait()
        with self._lock:
            if self._notify is not None:
                self._notify.wake()

    def close(self) -> None:
        with self._lock:
            if self._notify is not None:
                self._notify.close()
                self._notify = None
