"""Waiting for chat.db to change: file events on the database and its ``-wal``/``-shm`` (inotify on Linux,
FSEvents on macOS, via ``watchfiles``), with a slow poll as the safety net for missed or unsupported events."""

from __future__ import annotations

import logging
import threading
from collections.abc import Generator
from pathlib import Path

import watchfiles

log = logging.getLogger(__name__)

# watchfiles groups events until none arrive for STEP ms (at most DEBOUNCE ms): small values keep pickup fast.
_STEP_MS = 20
_DEBOUNCE_MS = 200


class DbChangeWaiter:
    """``wait()`` returns when the database files change, after ``poll_seconds`` without change, or when
    ``stop`` is set. Falls back to plain polling (and retries watching later) when the folder cannot be
    watched, e.g. while the database is missing."""

    def __init__(self, db_path: Path, poll_seconds: float, stop: threading.Event) -> None:
        self._folder = db_path.parent
        self._names = {db_path.name, f"{db_path.name}-wal", f"{db_path.name}-shm"}
        self._poll_ms = max(int(poll_seconds * 1000), 1)
        self._poll_seconds = poll_seconds
        self._stop = stop
        self._events: Generator[set[tuple[watchfiles.Change, str]], None, None] | None = None
        self.watching = False  # True while file events are used (for diagnostics and tests)

    def wait(self) -> None:
        if self._stop.is_set():
            return
        events = self._events or self._start()
        if events is None:
            self._stop.wait(self._poll_seconds)
            return
        try:
            next(events)  # a set of changes, or an empty set when the poll interval passed
        except StopIteration:  # stop was set
            self.close()
        except Exception as exc:  # e.g. the folder vanished: keep going by polling
            log.warning("watching %s failed (%s); polling every %.1fs instead", self._folder, exc, self._poll_seconds)
            self.close()
            self._stop.wait(self._poll_seconds)

    def close(self) -> None:
        if self._events is not None:
            self._events.close()
            self._events = None
        self.watching = False

    def _start(self) -> Generator[set[tuple[watchfiles.Change, str]], None, None] | None:
        if not self._folder.is_dir():
            return None
        self._events = watchfiles.watch(
            self._folder,
            watch_filter=self._is_db_file,
            debounce=_DEBOUNCE_MS,
            step=_STEP_MS,
            stop_event=self._stop,
            rust_timeout=self._poll_ms,
            yield_on_timeout=True,
            recursive=False,
            raise_interrupt=False,
        )
        self.watching = True
        return self._events

    def _is_db_file(self, _change: watchfiles.Change, path: str) -> bool:
        return Path(path).name in self._names
