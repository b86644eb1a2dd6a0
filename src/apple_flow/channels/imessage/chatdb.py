"""Read-only access to the Messages database (``chat.db``): rows after a ROWID cursor, with sender and chat.

Messages writes the file concurrently (WAL), so the connection is opened read-only (``mode=ro``,
``query_only``) with a short busy timeout, and every failure is turned into a ``ChatDBError`` that says what is
wrong and what to do (most importantly: Full Disk Access, and to which binary).

One row never breaks a read: text columns are read as bytes and decoded per row (NSString text can hold lone
surrogates, which Python's sqlite3 refuses for the whole batch), and a value of the wrong type makes only that
row unusable (``MessageRow.problem``).
"""

from __future__ import annotations

import errno
import os
import sqlite3
import sys
import sysconfig
import threading
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import Enum
from pathlib import Path
from urllib.parse import quote

from apple_flow.app_bundle import running_app

APPLE_EPOCH = datetime(2001, 1, 1, tzinfo=UTC)
_BUSY_TIMEOUT_MS = 250

# Text columns come as BLOBs and are decoded in Python, row by row (see the module's docstring). A message's chat is
# the first one it is joined to.
_ROWS_SQL = """
SELECT m.ROWID, CAST(m.text AS BLOB), m.attributedBody, m.date, m.is_from_me, m.associated_message_type,
       m.item_type, CAST(h.id AS BLOB), CAST(c.chat_identifier AS BLOB),
       CAST(m.guid AS BLOB), CAST(m.service AS BLOB), CAST(m.destination_caller_id AS BLOB), CAST(m.account AS BLOB),
       m.date_retracted, m.date_edited, m.message_summary_info, c.style, CAST(c.guid AS BLOB), m.error, m.is_sent,
       m.is_delivered, CAST(m.associated_message_guid AS BLOB),
       (SELECT COUNT(*) FROM message_attachment_join AS aj WHERE aj.message_id = m.ROWID),
       (SELECT CAST(group_concat(COALESCE(a.transfer_name, ''), char(31)) AS BLOB)
          FROM message_attachment_join AS aj JOIN attachment AS a ON a.ROWID = aj.attachment_id
         WHERE aj.message_id = m.ROWID)
  FROM message AS m
  LEFT JOIN handle AS h ON h.ROWID = m.handle_id
  LEFT JOIN chat AS c ON c.ROWID = (SELECT j.chat_id FROM chat_message_join AS j WHERE j.message_id = m.ROWID
                                     ORDER BY j.chat_id LIMIT 1)
"""
GROUP_STYLE = 43  # chat.style of a group chat; 45 is a one-to-one chat
_ATTACHMENTS_SQL = """
SELECT a.ROWID, CAST(a.filename AS BLOB), CAST(a.mime_type AS BLOB), CAST(a.transfer_name AS BLOB), a.total_bytes,
       a.transfer_state
  FROM message_attachment_join AS j JOIN attachment AS a ON a.ROWID = j.attachment_id
 WHERE j.message_id = ? ORDER BY a.ROWID
"""


@dataclass(frozen=True)
class MessageRow:
    """One ``message`` row as stored, before any decoding or filtering."""

    rowid: int
    text: str | None
    attributed_body: bytes | None
    date: datetime
    is_from_me: bool
    associated_message_type: int
    item_type: int
    handle: str | None  # handle.id; None when the row has no (or a dangling) handle_id
    chat_identifier: str | None  # None also when it is not valid UTF-8 (then it names nothing reliably)
    problem: str | None = None  # why the row cannot be used (e.g. "item_type is 'x', not an integer")
    guid: str = ""
    service: str | None = None  # "iMessage", "SMS", "RCS"
    destination_caller_id: str | None = None  # the owner's own address the message went to or from
    account: str | None = None  # the owner's sending account, e.g. "E:me@icloud.com" or "P:+15551234567"
    retracted: bool = False  # unsent by its sender (date_retracted)
    edited: bool = False  # edited after sending (date_edited); the versions are in summary_info
    summary_info: bytes | None = None  # message_summary_info: a binary plist
    chat_style: int | None = None  # GROUP_STYLE for a group chat
    chat_guid: str | None = None  # e.g. "iMessage;+;chat123…" (macOS 26: "any;+;chat123…")
    error: int = 0  # of a sent row: non-zero when Messages could not send it
    is_sent: bool = False
    is_delivered: bool = False
    attachments: int = 0  # how many attachment rows the message has (message_attachment_join)
    attachment_names: tuple[str, ...] = ()  # their transfer_name, sorted ("" where it has none)
    associated_guid: str | None = None  # a tapback's target: "p:0/<guid>", "bp:<guid>" or the bare guid

    @property
    def known_date(self) -> bool:
        return self.date != APPLE_EPOCH


