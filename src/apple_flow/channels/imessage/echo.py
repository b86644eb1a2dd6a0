"""Echo suppression: texts the daemon sent recently, so their copies in chat.db are not taken as new requests.

A person texting themselves (the usual smoke test) gets each reply back as an incoming row from their own
handle; without this the daemon would answer its own answers forever.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


def normalise_text(text: str) -> str:
    """Whitespace-insensitive form: Messages may trim or re-wrap what it stores."""
    return " ".join(text.split())


class SentLog:
    """What the egress sent, per recipient, for ``window_seconds``. Thread-safe: the egress records from the
    daemon's reply path while the ingress checks from its reading loop."""

    def __init__(self, window_seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._window = window_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._sent: list[tuple[float, str, str]] = []  # (when, recipient, normalised text)

    def record(self, recipient: str, text: str) -> None:
        with self._lock:
            self._expire()
            self._sent.append((self._clock(), recipient, normalise_text(text)))

    def take_echo(self, sender: str, text: str) -> bool:
        """True when ``text`` from ``sender`` is the copy of something sent to ``sender`` within the window.
        The entry is consumed, so a person who later types the same words is heard."""
        wanted = normalise_text(text)
        with self._lock:
            self._expire()
            for index, (_, recipient, sent) in enumerate(self._sent):
                if recipient == sender and sent == wanted:
                    del self._sent[index]
                    return True
        return False

    def _expire(self) -> None:
        horizon = self._clock() - self._window
        self._sent = [entry for entry in self._sent if entry[0] >= horizon]
