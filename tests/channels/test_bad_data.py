"""Bad data never stops the channel and never moves the cursor wrongly: each case from the issue."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from apple_flow.channels.imessage import ChatDBError, ChatDBProblem, Skipped
from apple_flow.channels.imessage.chatdb import ChatDB, python_binary
from apple_flow.channels.imessage.ingress import IMessageIngress
from apple_flow.daemon.deciding.commands import HELP_TEXT
from support.chatdb import SCHEMA, ChatDbWriter, make_body
from support.daemon_process import DaemonProcess, wait_for
from support.ingress_helpers import take


def ingress_at(path: Path, **kwargs: object) -> IMessageIngress:
    return IMessageIngress(path, default_region="US", sent=None, poll_seconds=0.1, **kwargs)  # type: ignore[arg-type]


def test_null_text_and_null_body_is_skipped_as_empty(chat_db: ChatDbWriter) -> None:
    empty = chat_db.message(None, body=None)
    after = chat_db.message("next")
    skipped: list[Skipped] = []
    got = take(ingress_at(chat_db.path), after=0, count=1, skipped=skipped)
    assert [(s.rowid, s.reason) for s in skipped] == [(empty, "empty")]
    assert [m.rowid for m in got] == [after]


@pytest.mark.parametrize("blob", [b"\x04\x0bstreamtyped\x81\xe8\x03\x84\x01@\x84\x84\x84", b"\xff" * 64, b"\x00"])
def test_corrupt_blob_is_skipped_and_the_next_message_read(chat_db: ChatDbWriter, blob: bytes) -> None:
    bad = chat_db.message(None, body=blob)
    after = chat_db.message(None, body=make_body("still here"))
    skipped: list[Skipped] = []
    got = take(ingress_at(chat_db.path), after=0, count=1, skipped=skipped)
    assert [(s.rowid, s.reason) for s in skipped] == [(bad, "undecodable body")]
    assert [m.text for m in got] == ["still here"]
    assert got[0].rowid == after


def test_a_one_megabyte_message_arrives_whole(chat_db: ChatDbWriter) -> None:
    big_text = ("0123456789abcdef👋🏽" * 60000)[: 1024 * 1024]
    big_body = "中" * (1024 * 1024 // 3)
    chat_db.message(big_text)
    chat_db.message(None, body=make_body(big_body))
    chat_db.message("small one after")
    got = take(ingress_at(chat_db.path), after=0, count=3)
    assert [m.text for m in got] == [big_text, big_body, "small one after"]


def test_missing_handle_row_falls_back_to_the_direct_chat_or_is_skipped(chat_db: ChatDbWriter) -> None:
    via_chat = chat_db.message("dangling handle, direct chat", handle_id=999, chat="+15550001111")
    no_sender = chat_db.message("dangling handle, group chat", handle_id=998, chat="chat123456789")
    none_at_all = chat_db.message("no handle, no chat", handle_id=997, sender=None)
    after = chat_db.message("fine")
    skipped: list[Skipped] = []
    got = take(ingress_at(chat_db.path), after=0, count=2, skipped=skipped)
    assert [(m.rowid, m.sender) for m in got] == [(via_chat, "+15550001111"), (after, "+15551234567")]
    assert [(s.rowid, s.reason) for s in skipped] == [(no_sender, "no sender"), (none_at_all, "no sender")]


def test_a_folder_given_as_the_database_is_named_as_such(tmp_path: Path) -> None:
    ingress = ingress_at(tmp_path)  # e.g. ~/Library/Messages instead of ~/Library/Messages/chat.db
    with pytest.raises(ChatDBError) as caught:
        ingress.latest_rowid()
    assert caught.value.problem is ChatDBProblem.MISSING
    assert "is a folder" in str(caught.value) and "chat.db" in str(caught.value)


def test_a_missing_database_is_reported_retried_and_read_once_it_appears(tmp_path: Path) -> None:
    path = tmp_path / "Messages" / "chat.db"
    errors: list[ChatDBError | None] = []
    ingress = ingress_at(path, on_error=errors.append)
    with pytest.raises(ChatDBError) as caught:
        ingress.latest_rowid()
    assert caught.value.problem is ChatDBProblem.MISSING
    assert "APPLE_FLOW_MESSAGES_DB_PATH" in str(caught.value)

    def create_later() -> None:
        writer = ChatDbWriter(path)
        writer.message("first ever")
        writer.close()

    timer = threading.Timer(0.5, create_later)
    timer.start()
    got = take(ingress, after=0, count=1, timeout=10)
    timer.join()
    assert [m.text for m in got] == ["first ever"]
    assert errors and errors[0] is not None and errors[0].problem is ChatDBProblem.MISSING
    assert errors[-1] is None  # the listener hears that it is readable again (the daemon's permission report)
    assert ingress.last_error is None  # healthy again


def test_a_locked_database_keeps_the_cursor_and_is_read_when_released(tmp_path: Path) -> None:
    # A rollback-journal database with an exclusive writer is the case where readers really are locked out.
    path = tmp_path / "chat.db"
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.executescript(SCHEMA.read_text())
    conn.execute("INSERT INTO message (guid, text, handle_id, service) VALUES ('a', 'before the lock', 0, 'iMessage')")
    conn.execute("BEGIN EXCLUSIVE")
    conn.execute("INSERT INTO handle (id, service) VALUES ('+15551234567', 'iMessage')")
    conn.execute(
        "INSERT INTO message (guid, text, handle_id, service) VALUES ('b', 'written under the lock', 1, 'iMessage')"
    )
    errors: list[ChatDBError | None] = []
    ingress = ingress_at(path, on_error=errors.append)

    timer = threading.Timer(0.8, lambda: conn.execute("COMMIT"))
    timer.start()
    got = take(ingress, after=1, count=1, timeout=10)
    timer.join()
    conn.close()

    assert errors and errors[0] is not None and errors[0].problem is ChatDBProblem.LOCKED
    assert [(m.rowid, m.text) for m in got] == [(2, "written under the lock")]


def test_a_file_that_is_not_a_database_is_reported_as_such(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(ChatDBError) as caught:
        ChatDB(path).latest_rowid()
    assert caught.value.problem is ChatDBProblem.CORRUPT


# Run by an interpreter reached through a folder only root may enter, as Python installed by pyenv in root's home
# is: the user it drops to can no longer resolve that path, which a daemon never needs to (it resolves at start).
_AS_NOBODY = """
import json, os, sys
from apple_flow.channels.imessage.chatdb import ChatDB, ChatDBError, python_binary
resolved_at_start = str(python_binary())
os.setgid(65534)
os.setuid(65534)
try:
    ChatDB(__import__("pathlib").Path(sys.argv[1]), platform=sys.argv[2]).latest_rowid()
    outcome = ["no error", ""]
