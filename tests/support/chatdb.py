"""A chat.db for tests and benchmarks: the real Messages schema, in WAL mode like the real one, written through
its own connection (as Messages would), plus attributedBody blobs derived from a real one.

``chatdb_reference/`` holds copies of shared/reference/chatdb-schema.sql and the real blobs from
shared/reference/attributed-body/ (macOS 15/26), so the suite runs without the shared folder."""

from __future__ import annotations

import sqlite3
import uuid
from datetime import UTC, datetime
from pathlib import Path

REFERENCE = Path(__file__).resolve().parent / "chatdb_reference"
SCHEMA = REFERENCE / "chatdb-schema.sql"
REAL_BODIES = REFERENCE
APPLE_EPOCH = datetime(2001, 1, 1, tzinfo=UTC)

# The real "Test 3" blob, cut around its text: the NSString's length byte sits at 0x49, the text follows, and
# after the text the attribute run's length (in UTF-16 units) is the last byte of "\x86\x84\x02iI\x01<len>".
_TEMPLATE = (REAL_BODIES / "AttributedBodyTextOnly2.bin").read_bytes()
_TEXT_AT = 0x49
_ORIGINAL_TEXT = b"Test 3"


def _ts_int(value: int) -> bytes:
    """A typedstream integer: one signed byte, or 0x81 + int16 / 0x82 + int32 little-endian."""
    if 0 <= value < 0x80:
        return bytes([value])
    if -0x8000 <= value < 0x8000:
        return b"\x81" + value.to_bytes(2, "little", signed=True)
    return b"\x82" + value.to_bytes(4, "little", signed=True)


def make_body(text: str) -> bytes:
    """An attributedBody for ``text``, built from the real blob by replacing its text and both lengths."""
    encoded = text.encode("utf-8")
    utf16_units = len(text.encode("utf-16-le")) // 2
    head = _TEMPLATE[:_TEXT_AT]
    rest = _TEMPLATE[_TEXT_AT + 1 + len(_ORIGINAL_TEXT) :]
    run_prefix = b"\x86\x84\x02iI\x01"
    assert rest.startswith(run_prefix + b"\x06"), "template layout changed"
    rest = run_prefix + _ts_int(utf16_units) + rest[len(run_prefix) + 1 :]
    return head + _ts_int(len(encoded)) + encoded + rest


def apple_ns(when: datetime) -> int:
    return int((when - APPLE_EPOCH).total_seconds() * 1e9)