@dataclass(frozen=True)
class AttachmentRow:
    """One ``attachment`` row of a message, as stored (``filename`` usually starts with ``~/Library/Messages/``)."""

    rowid: int
    filename: str | None
    mime_type: str | None
    transfer_name: str | None
    total_bytes: int  # -1 when unknown
    transfer_state: int  # 5: the transfer finished (see attachments.py)


class ChatDBProblem(Enum):
    MISSING = "missing"
    NO_PERMISSION = "no-permission"  # on macOS: Full Disk Access not granted
    LOCKED = "locked"
    CORRUPT = "corrupt"
    OTHER = "other"


class ChatDBError(RuntimeError):
    """chat.db cannot be read now: ``problem`` classifies it, ``what`` says what is wrong, ``fix`` what to do."""

    def __init__(self, problem: ChatDBProblem, what: str, fix: str) -> None:
        super().__init__(f"{what}: {fix}")
        self.problem = problem
        self.what = what
        self.fix = fix


# Resolved once, when the process starts: the interpreter does not change, and a process whose rights shrink later
# (a user switch, a sandbox) may no longer be able to follow the symlinks to it or load sysconfig's data.
_PYTHON_BINARY = Path(os.path.realpath(sys.executable))
_FRAMEWORK_PREFIX: str | None = sysconfig.get_config_var("PYTHONFRAMEWORKPREFIX") or None


def python_binary() -> Path:
    """The interpreter binary macOS attributes file access to: the one Full Disk Access must be granted to."""
    return _PYTHON_BINARY


def python_app_bundle() -> Path | None:
    """On a framework build of Python (python.org, Homebrew) ``bin/python3.x`` re-executes
    ``Resources/Python.app``, which macOS may then hold responsible instead."""
    prefix = _FRAMEWORK_PREFIX
    if not prefix:
        return None
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    return Path(prefix) / "Python.framework" / "Versions" / version / "Resources" / "Python.app"


def full_disk_access_hint() -> str:
    app = running_app()
    if app is not None:  # the service: macOS asks about Apple Flow.app, whose launcher started this Python
        return (
            f"switch on {app.stem} in System Settings > Privacy & Security > Full Disk Access (not listed? the + "
            f"button, then Cmd+Shift+G and {app}); the service sees the grant and restarts itself to use it"
        )
    bundle = python_app_bundle()
    also = f" (and, for this framework build of Python, {bundle})" if bundle is not None else ""
    return (
        "the login service (`apple-flow service install`) reads as Apple Flow: switch on Apple Flow in System "
        "Settings > Privacy & Security > Full Disk Access. Run by hand, the app macOS asks about is the one it runs "
        f"in: your terminal app (then quit and reopen it), or without one {python_binary()}{also}"
    )


def apple_date(value: int | None) -> datetime:
    """``message.date``: nanoseconds since 2001-01-01 UTC (seconds in databases from before macOS 10.13)."""
    if not value:
        return APPLE_EPOCH
    seconds = value / 1e9 if abs(value) > 10**11 else float(value)
    return APPLE_EPOCH + timedelta(seconds=seconds)  # any 64-bit value fits a datetime either way