except ChatDBError as exc:
    outcome = [exc.problem.value, str(exc)]
print(json.dumps(outcome + [resolved_at_start]))
"""


def _unreadable_error(path: Path, platform: str, tmp_path: Path) -> tuple[str, str, str]:
    """Reads ``path`` as a user who may not: (problem, message, the interpreter binary the process resolved when
    it started). As root (who may read anything) in a child process that drops to nobody first; otherwise with
    the file's permissions removed."""
    if os.geteuid() != 0:
        path.chmod(0)
        try:
            ChatDB(path, platform=platform).latest_rowid()
        except ChatDBError as exc:
            return exc.problem.value, str(exc), str(python_binary())
        finally:
            path.chmod(0o644)
        raise AssertionError("read an unreadable database")
    private = tmp_path / "root-only"
    private.mkdir(mode=0o700)
    (private / "python3").symlink_to(os.path.realpath(sys.executable))
    (tmp_path / "python").symlink_to(private / "python3")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    child = subprocess.run(
        [str(tmp_path / "python"), "-c", _AS_NOBODY, str(path), platform],
        env=env, capture_output=True, text=True, timeout=60,
    )
    assert child.returncode == 0, child.stderr
    problem, message, binary = json.loads(child.stdout)
    return problem, message, binary


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX permissions")
def test_no_permission_on_macos_names_full_disk_access_for_apple_flow_and_the_python_binary(
    chat_db: ChatDbWriter, tmp_path: Path
) -> None:
    chat_db.message("secret")
    problem, message, binary = _unreadable_error(chat_db.path, "darwin", tmp_path)
    assert problem == "no-permission"
    assert "Full Disk Access" in message
    # The service reads as Apple Flow: that is the grant meant; run by hand, the terminal or else this binary.
    assert "reads as Apple Flow: switch on Apple Flow in System Settings > Privacy & Security > Full Disk Access" in (
        message
    )
    assert f"your terminal app (then quit and reopen it), or without one {binary}" in message
    assert binary == os.path.realpath(sys.executable)  # the real file, not a symlink to it


