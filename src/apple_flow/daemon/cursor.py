"""The ingress cursor only passes a message once it is finished (replied to, sent, or ignored), even when later
messages finish first: after a crash the restart resumes at the oldest unfinished one."""

from __future__ import annotations

import threading
from collections.abc import Callable


class CursorTracker:
    def __init__(self, start: int, save: Callable[[int], None]) -> None:
        self._position = start
        self._highest = start
        self._open: set[int] = set()
        self._save = save
        self._lock = threading.Lock()

    @property
    def position(self) -> int:
        return self._position

    def opened(self, rowid: int) -> None:
        with self._lock:
            self._open.add(rowid)
            self._highest = max(self._highest, rowid)

    def passed(self, rowid: int) -> None:
        """A row the ingress skipped (from me, echo, reaction): finished as soon as it is seen."""
        self.opened(rowid)
        self.finished(rowid)

    def finished(self, rowid: int) -> None:
        with self._lock:
            self._open.discard(rowid)
            position = min(self._open) - 1 if self._open else self._highest
            if position <= self._position:
                return
            self._position = position
            # Saved under the lock so positions reach the store in increasing order.
            self._save(position)
