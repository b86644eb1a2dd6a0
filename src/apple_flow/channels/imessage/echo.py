"""Rows that are not new requests although they look like one: the copies of the daemon's own texts (looked up in
the store's record of sent texts, ``channels.base.SentTexts``, in ``normalise_text`` form), and a second copy of a
message already taken (``Copies``).

Texting yourself (the usual set-up) stores each message as the sent row (``is_from_me = 1``), the received row,
or both, depending on the macOS version and the devices involved. Without this the daemon would answer its own
answers forever, or run one request twice.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass


def normalise_text(text: str) -> str:
    """Whitespace-insensitive form: Messages may trim or re-wrap what it stores."""
    return " ".join(text.split())


@dataclass(frozen=True)
class _Taken:
    rowid: int
    when: float
    from_me: bool


class Copies:
    """What the ingress took lately, to skip a second copy of it: a row with a ``guid`` already taken (a row
    re-inserted by an iCloud sync), or the other copy of a text to yourself (the same words in your own chat
    within ``window_seconds``, one copy a sent row and the other a received one)."""

    def __init__(self, window_seconds: float = 120, keep: int = 10_000, clock: Callable[[], float] = time.monotonic):
        self._window = window_seconds
        self._keep = keep
        self._clock = clock
        self._guids: OrderedDict[str, int] = OrderedDict()
        self._own: dict[tuple[str, str], list[_Taken]] = {}

    def first_copy(self, rowid: int, guid: str, own_chat: str | None, text: str, from_me: bool) -> int | None:
        """The rowid of the copy taken before, or None (and this row is remembered as taken)."""
        if guid and guid in self._guids:
            return self._guids[guid]
        now = self._clock()
        key = (own_chat or "", normalise_text(text))
        if own_chat is not None:
            self._own = {k: kept for k, taken in self._own.items() if (kept := self._fresh(taken, now))}
            waiting = self._own.get(key, [])
            for index, taken in enumerate(waiting):
                if taken.from_me != from_me:  # the other copy of that message: consumed
                    del waiting[index]
                    self._own[key] = waiting
                    return taken.rowid
            self._own[key] = [*waiting, _Taken(rowid, now, from_me)]
        if guid:
            self._guids[guid] = rowid
            while len(self._guids) > self._keep:
                self._guids.popitem(last=False)
        return None

    def _fresh(self, taken: list[_Taken], now: float) -> list[_Taken]:
        return [t for t in taken if now - t.when <= self._window]
