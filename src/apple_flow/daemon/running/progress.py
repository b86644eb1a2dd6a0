"""Progress during long turns: of the tool activity the agent reports, the sender gets at most one short message per
interval (the first only after one interval, so quick turns send none)."""

from __future__ import annotations

import time
from collections.abc import Callable

_MAX_CHARS = 160


class ProgressThrottle:
    """Decides which activity lines are worth a message (one turn's, on one thread); sends nothing itself."""

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
        if len(text) > _MAX_CHARS:
            text = text[: _MAX_CHARS - 1] + "…"
        return f"… {text}"
