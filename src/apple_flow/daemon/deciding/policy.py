"""Who may reach the agent, and how often: the allowlist and a per-sender rate limit. Senders are the channel's
opaque strings: the channel's ``Senders`` puts the allowlist in the form its ingress gives senders in."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from apple_flow.channels.base import Senders


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
        senders: Senders | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._senders = senders or Senders()
        self._allowed = {self._senders.normalize(s) for s in allowed_senders if s.strip()}
        self._max = max_per_minute
        self._clock = clock
        self._recent: dict[str, deque[float]] = {}
        self._told: dict[str, float] = {}
        self._lock = threading.Lock()

    def is_allowed(self, sender: str) -> bool:
        return sender in self._allowed or self._senders.is_local(sender)

    def check(self, sender: str) -> Verdict:
        if not self.is_allowed(sender):
            return Verdict(False, "unknown sender")
        now = self._clock()
        with self._lock:
            recent = self._recent.setdefault(sender, deque())
            while recent and now - recent[0] >= 60:
                recent.popleft()
            if len(recent) >= self._max:
                first_notice = now - self._told.get(sender, -1e18) >= 60
                if first_notice:
                    self._told[sender] = now
                return Verdict(False, "rate limited", notify=first_notice)
            recent.append(now)
        return Verdict(True)