class ChatDB:
    """A read-only connection to chat.db, opened lazily and reopened after any failure. Safe to share between
    threads (the ingress's check of unsent messages runs on the turns' threads): one query at a time."""

    def __init__(self, path: Path, platform: str = sys.platform) -> None:
        self.path = path
        self._platform = platform
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    def rows_after(self, rowid: int, limit: int = 200) -> list[MessageRow]:
        """Up to ``limit`` rows with ``ROWID > rowid``, in ROWID order."""
        rows = self._query(_ROWS_SQL + " WHERE m.ROWID > ? ORDER BY m.ROWID LIMIT ?", (rowid, limit))
        return [_to_row(r) for r in rows]

    def sent_rows_after(self, rowid: int, limit: int = 200) -> list[MessageRow]:
        """Rows this Mac sent (``is_from_me = 1``) with ``ROWID > rowid``, in ROWID order."""
        rows = self._query(
            _ROWS_SQL + " WHERE m.ROWID > ? AND m.is_from_me = 1 ORDER BY m.ROWID LIMIT ?", (rowid, limit)
        )
        return [_to_row(r) for r in rows]

    def newest_rows(self, limit: int) -> list[MessageRow]:
        """The newest ``limit`` rows, oldest first."""
        rows = self._query(_ROWS_SQL + " ORDER BY m.ROWID DESC LIMIT ?", (limit,))
        return [_to_row(r) for r in reversed(rows)]

    def is_retracted(self, rowid: int) -> bool:
        """Whether the row was unsent since it was read (Messages updates ``date_retracted`` in place)."""
        rows = self._query("SELECT date_retracted FROM message WHERE ROWID = ?", (rowid,))
        return bool(rows) and isinstance(rows[0][0], int) and rows[0][0] != 0

    def attachments_of(self, rowid: int) -> list[AttachmentRow]:
        """The attachment rows of message ``rowid``, in ROWID order; a value of the wrong type reads as unknown."""
        return [_to_attachment(r) for r in self._query(_ATTACHMENTS_SQL, (rowid,))]

    def latest_rowid(self) -> int:
        rows = self._query("SELECT COALESCE(MAX(ROWID), 0) FROM message", ())
        newest = rows[0][0]
        return newest if isinstance(newest, int) else 0

    def close(self) -> None:
        with self._lock:
            self._close()

    def _close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _query(self, sql: str, params: tuple[object, ...]) -> list[tuple[object, ...]]:
        with self._lock:
            try:
                conn = self._connect()
                return conn.execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                self._close()  # the next call reopens: the file may have been replaced, unlocked or granted meanwhile
                error = exc
        raise self._diagnose(error) from error

    def _connect(self) -> sqlite3.Connection:
        if self._conn is None:
            uri = f"file:{quote(str(self.path))}?mode=ro"
            conn = sqlite3.connect(uri, uri=True, timeout=_BUSY_TIMEOUT_MS / 1000, check_same_thread=False)
            try:
                conn.execute("PRAGMA query_only = 1")
            except sqlite3.Error:
                conn.close()
                raise
            self._conn = conn
        return self._conn

    def _diagnose(self, exc: sqlite3.Error) -> ChatDBError:
        """Turns a sqlite error into the user's problem: missing file, no permission, locked, corrupt."""
        text = str(exc)
        if "locked" in text or "busy" in text:
            return ChatDBError(
                ChatDBProblem.LOCKED,
                f"{self.path} is locked by another process",
                "usually Messages writing; apple-flow retries shortly (if it persists, quit and reopen Messages)",
            )
        access = _probe_access(self.path)
        if access == errno.EISDIR:
            return ChatDBError(
                ChatDBProblem.MISSING,
                f"{self.path} is a folder, not the Messages database",
                "point APPLE_FLOW_MESSAGES_DB_PATH (or --db) at the chat.db file inside it",
            )
        if access == errno.ENOENT:
            return ChatDBError(
                ChatDBProblem.MISSING,
                f"{self.path} does not exist",
                "sign in to Messages on this Mac, or set APPLE_FLOW_MESSAGES_DB_PATH to the right chat.db",
            )
        if access in (errno.EPERM, errno.EACCES):
            fix = (
                full_disk_access_hint()
                if self._platform == "darwin"
                else "make it readable by the user running apple-flow"
            )
            return ChatDBError(ChatDBProblem.NO_PERMISSION, f"cannot read {self.path} (permission denied)", fix)
        if "not a database" in text or "malformed" in text:
            return ChatDBError(
                ChatDBProblem.CORRUPT, f"{self.path} is not a readable SQLite database ({text})", "check the path"
            )
        if "no such table" in text or "no such column" in text:
            return ChatDBError(
                ChatDBProblem.CORRUPT,
                f"{self.path} is not a Messages database ({text})",
                "check APPLE_FLOW_MESSAGES_DB_PATH",
            )
        return ChatDBError(
            ChatDBProblem.OTHER, f"cannot read {self.path} ({text})", "see the error; apple-flow retries"
        )


