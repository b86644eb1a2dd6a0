"""The ingress cursor only passes a message once it is finished (replied to, sent, or ignored), even when later
messages finish first: after a crash the restart resumes at the oldest unfinished one. The tracker only computes
the position; the caller saves it (``CursorTable.advance_cursor`` never moves it back, so saves may race)."""

from __future__ import annotations

import threading


class CursorTracker:
    def __init__(self, start: int) -> None:
        self._position = start
        self._highest = start
        self._open: set[int] = set()
        self._lock = threading.Lock()

    @property
    def position(self) -> int:
        return self._position

    def opened(self, rowid: int) -> None:
        with self._lock:
            self._open.add(rowid)
            self._highest = max(self._highest, rowid)

    def passed(self, rowid: int) -> int | None:
        """A row the ingress skipped (from me, echo, reaction): finished as soon as it is seen."""
        self.opened(rowid)
        return self.finished(rowid)

    def finished(self, rowid: int) -> int | None:
        """The cursor's new position when finishing ``rowid`` moves it, else None."""
        with self._lock:
            self._open.discard(rowid)
            position = min(self._open) - 1 if self._open else self._highest
            if position <= self._position:
                return None
            self._position = position
            return position
