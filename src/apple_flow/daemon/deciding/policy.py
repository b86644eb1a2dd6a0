"""Who may reach the agent, and how often: the allowlist (compared in normal form) and a per-sender rate limit."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from apple_flow.handles import normalize_handle


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    reason: str = ""  # why not: "unknown sender", "rate limited"
    notify: bool = False  # tell the sender (once per rate-limit window), rather than stay silent


class Policy:
    def __init__(
        self,
        allowed_senders: Iterable[str],
        max_per_minute: int,
        default_region: str = "US",
        local_senders: Iterable[str] = (),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._region = default_region
        self._allowed = {normalize_handle(s, default_region) for s in allowed_senders if s.strip()}
        # Senders that are the local user (the console) and need no allowlist entry.
        self._local = set(local_senders)
        self._max = max_per_minute
        self._clock = clock
        self._recent: dict[str, deque[float]] = {}
        self._told: dict[str, float] = {}
        self._lock = threading.Lock()

    def normalize(self, sender: str) -> str:
        return normalize_handle(sender, self._region)

    def is_allowed(self, sender: str) -> bool:
        return sender in self._local or self.normalize(sender) in self._allowed

    def check(self, sender: str) -> Verdict:
        if not self.is_allowed(sender):
            return Verdict(False, "unknown sender")
        now = self._clock()
        key = self.normalize(sender)
        with self._lock:
            recent = self._recent.setdefault(key, deque())
            while recent and now - recent[0] >= 60:
                recent.popleft()
            if len(recent) >= self._max:
                first_notice = now - self._told.get(key, -1e18) >= 60
                if first_notice:
                    self._told[key] = now
                return Verdict(False, "rate limited", notify=first_notice)
            recent.append(now)
        return Verdict(True)
