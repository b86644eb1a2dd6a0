"""Rows that are not new requests although they look like one: the copies of the daemon's own texts (looked up in
the store's record of sent texts, ``channels.base.SentTexts``, in ``normalise_text`` form), and a second copy of a
message already taken (``Copies``), kept in the daemon's store so that a restart does not run it again.

Texting yourself (the usual set-up) stores each message as the sent row (``is_from_me = 1``), the received row,
or both, depending on the macOS version and the devices involved. Without this the daemon would answer its own
answers forever, or run one request twice.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol


def normalise_text(text: str) -> str:
    """Whitespace-insensitive form: Messages may trim or re-wrap what it stores."""
    return " ".join(text.split())


class CopyRecord(Protocol):
    """Where ``Copies`` keeps what it decided about each row: the daemon's database (``copies.CopyTable``), so that
    a restart still knows, or memory (``MemoryCopyRecord``, for ``apple-flow inbox``)."""

    def verdict(self, rowid: int) -> tuple[bool, int | None]:
        """(whether the row was decided before, the rowid it was then found a copy of: None when it was taken)."""
        ...

    def row_with_guid(self, guid: str) -> int | None:
        """The row first taken with this ``guid``."""
        ...

    def take_pair(self, own_chat: str, text: str, from_me: bool, since: float) -> int | None:
        """A taken row in ``own_chat`` with ``text``, of the other kind (sent vs received), recorded at or after
        ``since`` and not paired yet: it is now paired, and its rowid returned."""
        ...

    def add(self, rowid: int, guid: str, own_chat: str, text: str, from_me: bool, at: float,
            copy_of: int | None) -> None:
        """Records the decision about a row (``own_chat`` '' when not texting yourself)."""
        ...


class Copies:
    """What the ingress took lately, to skip a second copy of it: a row with a ``guid`` already taken (a row
    re-inserted by an iCloud sync), or the other copy of a text to yourself (the same words in your own chat
    within ``window_seconds``, one copy a sent row and the other a received one). A row read again (after a restart,
    from the cursor) gets the decision it got the first time."""

    def __init__(self, record: CopyRecord | None = None, window_seconds: float = 120,
                 clock: Callable[[], float] = time.time):
        self._record = record if record is not None else MemoryCopyRecord()
        self._window = window_seconds
        self._clock = clock

    def first_copy(self, rowid: int, guid: str, own_chat: str | None, text: str, from_me: bool) -> int | None:
        """The rowid of the copy taken before, or None (and this row is remembered as taken)."""
        seen, copy_of = self._record.verdict(rowid)
        if seen:
            return copy_of
        if not guid and own_chat is None:
            return None  # nothing to know it again by
        now = self._clock()
        key = normalise_text(text)
        first = self._record.row_with_guid(guid) if guid else None
        if first is None and own_chat is not None:
            first = self._record.take_pair(own_chat, key, from_me, now - self._window)
        self._record.add(rowid, guid, own_chat or "", key, from_me, now, first)
        return first


@dataclass
class _Decided:
    rowid: int
    guid: str
    own_chat: str
    text: str
    from_me: bool
    at: float
    copy_of: int | None
    paired: bool = False


class MemoryCopyRecord:
    """A ``CopyRecord`` in memory, for the newest ``keep`` rows."""

    def __init__(self, keep: int = 10_000) -> None:
        self._rows: OrderedDict[int, _Decided] = OrderedDict()
        self._keep = keep

    def verdict(self, rowid: int) -> tuple[bool, int | None]:
        row = self._rows.get(rowid)
        return (False, None) if row is None else (True, row.copy_of)

    def row_with_guid(self, guid: str) -> int | None:
        return next((r.copy_of or r.rowid for r in self._rows.values() if r.guid == guid), None)

    def take_pair(self, own_chat: str, text: str, from_me: bool, since: float) -> int | None:
        for row in self._rows.values():
            if (row.own_chat, row.text) == (own_chat, text) and row.from_me != from_me and row.at >= since \
                    and row.copy_of is None and not row.paired:
                row.paired = True
                return row.rowid
        return None

    def add(self, rowid: int, guid: str, own_chat: str, text: str, from_me: bool, at: float,
            copy_of: int | None) -> None:
        self._rows[rowid] = _Decided(rowid, guid, own_chat, text, from_me, at, copy_of)
        while len(self._rows) > self._keep:
            self._rows.popitem(last=False)
