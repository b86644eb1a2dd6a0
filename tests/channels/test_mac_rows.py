"""Rows as Messages writes them on a real Mac (shared/reference/mac-edges.md), through the real reader: app and
sticker messages, iCloud replays, texting yourself on macOS 26, group chats, SMS senders, unsends and edits."""

from __future__ import annotations

import gc
import plistlib
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psutil

from apple_flow.channels.base import SentTexts, Skipped
from apple_flow.channels.imessage.ingress import IMessageIngress
from apple_flow.channels.imessage.outgoing import normalise_text
from support.chatdb import ChatDbWriter, apple_ns, make_body
from support.ingress_helpers import next_message, take

ME = "+15551234567"  # the owner: texts the Mac from their phone, allowlisted
FRIEND = "+15557654321"


def ingress_for(db: ChatDbWriter, **kwargs: Any) -> IMessageIngress:
    kwargs.setdefault("sent", None)
    return IMessageIngress(db.path, default_region="US", poll_seconds=0.1, **kwargs)


def read(db: ChatDbWriter, count: int, **kwargs: Any) -> tuple[list[tuple[int, str, str]], list[tuple[int, str]]]:
    """(rowid, sender, text) of up to ``count`` messages taken, and (rowid, reason) of the rows skipped."""
    skipped: list[Skipped] = []
    # count 0: read until the timeout, to see every skip
    got = take(ingress_for(db, **kwargs), after=0, count=count or 10**6, timeout=1.0, skipped=skipped)
    return [(m.rowid, m.sender, m.text) for m in got], [(s.rowid, s.reason) for s in skipped]


# --- associated_message_type ----------------------------------------------------------------------------------------


def test_app_and_sticker_message_types_2_and_3_are_normal_messages(chat_db: ChatDbWriter) -> None:
    app = chat_db.message("from an app", associated_message_type=2)
    other = chat_db.message("also normal", associated_message_type=3)
    tapback = chat_db.message('Loved "hi"', associated_message_type=2000)
    removed = chat_db.message('Removed a heart from "hi"', associated_message_type=3001)
    sticker = chat_db.message("\ufffc", associated_message_type=1000)
    got, skipped = read(chat_db, 0)
    assert [rowid for rowid, _, _ in got] == [app, other]
    assert skipped == [(tapback, "reaction"), (removed, "reaction"), (sticker, "sticker")]


# --- iCloud replays -------------------------------------------------------------------------------------------------


def test_rows_older_than_the_window_are_ignored_whenever_they_arrive(chat_db: ChatDbWriter) -> None:
    now = datetime.now(UTC)
    replayed = [chat_db.message(f"old {i}", when=now - timedelta(days=90 + i)) for i in range(3)]
    recent = chat_db.message("fresh", when=now - timedelta(seconds=20))
    got, skipped = read(chat_db, 1, max_message_age_seconds=300)
    assert [rowid for rowid, _, _ in got] == [recent]
    assert skipped == [(rowid, "older than 5 min") for rowid in replayed]


def test_a_replay_that_lands_while_running_is_ignored_too(chat_db: ChatDbWriter) -> None:
    skipped: list[Skipped] = []
    ingress = ingress_for(chat_db, max_message_age_seconds=300)
    stop = threading.Event()
    messages = ingress.messages(0, stop)
    chat_db.message("now")
    assert next_message(messages, skipped).text == "now"
    old = chat_db.message("re-synced from March", when=datetime.now(UTC) - timedelta(days=200))
    chat_db.message("after the replay")
    assert next_message(messages, skipped).text == "after the replay"
    stop.set()
    assert [(s.rowid, s.reason) for s in skipped] == [(old, "older than 5 min")]


# --- texting yourself -----------------------------------------------------------------------------------------------


def test_on_macos_26_a_text_to_yourself_may_exist_only_as_the_sent_row_and_is_taken(chat_db: ChatDbWriter) -> None:
    mine = chat_db.message(None, body=make_body("help"), sender=ME, is_from_me=True, destination_caller_id=ME)
    got, skipped = read(chat_db, 1)
    assert got == [(mine, ME, "help")] and skipped == []