def _probe_access(path: Path) -> int | None:
    """The errno of opening ``path`` for reading, or None when it opens (macOS answers EPERM without FDA)."""
    try:
        with open(path, "rb") as handle:
            handle.read(16)
    except OSError as exc:
        return exc.errno
    return None


def _to_row(row: tuple[object, ...]) -> MessageRow:
    """Never raises: what cannot be read is decoded leniently, or named in ``problem``."""
    (rowid, text, body, date, from_me, assoc, item_type, handle, chat, guid, service, caller_id, account,
     retracted, edited, summary, style, chat_guid, error, is_sent, is_delivered, associated, attachments,
     names) = row
    problems: list[str] = []
    integers = {
        name: _integer(value, name, problems)
        for name, value in (("date", date), ("is_from_me", from_me), ("associated_message_type", assoc),
                            ("item_type", item_type), ("date_retracted", retracted), ("date_edited", edited),
                            ("error", error), ("is_sent", is_sent), ("is_delivered", is_delivered))
    }
    sender, sender_exact = decode_text(handle)
    if not sender_exact:
        problems.append("sender is not valid UTF-8")
    chat_identifier, chat_exact = decode_text(chat)
    chat_guid_text, chat_guid_exact = decode_text(chat_guid)
    return MessageRow(
        rowid=int(rowid),  # type: ignore[call-overload]
        text=decode_text(text)[0],
        attributed_body=_blob(body),
        date=apple_date(integers["date"]),
        is_from_me=bool(integers["is_from_me"]),
        associated_message_type=integers["associated_message_type"],
        item_type=integers["item_type"],
        handle=sender if sender and sender.strip() else None,
        chat_identifier=chat_identifier if chat_identifier and chat_exact else None,
        problem="; ".join(problems) or None,
        guid=decode_text(guid)[0] or "",
        service=decode_text(service)[0],
        destination_caller_id=decode_text(caller_id)[0] or None,
        account=decode_text(account)[0] or None,
        retracted=bool(integers["date_retracted"]),
        edited=bool(integers["date_edited"]),
        summary_info=_blob(summary),
        chat_style=style if isinstance(style, int) else None,
        chat_guid=chat_guid_text if chat_guid_text and chat_guid_exact else None,
        error=integers["error"],
        is_sent=bool(integers["is_sent"]),
        is_delivered=bool(integers["is_delivered"]),
        attachments=attachments if isinstance(attachments, int) else 0,
        attachment_names=tuple(sorted((decode_text(names)[0] or "").split("\x1f"))) if names is not None else (),
        associated_guid=decode_text(associated)[0] or None,
    )


def _to_attachment(row: tuple[object, ...]) -> AttachmentRow:
    rowid, filename, mime_type, transfer_name, total_bytes, state = row
    return AttachmentRow(
        rowid=int(rowid),  # type: ignore[call-overload]
        filename=decode_text(filename)[0],
        mime_type=decode_text(mime_type)[0],
        transfer_name=decode_text(transfer_name)[0],
        total_bytes=total_bytes if isinstance(total_bytes, int) else -1,
        transfer_state=state if isinstance(state, int) else -1,
    )


def _blob(value: object) -> bytes | None:
    return bytes(value) if isinstance(value, bytes | bytearray | memoryview) else None


def decode_text(value: object) -> tuple[str | None, bool]:
    """A text column read as bytes: (its text, whether it was valid UTF-8). Invalid text is decoded leniently:
    lone surrogates (NSString can hold them) and other bad bytes become U+FFFD."""
    if value is None:
        return None, True
    if isinstance(value, str):
        return value, True
    if not isinstance(value, bytes | bytearray | memoryview):
        return str(value), True
    data = bytes(value)
    try:
        return data.decode("utf-8"), True
    except UnicodeDecodeError:
        pass
    try:  # surrogates written one by one (CESU-8): a pair rejoins into its character, a lone one is replaced
        halves = data.decode("utf-8", "surrogatepass")
        return halves.encode("utf-16", "surrogatepass").decode("utf-16", "replace"), False
    except UnicodeDecodeError:
        return data.decode("utf-8", "replace"), False


def _integer(value: object, column: str, problems: list[str]) -> int:
    if value is None:
        return 0
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    shown = repr(value if not isinstance(value, bytes) else value[:20])
    problems.append(f"{column} is {shown[:40]}, not an integer")
    return 0
