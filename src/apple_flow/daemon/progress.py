"""Progress during long turns: the connector reports tool activity; the sender gets at most one short message per
interval (the first only after one interval, so quick turns send none)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

_MAX_CHARS = 160


class ProgressThrottle:
    def __init__(
        self, interval: float, send: Callable[[str], None], clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._interval = interval
        self._send = send
        self._clock = clock
        self._last = clock()
        self._lock = threading.Lock()
        self.sent = 0

    def __call__(self, activity: str) -> None:
        text = " ".join(activity.split())
        if not text:
            return
        now = self._clock()
        with self._lock:
            if now - self._last < self._interval:
                return
            self._last = now
            self.sent += 1
        if len(text) > _MAX_CHARS:
            text = text[: _MAX_CHARS - 1] + "…"
        self._send(f"… {text}")