def test_a_text_to_yourself_stored_twice_is_taken_once_in_either_order(chat_db: ChatDbWriter) -> None:
    sent = chat_db.message("status", sender=ME, is_from_me=True, destination_caller_id=ME)
    received = chat_db.message("status", sender=ME, destination_caller_id=ME)
    received_first = chat_db.message("health", sender=ME, destination_caller_id=ME)
    sent_second = chat_db.message("health", sender=ME, is_from_me=True, destination_caller_id=ME)
    again = chat_db.message("status", sender=ME, is_from_me=True, destination_caller_id=ME)  # typed once more
    got, skipped = read(chat_db, 3)
    assert [(rowid, text) for rowid, _, text in got] == [(sent, "status"), (received_first, "health"),
                                                          (again, "status")]
    assert skipped == [(received, f"copy of row {sent}"), (sent_second, f"copy of row {received_first}")]


def test_your_own_texts_to_someone_else_are_still_skipped(chat_db: ChatDbWriter) -> None:
    to_friend = chat_db.message("see you", sender=FRIEND, is_from_me=True, destination_caller_id=ME)
    no_caller_id = chat_db.message("no caller id", sender=ME, is_from_me=True)
    got, skipped = read(chat_db, 0)
    assert got == [] and skipped == [(to_friend, "from me"), (no_caller_id, "from me")]


def test_the_daemons_reply_in_your_own_chat_is_an_echo_in_both_copies(
    chat_db: ChatDbWriter, sent_texts: SentTexts
) -> None:
    sent_texts.record(ME, normalise_text("Here is the answer."))  # as the egress notes it
    mine = chat_db.message("Here is the answer.", sender=ME, is_from_me=True, destination_caller_id=ME)
    copy = chat_db.message("Here is the answer.", sender=ME, destination_caller_id=ME)
    later = chat_db.message("Here is the answer.", sender=ME, is_from_me=True, destination_caller_id=ME)
    got, skipped = read(chat_db, 1, sent=sent_texts)
    assert skipped == [(mine, "echo"), (copy, "echo")]
    assert [rowid for rowid, _, _ in got] == [later]  # the same words typed later are heard


def test_a_row_replayed_with_a_guid_already_taken_is_not_taken_again(chat_db: ChatDbWriter) -> None:
    first = chat_db.message("task: deploy", guid="6B1F0A52-AAAA")
    ingress = ingress_for(chat_db)
    stop = threading.Event()
    messages = ingress.messages(0, stop)
    assert next_message(messages).rowid == first
    chat_db.conn.execute("DELETE FROM message WHERE ROWID = ?", (first,))  # iCloud deletes and re-inserts it
    again = chat_db.message("task: deploy", guid="6B1F0A52-AAAA")
    chat_db.message("next")
    assert next_message(messages).text == "next"
    stop.set()
    assert again > first


# --- unsent and edited ----------------------------------------------------------------------------------------------


def test_a_row_unsent_before_it_was_read_is_not_taken(chat_db: ChatDbWriter) -> None:
    unsent = [chat_db.message(text) for text in ("approve req_12345678", "deny req_12345678", "task: rm -rf build")]
    for rowid in unsent:
        chat_db.update(rowid, date_retracted=apple_ns(datetime.now(UTC)), text=None)
    got, skipped = read(chat_db, 0)
    assert got == [] and skipped == [(rowid, "unsent") for rowid in unsent]


def edit_history(*texts: str) -> bytes:
    """``message_summary_info`` of an edited message: every version of part 0, the current one last."""
    versions = [{"d": 790000000.0 + i, "t": make_body(text)} for i, text in enumerate(texts)]
    return plistlib.dumps({"ec": {"0": versions}}, fmt=plistlib.FMT_BINARY)


def test_an_edited_row_is_read_with_its_edited_text(chat_db: ChatDbWriter) -> None:
    edited = chat_db.message(
        None, body=make_body("task: delete the logs"), date_edited=apple_ns(datetime.now(UTC)),
        message_summary_info=edit_history("task: delete the logs", "task: archive the logs"),
    )
    broken = chat_db.message(
        None, body=make_body("fallback body"), date_edited=apple_ns(datetime.now(UTC)), message_summary_info=b"junk",
    )
    got, _ = read(chat_db, 2)
    assert [(rowid, text) for rowid, _, text in got] == [(edited, "task: archive the logs"), (broken, "fallback body")]