def test_no_permission_elsewhere_says_to_fix_file_permissions(chat_db: ChatDbWriter, tmp_path: Path) -> None:
    problem, message, _ = _unreadable_error(chat_db.path, "linux", tmp_path)
    assert problem == "no-permission"
    assert "readable by the user running apple-flow" in message
    assert "Full Disk Access" not in message


# --- values SQLite holds but Python's sqlite3 cannot read as typed --------------------------------------------------

LONE_SURROGATE = "\ud800".encode("utf-8", "surrogatepass")  # what NSString text with a lone surrogate becomes


def test_text_that_is_not_utf8_is_decoded_leniently_and_the_channel_goes_on(chat_db: ChatDbWriter) -> None:
    bad = chat_db.message("placeholder")
    chat_db.set_raw("message", "text", bad, b"fix " + LONE_SURROGATE + b" please", as_text=True)
    after = chat_db.message("next one")
    got = take(ingress_at(chat_db.path), after=0, count=2)
    assert [(m.rowid, m.text) for m in got] == [(bad, "fix \ufffd please"), (after, "next one")]


def test_a_sender_that_is_not_utf8_skips_only_that_row(chat_db: ChatDbWriter) -> None:
    bad = chat_db.message("from a broken handle", sender="+15550009999")
    chat_db.set_raw("handle", "id", chat_db.handle("+15550009999"), b"+1555" + LONE_SURROGATE, as_text=True)
    after = chat_db.message("next one")
    skipped: list[Skipped] = []
    got = take(ingress_at(chat_db.path), after=0, count=1, skipped=skipped)
    assert [(s.rowid, s.reason) for s in skipped] == [(bad, "sender is not valid UTF-8")]
    assert [m.rowid for m in got] == [after]


def test_a_chat_identifier_that_is_not_utf8_does_not_matter_when_the_handle_is_known(chat_db: ChatDbWriter) -> None:
    bad = chat_db.message("hello", chat="+15551234567")
    chat_db.set_raw("chat", "chat_identifier", chat_db.chat("+15551234567"), b"+1555" + LONE_SURROGATE, as_text=True)
    got = take(ingress_at(chat_db.path), after=0, count=1)
    assert [(m.rowid, m.sender, m.chat_identifier) for m in got] == [(bad, "+15551234567", None)]


@pytest.mark.parametrize("column", ["associated_message_type", "item_type", "is_from_me", "date"])
def test_a_non_integer_in_an_integer_column_skips_that_row_with_the_reason(chat_db: ChatDbWriter, column: str) -> None:
    bad = chat_db.message("odd row")
    chat_db.set_raw("message", column, bad, "banana")
    after = chat_db.message("next one")
    skipped: list[Skipped] = []
    got = take(ingress_at(chat_db.path), after=0, count=1, skipped=skipped)
    assert [(s.rowid, s.reason) for s in skipped] == [(bad, f"{column} is 'banana', not an integer")]
    assert [m.rowid for m in got] == [after]


def test_a_real_daemon_answers_after_rows_it_cannot_use(chat_db: ChatDbWriter, tmp_path: Path) -> None:
    daemon = DaemonProcess(
        tmp_path / "daemon", chat_db.path,
        {"APPLE_FLOW_ALLOWED_SENDERS": "+15551234567", "APPLE_FLOW_AFM_COMMAND": str(tmp_path / "no-apple-code")},
    )
    try:
        # Written before the start (the first start reads the last minute's rows): a running daemon could read a
        # row between its insert and the update that spoils it.
        text_row = chat_db.message("placeholder")
        chat_db.set_raw("message", "text", text_row, b"hi " + LONE_SURROGATE, as_text=True)
        number_row = chat_db.message("odd row")
        chat_db.set_raw("message", "associated_message_type", number_row, "banana")
        chat_db.message("help")
        daemon.start()
        wait_for(lambda: HELP_TEXT in daemon.sends_to("+15551234567"), 20, "the answer to help")
        assert daemon.process is not None and daemon.process.poll() is None
        assert f"chat.db row {number_row} skipped: associated_message_type is 'banana', not an integer" in daemon.log()
    finally:
        daemon.stop()