class ChatDbWriter:
    """Writes rows the way Messages does (its own read-write connection, WAL)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        fresh = not path.exists()
        self.conn = sqlite3.connect(path, isolation_level=None, timeout=5)
        self.conn.execute("PRAGMA journal_mode=WAL")
        if fresh:
            self.conn.executescript(SCHEMA.read_text())
        self._handles: dict[str, int] = {}
        self._chats: dict[str, int] = {}

    def handle(self, identifier: str, service: str = "iMessage") -> int:
        key = f"{service}:{identifier}"
        if key not in self._handles:
            self.conn.execute(
                "INSERT OR IGNORE INTO handle (id, service, uncanonicalized_id) VALUES (?, ?, ?)",
                (identifier, service, identifier),
            )
            row = self.conn.execute("SELECT ROWID FROM handle WHERE id = ? AND service = ?", (identifier, service))
            self._handles[key] = int(row.fetchone()[0])
        return self._handles[key]

    def chat(self, identifier: str, guid: str | None = None, service: str = "iMessage") -> int:
        """The chat named ``identifier``: a group (style 43, ``iMessage;+;chat…``) when it starts with ``chat``,
        else the one-to-one chat with that handle (style 45, ``iMessage;-;…``); macOS 26 writes ``any;`` guids."""
        if identifier not in self._chats:
            group = identifier.startswith("chat")
            guid = guid or f"{service};{'+' if group else '-'};{identifier}"
            self.conn.execute(
                "INSERT OR IGNORE INTO chat (guid, style, chat_identifier, service_name) VALUES (?, ?, ?, ?)",
                (guid, 43 if group else 45, identifier, service),
            )
            row = self.conn.execute("SELECT ROWID FROM chat WHERE guid = ?", (guid,))
            self._chats[identifier] = int(row.fetchone()[0])
        return self._chats[identifier]

    def message(
        self,
        text: str | None = None,
        *,
        sender: str | None = "+15551234567",
        body: bytes | None = None,
        is_from_me: bool = False,
        associated_message_type: int = 0,
        item_type: int = 0,
        handle_id: int | None = None,
        chat: str | None = None,
        when: datetime | None = None,
        service: str = "iMessage",
        files: list[dict[str, object]] | None = None,
        **columns: object,
    ) -> int:
        """Inserts one message (with its chat join) and returns its ROWID. ``sender`` is the handle (for a sent
        row: the recipient), ``chat`` the chat's identifier (default: the one-to-one chat with ``sender``);
        ``files`` are its attachment rows (``attachment`` columns: ``filename``, ``transfer_name``, ``mime_type``,
        ``total_bytes``, ``transfer_state`` (default 5, finished) ...), written in the same transaction;
        ``columns`` sets any other ``message`` column (``guid``, ``destination_caller_id``, ``error``, ...)."""
        if handle_id is None:
            handle_id = self.handle(sender, service) if sender else 0
        date = apple_ns(when or datetime.now(UTC))
        values: dict[str, object] = {
            "guid": f"guid-{uuid.uuid4()}", "text": text, "attributedBody": body, "handle_id": handle_id,
            "service": service, "date": date, "is_from_me": int(is_from_me),
            "associated_message_type": associated_message_type, "item_type": item_type, "is_finished": 1,
            **columns,
        }
        names = ", ".join(values)
        marks = ", ".join("?" for _ in values)
        self.conn.execute("BEGIN")  # the row and its chat join commit together, as Messages writes them
        cur = self.conn.execute(f"INSERT INTO message ({names}) VALUES ({marks})", tuple(values.values()))
        rowid = int(cur.lastrowid or 0)
        for file in files or []:
            row = {"guid": f"at-{uuid.uuid4()}", "transfer_state": 5, "created_date": date, **file}
            cur = self.conn.execute(
                f"INSERT INTO attachment ({', '.join(row)}) VALUES ({', '.join('?' for _ in row)})", tuple(row.values())
            )
            self.conn.execute("INSERT INTO message_attachment_join (message_id, attachment_id) VALUES (?, ?)",
                              (rowid, cur.lastrowid))
        if files:
            self.conn.execute("UPDATE message SET cache_has_attachments = 1 WHERE ROWID = ?", (rowid,))
        chat_name = chat if chat is not None else sender
        if chat_name:
            self.conn.execute(
                "INSERT INTO chat_message_join (chat_id, message_id, message_date) VALUES (?, ?, ?)",
                (self.chat(chat_name, service=service), rowid, date),
            )
        self.conn.execute("COMMIT")
        return rowid

    def latest_rowid(self) -> int:
        """The newest message row (0 when there is none)."""
        return int(self.conn.execute("SELECT COALESCE(MAX(ROWID), 0) FROM message").fetchone()[0])

    def update(self, rowid: int, **columns: object) -> None:
        """Changes a row in place, as Messages does for an edit or an unsend."""
        assignments = ", ".join(f"{name} = ?" for name in columns)
        self.conn.execute(f"UPDATE message SET {assignments} WHERE ROWID = ?", (*columns.values(), rowid))

    def update_attachments(self, message_rowid: int, **columns: object) -> None:
        """Changes the attachment rows of a message in place (Messages sets ``transfer_state`` 5 when a download
        finishes)."""
        assignments = ", ".join(f"{name} = ?" for name in columns)
        self.conn.execute(
            f"UPDATE attachment SET {assignments} WHERE ROWID IN "
            "(SELECT attachment_id FROM message_attachment_join WHERE message_id = ?)",
            (*columns.values(), message_rowid),
        )

    def set_raw(self, table: str, column: str, rowid: int, value: object, *, as_text: bool = False) -> None:
        """Stores ``value`` in one cell as it is, bypassing the column's type: a string in an INTEGER column, or
        (``as_text``) bytes as TEXT that are not valid UTF-8, as NSString text with a lone surrogate reaches
        SQLite."""
        placeholder = "CAST(? AS TEXT)" if as_text else "?"
        self.conn.execute(f"UPDATE {table} SET {column} = {placeholder} WHERE ROWID = ?", (value, rowid))

    def close(self) -> None:
        self.conn.close()
