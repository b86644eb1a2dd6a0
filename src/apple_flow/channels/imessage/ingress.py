"""The iMessage ingress: new chat.db rows after a cursor, as ``InboundMessage``s, waiting for more until stopped.

Rows it skips (from me, reactions, empty, echoes, undecodable) are yielded as ``Skipped`` with the reason, in
order with the messages, so the caller's persisted cursor moves past them too. ``scanned_rowid`` is the highest
rowid fully passed over; it only changes while the caller is inside ``next()``, i.e. after it has finished with
every item yielded before.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

from apple_flow.channels.base import Attachment, CopyRecord, InboundMessage, Ingress, SentTexts, Skipped
from apple_flow.channels.imessage.attachments import MESSAGES_PREFIX, downloading, read_attachments
from apple_flow.channels.imessage.chatdb import ChatDB, ChatDBError, MessageRow
from apple_flow.channels.imessage.classify import ReadRules, classify
from apple_flow.channels.imessage.echo import Copies
from apple_flow.channels.imessage.watcher import DbChangeWaiter

log = logging.getLogger(__name__)

ErrorListener = Callable[[ChatDBError | None], None]  # None: readable again
_BATCH = 100  # rows per read: bounds memory when many large messages arrive at once
# A WAL commit becomes visible only when SQLite updates the memory-mapped -shm index, which raises no file event;
# the -wal write that does can come an fsync earlier. So after each event the rows are read at once, then again
# shortly a few times before going back to the long wait (without this, about one row in a hundred waited for the
# 2 s poll). Each look is one indexed query.
_RECHECK_AFTER_EVENT = (0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5)
# After a read that found rows (a burst may be under way), a short pause before the next, so that a burst is read in
# batches rather than a query per commit competing with the writer (and the just-read message on its way to its agent);
# the first row of a burst is read at once.
_BURST_PAUSE = 0.01


class IMessageIngress(Ingress):
    def __init__(
        self,
        db_path: Path,
        *,
        default_region: str,
        sent: SentTexts | None,
        poll_seconds: float,
        on_error: ErrorListener | None = None,
        max_message_age_seconds: float = 0,
        catch_up_seconds: float = 0,
        group_replies: bool = False,
        attachments_root: Path = Path(MESSAGES_PREFIX),
        attachment_wait_seconds: float = 0,
        copies: CopyRecord | None = None,
        allow_sms: bool = False,
    ) -> None:
        self.db = ChatDB(db_path)
        self._checks_db = ChatDB(db_path)
        self._attachments_root = attachments_root
        self._attachment_wait = attachment_wait_seconds
        self._rules = ReadRules(default_region, max_message_age_seconds, group_replies, catch_up_seconds, allow_sms)
        self._sent = sent
        self._copies = Copies(copies)
        self._poll_seconds = poll_seconds
        self.on_error = on_error
        self.scanned_rowid = 0
        self.last_error: ChatDBError | None = None  # the current problem reading chat.db, None when healthy
        self.watching = False  # True while new rows are noticed by file events (else only the poll finds them)
        self._caught_up = threading.Event()  # set while every row present has been yielded

    def caught_up(self) -> bool:
        """Whether every row chat.db held at the last read has been yielded (the ingress is waiting for more)."""
        return self._caught_up.is_set()

    def latest_rowid(self) -> int:
        """The newest ROWID now. Raises ``ChatDBError`` (with the fix in its message) when chat.db is unreadable."""
        return self.db.latest_rowid()

    def unsent(self, rowid: int) -> bool:
        """Whether the message was unsent after it was read (asked before a queued turn starts). False when
        chat.db cannot tell now."""
        # One connection for these checks, kept open (a connection per check cost about 1 ms per turn), besides
        # the reading loop's: a check never waits for a read of 100 rows. ChatDB runs one query at a time.
        try:
            return self._checks_db.is_retracted(rowid)
        except ChatDBError as exc:
            log.warning("cannot tell whether row %d was unsent: %s", rowid, exc)
            return False

    def settle_attachments(self, message: InboundMessage, stop: threading.Event) -> tuple[Attachment, ...]:
        """The message's attachments once those still downloading have finished, or
        ``attachment_wait_seconds`` have passed (they are then reported missing)."""
        if not downloading(message.attachments):
            return message.attachments
        db = ChatDB(self.db.path)  # its own connection: the reading loop has one
        try:
            return read_attachments(db, message.rowid, self._attachments_root, self._attachment_wait, stop)
        finally:
            db.close()

    def messages(self, after_rowid: int, stop: threading.Event) -> Iterator[InboundMessage | Skipped]:
        cursor = after_rowid
        self.scanned_rowid = after_rowid
        waiter = DbChangeWaiter(self.db.path, self._poll_seconds, stop)
        waiter.start()  # before the first read, so no commit falls between reading and watching
        self.watching = waiter.watching
        rechecks: list[float] = []
        try:
            while not stop.is_set():
                rows = self._read(cursor)
                if rows is None:  # unreadable now: cursor kept, retry after the poll interval
                    stop.wait(self._poll_seconds)
                    continue
                if rows:
                    self._caught_up.clear()
                for row in rows:
                    item = self._classify(row)
                    if isinstance(item, InboundMessage) and row.attachments:
                        # As they are now: files still downloading are waited for by ``settle_attachments``, on
                        # the turn's thread, so that no one's files hold up the reading of later messages.
                        found = read_attachments(self.db, row.rowid, self._attachments_root, 0, stop)
                        item = replace(item, attachments=found)
                    if isinstance(item, Skipped):
                        log.debug("chat.db row %d skipped: %s", item.rowid, item.reason)
                    yield item
                    cursor = row.rowid
                    self.scanned_rowid = cursor
                    if stop.is_set():
                        return
                if len(rows) >= _BATCH:
                    continue
                self._caught_up.set()
                if rows:
                    stop.wait(_BURST_PAUSE)
                    continue
                # After an event, look again shortly a few times (any new event re-arms), then wait long.
                if waiter.wait(rechecks.pop(0) if rechecks else None):
                    rechecks = list(_RECHECK_AFTER_EVENT)
                self.watching = waiter.watching
        finally:
            waiter.close()
            self._caught_up.clear()
            self.watching = False
            self.db.close()
            self._checks_db.close()

    def _read(self, cursor: int) -> list[MessageRow] | None:
        try:
            rows = self.db.rows_after(cursor, _BATCH)
        except ChatDBError as exc:
            if self.last_error is None or str(self.last_error) != str(exc):
                log.error("iMessage: %s", exc)  # once per distinct problem, not every poll
            self.last_error = exc
            if self.on_error is not None:
                self.on_error(exc)
            return None
        if self.last_error is not None:
            log.info("iMessage: chat.db readable again")
            self.last_error = None
            if self.on_error is not None:
                self.on_error(None)
        return rows

    def _classify(self, row: MessageRow) -> InboundMessage | Skipped:
        try:
            return classify(row, self._rules, self._sent, self._copies)
        except Exception as exc:  # one bad row must never stop the channel
            log.exception("chat.db row %d could not be read; skipped", row.rowid)
            return Skipped(row.rowid, f"error: {exc}")
