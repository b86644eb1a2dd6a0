"""chat.db details: dates, the empty database, the read-only connection, the Full Disk Access targets."""

from __future__ import annotations

import sqlite3
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from apple_flow.channels.imessage import chatdb
from apple_flow.channels.imessage.chatdb import APPLE_EPOCH, ChatDB, apple_date
from support.chatdb import ChatDbWriter, apple_ns


def test_dates_are_nanoseconds_since_2001_or_seconds_in_old_databases() -> None:
    when = datetime(2025, 12, 24, 18, 30, 5, 250000, tzinfo=UTC)
    assert apple_date(apple_ns(when)) == when
    assert apple_date(int((when - APPLE_EPOCH).total_seconds())) == when.replace(microsecond=0)
    assert apple_date(None) == APPLE_EPOCH
    assert apple_date(2**63 - 1).year == 2293 and apple_date(-(2**63)).year == 1708  # extremes still convert


def test_an_empty_database_has_latest_rowid_zero_and_no_rows(chat_db: ChatDbWriter) -> None:
    db = ChatDB(chat_db.path)
    assert db.latest_rowid() == 0
    assert db.rows_after(0) == []


def test_the_connection_cannot_write(chat_db: ChatDbWriter) -> None:
    chat_db.message("x")
    db = ChatDB(chat_db.path)
    db.latest_rowid()
    assert db._conn is not None
    with pytest.raises(sqlite3.OperationalError, match=r"readonly|read-only|query_only|attempt to write"):
        db._conn.execute("DELETE FROM message")


def test_the_rows_carry_group_chat_identifiers(chat_db: ChatDbWriter) -> None:
    rowid = chat_db.message("in the group", sender="+15551234567", chat="chat987654321")
    (row,) = ChatDB(chat_db.path).rows_after(rowid - 1)
    assert row.chat_identifier == "chat987654321" and row.handle == "+15551234567"


def test_framework_pythons_also_name_their_app_bundle(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(chatdb, "_FRAMEWORK_PREFIX", "/Library/Frameworks")  # sysconfig's value, read at start
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    bundle = Path(f"/Library/Frameworks/Python.framework/Versions/{version}/Resources/Python.app")
    assert chatdb.python_app_bundle() == bundle
    assert str(bundle) in chatdb.full_disk_access_hint()
    monkeypatch.setattr(chatdb, "_FRAMEWORK_PREFIX", None)
    assert chatdb.python_app_bundle() is None
    assert "framework" not in chatdb.full_disk_access_hint()


def test_text_columns_decode_strictly_when_they_can_and_leniently_when_not() -> None:
    assert chatdb.decode_text(b"caf\xc3\xa9") == ("café", True)
    assert chatdb.decode_text(None) == (None, True)
    # A surrogate pair written half by half rejoins; a lone half or a stray byte becomes U+FFFD.
    pair = "\ud83d\ude00".encode("utf-8", "surrogatepass")
    assert chatdb.decode_text(b"a" + pair + b"b") == ("a😀b", False)
    assert chatdb.decode_text(b"a\xed\xa0\x80b") == ("a\ufffdb", False)
    assert chatdb.decode_text(b"a\xffb") == ("a\ufffdb", False)
