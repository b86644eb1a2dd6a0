"""Waiting for chat.db to change: file events on the database and its ``-wal``/``-shm`` (inotify on Linux,
FSEvents on macOS, via watchfiles' Rust notifier), with a slow poll as the safety net for missed or unsupported
events.

``RustNotify`` is used directly (it is watchfiles' documented backend) rather than the ``watch()`` generator,
because the wait needs a different timeout per call: long when idle, short while re-checking after an event.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

from watchfiles._rust_notify import RustNotify

log = logging.getLogger(__name__)

# Events are grouped until none arrive for STEP ms (at most DEBOUNCE ms). STEP is also how often the notifier
# wakes to check ``stop``: small enough for fast pickup, large enough for < 1 % idle CPU.
_STEP_MS = 20
_DEBOUNCE_MS = 200


class DbChangeWaiter:
    """``wait()`` returns True when the database files changed, False after the timeout or when ``stop`` is set.
    Falls back to plain sleeping (and tries to watch again on the next call) when the folder cannot be watched,
    e.g. while the database is missing."""

    def __init__(self, db_path: Path, poll_seconds: float, stop: threading.Event) -> None:
        self._folder = db_path.parent
        self._names = {db_path.name, f"{db_path.name}-wal", f"{db_path.name}-shm"}
        self._poll_seconds = poll_seconds
        self._stop = stop
        self._notify: RustNotify | None = None

    @property
    def watching(self) -> bool:
        return self._notify is not None

    def start(self) -> None:
        """Starts watching now (events from here on are kept until the next ``wait``)."""
        if self._notify is None and self._folder.is_dir():
            try:
                self._notify = RustNotify([str(self._folder)], False, False, 300, False, False)
            except Exception as exc:  # e.g. out of inotify watches: the poll still works
                log.warning("cannot watch %s (%s); polling every %.1fs", self._folder, exc, self._poll_seconds)

    def wait(self, timeout: float | None = None) -> bool:
        seconds = self._poll_seconds if timeout is None else timeout
        if self._stop.is_set():
            return False
        self.start()
        if self._notify is None:
            self._stop.wait(seconds)
            return False
        deadline = time.monotonic() + seconds
        while not self._stop.is_set():
            remaining_ms = int((deadline - time.monotonic()) * 1000)
            if remaining_ms <= 0:
                return False
            try:
                result = self._notify.watch(_DEBOUNCE_MS, _STEP_MS, remaining_ms, self._stop)
            except Exception as exc:  # e.g. the folder vanished: keep going by polling
                log.warning("watching %s failed (%s); polling instead", self._folder, exc)
                self.close()
                self._stop.wait(max(deadline - time.monotonic(), 0))
                return False
            if isinstance(result, str):  # "timeout", "stop" or "signal"
                return False
            if any(Path(path).name in self._names for _, path in result):
                return True
        return False

    def close(self) -> None:
        if self._notify is not None:
            self._notify.close()
            self._notify = None