# --- group chats and SMS senders -----------------------------------------------------------------------------------


def test_a_group_chat_message_is_skipped_as_such_unless_group_replies_are_on(chat_db: ChatDbWriter) -> None:
    in_group = chat_db.message("@everyone what's the build status?", sender=ME, chat="chat493827163")
    macos26 = chat_db.message("second", sender=ME, chat="chat111", guid="g-2")
    chat_db.conn.execute("UPDATE chat SET guid = 'any;+;chat111' WHERE chat_identifier = 'chat111'")
    direct = chat_db.message("just me", sender=ME)
    got, skipped = read(chat_db, 0)
    assert [rowid for rowid, _, _ in got] == [direct] and skipped == [(in_group, "group chat"), (macos26, "group chat")]

    messages = take(ingress_for(chat_db, group_replies=True), after=0, count=3)
    assert [(m.sender, m.reply_to, m.reply_target) for m in messages] == [
        (ME, "iMessage;+;chat493827163", "iMessage;+;chat493827163"),
        (ME, "any;+;chat111", "any;+;chat111"),
        (ME, None, ME),
    ]


def test_a_sender_who_wrote_by_sms_or_rcs_is_answered_through_the_sms_account(chat_db: ChatDbWriter) -> None:
    chat_db.message("by sms", sender=FRIEND, service="SMS")
    chat_db.message("by rcs", sender="+15550001111", service="RCS")
    chat_db.message("by imessage", sender=ME)
    messages = take(ingress_for(chat_db, allow_sms=True), after=0, count=3)
    assert [m.reply_target for m in messages] == [f"SMS;-;{FRIEND}", "SMS;-;+15550001111", ME]
    assert [m.forgeable for m in messages] == [True, True, False]


def test_sms_rcs_and_rows_without_a_service_are_not_taken_by_default(chat_db: ChatDbWriter) -> None:
    """SMS sender IDs can be forged (anyone can send one showing the owner's number); only iMessage rows are acted
    on unless APPLE_FLOW_ALLOW_SMS."""
    sms = chat_db.message("approve req_12345678", sender=FRIEND, service="SMS")
    rcs = chat_db.message("task: push to main", sender=FRIEND, service="RCS")
    none = chat_db.message("hello", sender=FRIEND)
    chat_db.conn.execute("UPDATE message SET service = NULL WHERE ROWID = ?", (none,))
    chat_db.conn.commit()
    trusted = chat_db.message("by imessage", sender=ME)
    skipped: list[Skipped] = []
    got = take(ingress_for(chat_db), after=0, count=1, skipped=skipped)
    assert [m.rowid for m in got] == [trusted] and not got[0].forgeable
    assert [(s.rowid, s.forgeable, s.sender) for s in skipped] == [(sms, True, FRIEND), (rcs, True, FRIEND),
                                                                   (none, True, FRIEND)]
    assert skipped[0].reason.startswith("SMS, not iMessage: its sender can be forged")
    assert skipped[2].reason.startswith("no service, not iMessage")


def test_asking_whether_rows_were_unsent_leaves_no_connection_open(chat_db: ChatDbWriter) -> None:
    """Asked before every queued turn: a connection left to the garbage collector (sqlite3's statement cache makes
    a cycle) stays open with its page cache, and a burst of turns grew the daemon by tens of MiB."""
    kept, unsent = chat_db.message("task: tidy up"), chat_db.message("approve req_12345678")
    chat_db.update(unsent, date_retracted=apple_ns(datetime.now(UTC)), text=None)
    ingress = ingress_for(chat_db)
    gc.disable()
    try:
        # SQLite may keep one descriptor of a closed connection while others hold the file, so count from there.
        assert (ingress.unsent(kept), ingress.unsent(unsent)) == (False, True)
        before = open_chat_db_files(chat_db)
        assert [ingress.unsent(rowid) for rowid in (kept, unsent) * 5] == [False, True] * 5
        assert open_chat_db_files(chat_db) == before
    finally:
        gc.enable()


def open_chat_db_files(db: ChatDbWriter) -> int:
    return sum(1 for f in psutil.Process().open_files() if Path(f.path).name.startswith(db.path.name))
