"""Rows that are not new requests although they look like one: the copies of the daemon's own texts (looked up in
the store's record of sent texts, ``channels.base.SentTexts``, in ``normalise_text`` form), and a second copy of a
message already taken (``Copies``), kept in the daemon's store (``channels.base.CopyRecord``) so that a restart does
not run it again.

Texting yourself (the usual set-up) stores each message as the sent row (``is_from_me = 1``), the received row,
or both, depending on the macOS version and the devices involved. Without this the daemon would answer its own
answers forever, or run one request twice.
"""

from __future__ import annotations

import time
from collections import Counter, OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from apple_flow.channels.base import CopyMarks, CopyRecord, Known

# Taken rows known here until the daemon keeps their marks (when their message's turn starts): a message waits in
# the queue while fewer rows than this are read.
TAKEN_KEEP = 1000


class Copies:
    """What the ingress took lately, to skip a second copy of it: a row with a ``guid`` already taken (a row
    re-inserted by an iCloud sync), or the other copy of a text to yourself (the same words in your own chat
    within ``window_seconds``, one copy a sent row and the other a received one). A row read again (after a restart,
    from the cursor) gets the decision it got the first time.

    A copy's decision goes to ``record`` at once. A taken row's goes with its message (``CopyMarks``): the daemon
    keeps it in the record with its first record of the message, in that transaction (a queued message has none
    until its turn starts). Until then it is known here, so a copy coming meanwhile is known too."""

    def __init__(self, record: CopyRecord | None = None, window_seconds: float = 120,
                 clock: Callable[[], float] = time.time):
        self._record = record if record is not None else MemoryCopyRecord()
        self._taken = MemoryCopyRecord(TAKEN_KEEP)
        self._window = window_seconds
        self._clock = clock

    def first_copy(self, rowid: int, guid: str, own_chat: str | None, key: str,
                   from_me: bool) -> int | CopyMarks | None:
        """The rowid of the copy taken before; or, the row being taken, the marks for the daemon to keep with its
        message; or None: taken, with nothing to keep (decided so before, or nothing to know it again by). ``key``:
        the row's text in ``normalise_text`` form."""
        taken = self._taken.known(rowid, guid)
        kept = taken if taken.decided else self._record.known(rowid, guid)
        if kept.decided:
            return kept.copy_of
        if not guid and own_chat is None:
            return None  # nothing to know it again by
        now = self._clock()
        first = taken.first_with_guid if taken.first_with_guid is not None else kept.first_with_guid
        if first is None and own_chat is not None:
            since = now - self._window
            first = self._taken.take_pair(own_chat, key, from_me, since)
            if first is None:
                first = self._record.take_pair(own_chat, key, from_me, since)
        if first is not None:
            self._record.add(rowid, guid, own_chat or "", key, from_me, now, first)
            return first
        self._taken.add(rowid, guid, own_chat or "", key, from_me, now, None)
        return CopyMarks(guid, own_chat or "", key, from_me, now)


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
        # Asked for every row read, so not a walk through them all: a guid's first row (its later rows are copies
        # of it), and how many rows kept have the guid.
        self._first_with_guid: dict[str, int] = {}
        self._with_guid: Counter[str] = Counter()
        self._keep = keep

    def known(self, rowid: int, guid: str) -> Known:
        row = self._rows.get(rowid)
        first = self._first_with_guid.get(guid) if guid else None
        return Known(True, row.copy_of, first) if row is not None else Known(first_with_guid=first)

    def take_pair(self, own_chat: str, text: str, from_me: bool, since: float) -> int | None:
        for row in self._rows.values():
            if (row.own_chat, row.text) == (own_chat, text) and row.from_me != from_me and row.at >= since \
                    and row.copy_of is None and not row.paired:
                row.paired = True
                return row.rowid
        return None

    def add(self, rowid: int, guid: str, own_chat: str, text: str, from_me: bool, at: float,
            copy_of: int | None) -> None:
        self._forget(self._rows.pop(rowid, None))
        self._rows[rowid] = _Decided(rowid, guid, own_chat, text, from_me, at, copy_of)
        if guid:
            self._first_with_guid.setdefault(guid, copy_of or rowid)
            self._with_guid[guid] += 1
        while len(self._rows) > self._keep:
            self._forget(self._rows.popitem(last=False)[1])

    def _forget(self, row: _Decided | None) -> None:
        if row is not None and row.guid:
            self._with_guid[row.guid] -= 1
            if not self._with_guid[row.guid]:
                del self._with_guid[row.guid], self._first_with_guid[row.guid]
