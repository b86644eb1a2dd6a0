"""The chat.db ingress against real-schema databases: order, decoding, senders, skips, cursor accounting."""

from __future__ import annotations

import subprocess
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest

from apple_flow.channels.base import InboundMessage, SentTexts
from apple_flow.channels.imessage import Skipped, build_imessage_channel
from apple_flow.channels.imessage.ingress import IMessageIngress
from apple_flow.channels.imessage.outgoing import normalise_text
from apple_flow.daemon.store import Store
from support.chatdb import REAL_BODIES, ChatDbWriter, make_body
from support.ingress_helpers import next_message, take


def ingress_for(db: ChatDbWriter, sent: SentTexts | None = None, **kwargs: object) -> IMessageIngress:
    return IMessageIngress(db.path, default_region="US", sent=sent, poll_seconds=0.2, **kwargs)  # type: ignore[arg-type]


def test_reads_messages_after_the_cursor_in_order_with_sender_date_and_chat(chat_db: ChatDbWriter) -> None:
    when = datetime(2026, 3, 14, 15, 9, 26, 535000, tzinfo=UTC)
    first = chat_db.message("old one", sender="+15551234567")
    second = chat_db.message("hello", sender="+15551234567", when=when)
    third = chat_db.message("from mail", sender="Someone@Example.COM")

    got = take(ingress_for(chat_db), after=first, count=2)

    assert [m.rowid for m in got] == [second, third]
    assert got[0].text == "hello"
    assert got[0].sender == "+15551234567"
    assert got[0].date == when
    assert got[0].chat_identifier == "+15551234567"
    assert got[0].is_from_me is False
    assert got[1].sender == "someone@example.com"


def test_text_comes_from_attributed_body_when_text_is_null_or_empty(chat_db: ChatDbWriter) -> None:
    real = (REAL_BODIES / "AttributedBodyTextOnly.bin").read_bytes()
    chat_db.message(None, body=real)
    chat_db.message("", body=(REAL_BODIES / "AttributedBodyTextOnly2.bin").read_bytes())
    chat_db.message(None, body=make_body("emoji 👋🏽 中文 𝐁 \ufffc café"))

    got = take(ingress_for(chat_db), after=0, count=3)

    assert [m.text for m in got] == ["Noter test", "Test 3", "emoji 👋🏽 中文 𝐁 \ufffc café"]


def test_differently_formatted_handles_become_one_sender(chat_db: ChatDbWriter) -> None:
    for handle in ("+1 (555) 123-4567", "15551234567", "+15551234567", "(555) 123-4567"):
        chat_db.message(f"from {handle}", sender=handle)

    got = take(ingress_for(chat_db), after=0, count=4)

    assert {m.sender for m in got} == {"+15551234567"}


def test_skipped_rows_are_yielded_with_their_reason_so_the_cursor_passes_them(chat_db: ChatDbWriter) -> None:
    rows = {
        "from me": chat_db.message("my own text", is_from_me=True),
        "reaction": chat_db.message('Loved "hello"', associated_message_type=2000),
        "empty null": chat_db.message(None),
        "empty blank body": chat_db.message(None, body=(REAL_BODIES / "Blank.bin").read_bytes()),
        "attachment only": chat_db.message("\ufffc"),
        "whitespace": chat_db.message("   \n "),
        "system": chat_db.message("renamed the group", item_type=2),
    }
    real = chat_db.message("a real request")
    trailing = chat_db.message("me again", is_from_me=True)
    skipped: list[Skipped] = []
    ingress = ingress_for(chat_db)

    got = take(ingress, after=0, count=1, skipped=skipped)
    assert [m.rowid for m in got] == [real]
    assert [s.rowid for s in skipped] == list(rows.values())
    assert [s.reason for s in skipped] == [
        "from me", "reaction", "empty", "empty", "empty", "empty", "system event",
    ]

    # Nothing more to yield: the generator still passes the trailing skipped row and says so.
    skipped.clear()
    assert take(ingress, after=real, count=1, timeout=0.6, skipped=skipped) == []
    assert [s.rowid for s in skipped] == [trailing]
    assert ingress.scanned_rowid == trailing


def test_scanned_rowid_does_not_pass_a_message_before_the_caller_is_done_with_it(chat_db: ChatDbWriter) -> None:
    skip = chat_db.message("mine", is_from_me=True)
    real = chat_db.message("request")
    ingress = ingress_for(chat_db)
    stop = threading.Event()
    messages = ingress.messages(0, stop)
    skipped = next(messages)
    assert isinstance(skipped, Skipped) and skipped.rowid == skip
    assert ingress.scanned_rowid == 0  # the caller is still handling the skipped row
    first = next(messages)
    assert isinstance(first, InboundMessage) and first.rowid == real
    assert ingress.scanned_rowid == skip  # the yielded row is the caller's to persist
    stop.set()
    assert list(messages) == []
    assert ingress.scanned_rowid == real


def test_a_restart_from_the_persisted_cursor_neither_repeats_nor_answers_an_echo(
    chat_db: ChatDbWriter, sent_texts: SentTexts, tmp_path: Path
) -> None:
    # The daemon persists the cursor for each handled message and for each skipped row, as a kill -9 could come
    # at any point. So the echo row is behind the persisted cursor, even for a restart with an empty record.
    persisted = {"cursor": 0}

    def persist(rowid: int) -> None:
        persisted["cursor"] = max(persisted["cursor"], rowid)

    ingress = ingress_for(chat_db, sent=sent_texts)
    request = chat_db.message("what time is it?")
    stop = threading.Event()
    messages = ingress.messages(0, stop)
    message = next(messages)
    persist(message.rowid)
    sent_texts.record("+15551234567", "It is noon.")  # the reply; Messages stores it twice when self-texting
    chat_db.message("It is noon.", is_from_me=True)
    echo = chat_db.message("It is noon.")
    stopper = threading.Timer(1.0, stop.set)
    stopper.start()
    rest = list(messages)
    stopper.cancel()
    assert [(s.rowid, isinstance(s, Skipped) and s.reason) for s in rest] == [(echo - 1, "from me"), (echo, "echo")]
    for item in rest:
        persist(item.rowid)
    assert persisted["cursor"] == echo > request

    restarted = ingress_for(chat_db, sent=Store(tmp_path / "empty.db").sent.for_channel("imessage", 600))
    assert take(restarted, after=persisted["cursor"], count=1, timeout=0.6) == []


def test_the_echo_of_a_text_sent_before_a_restart_is_taken_from_the_stores_record(
    chat_db: ChatDbWriter, tmp_path: Path
) -> None:
    # One record of sent texts, in the daemon's store: what the egress noted before a restart is what the
    # restarted ingress checks (the echo can land in chat.db while the daemon is down).
    path = tmp_path / "state" / "relay.db"
    store = Store(path)
    store.sent.for_channel("imessage", 600).record("+15551234567", normalise_text("It is  noon."))
    store.close()
    echo = chat_db.message("It is noon.")
    later = chat_db.message("It is noon.")  # the same words typed again are heard
    skipped: list[Skipped] = []

    got = take(ingress_for(chat_db, sent=Store(path).sent.for_channel("imessage", 600)), 0, 1, skipped=skipped)

    assert [(s.rowid, s.reason) for s in skipped] == [(echo, "echo")]
    assert [m.rowid for m in got] == [later]


def test_echo_of_the_daemons_reply_is_skipped_but_the_same_words_later_are_heard(
    chat_db: ChatDbWriter, sent_texts: SentTexts
) -> None:
    sent_texts.record("+15551234567", normalise_text("Done:  all tests pass."))  # as the egress notes it
    echo = chat_db.message("Done: all tests pass.\n")
    again = chat_db.message("Done: all tests pass.")
    skipped: list[Skipped] = []

    got = take(ingress_for(chat_db, sent=sent_texts), after=0, count=1, skipped=skipped)

    assert [(s.rowid, s.reason) for s in skipped] == [(echo, "echo")]
    assert [m.rowid for m in got] == [again]


def test_echo_is_only_recognised_from_the_recipient(chat_db: ChatDbWriter, sent_texts: SentTexts) -> None:
    sent_texts.record("+15551234567", "ok")
    other = chat_db.message("ok", sender="+15557654321")

    got = take(ingress_for(chat_db, sent=sent_texts), after=0, count=1)

    assert [m.rowid for m in got] == [other]


def test_new_rows_from_another_process_are_picked_up_by_watching(chat_db: ChatDbWriter, tmp_path: Path) -> None:
    start = chat_db.message("before")
    ingress = IMessageIngress(chat_db.path, default_region="US", sent=None, poll_seconds=30)  # poll out of reach
    writer = (
        "import sys, time; sys.path[:0] = sys.argv[2:]\n"
        "from support.chatdb import ChatDbWriter\n"
        "time.sleep(0.5)\n"
        "w = ChatDbWriter(__import__('pathlib').Path(sys.argv[1])); w.message('from another process'); w.close()\n"
    )
    tests_dir = str(Path(__file__).resolve().parents[1])
    proc = subprocess.Popen([sys.executable, "-c", writer, str(chat_db.path), tests_dir])
    try:
        got = take(ingress, after=start, count=1, timeout=10)
    finally:
        proc.wait(timeout=10)
    assert [m.text for m in got] == ["from another process"]
    assert ingress.watching is False  # reset when the generator ends


def test_the_ingress_watches_the_database_folder_while_waiting(chat_db: ChatDbWriter) -> None:
    ingress = IMessageIngress(chat_db.path, default_region="US", sent=None, poll_seconds=0.1)
    stop = threading.Event()
    states: list[bool] = []
    messages = ingress.messages(0, stop)
    chat_db.message("one")
    next_message(messages)
    chat_db.message("two")
    next_message(messages)  # the generator waited once in between
    states.append(ingress.watching)
    stop.set()
    list(messages)
    assert states == [True]


def test_build_imessage_channel_shares_the_sent_record(channel_settings, chat_db, fake_osascript, sent_texts) -> None:  # type: ignore[no-untyped-def]
    ingress, egress = build_imessage_channel(channel_settings(), sent_texts)
    egress.send("(555) 123-4567", "Here is your answer.")
    echo = chat_db.message("Here is your answer.")
    real = chat_db.message("thanks")

    got = take(ingress, after=0, count=1)

    assert [m.rowid for m in got] == [real] and echo < real
    assert ingress.latest_rowid() == real


@pytest.mark.parametrize("both_copies", [True, False], ids=["sent-and-received-rows", "sent-row-only-macos-26"])
def test_texting_yourself_never_loops(channel_settings, chat_db, fake_osascript, both_copies, sent_texts) -> None:  # type: ignore[no-untyped-def]
    # The usual smoke test: you text your own handle. Messages stores what you typed and each reply as the sent row,
    # plus (one device, older macOS) a received copy; on macOS 26 with several devices only the sent row.
    me = "+15551234567"
    fake_osascript.owner(me, received_copy=both_copies)
    ingress, egress = build_imessage_channel(channel_settings(reply_chunk_chars=120), sent_texts)
    chat_db.message("hello agent", sender=me, is_from_me=True, destination_caller_id=me)  # what you typed
    if both_copies:
        chat_db.message("hello agent", sender=me, destination_caller_id=me)
    typed = 2 if both_copies else 1

    stop = threading.Event()
    answered: list[str] = []
    timer = threading.Timer(1.5, stop.set)  # every echo row exists before send() returns
    timer.start()
    for message in ingress.messages(0, stop):
        if isinstance(message, Skipped):
            continue
        answered.append(message.text)
        egress.send(message.sender, "Hi! " + "Here is a long answer in several sentences. " * 5)
    timer.cancel()

    assert answered == ["hello agent"]  # the reply's parts came back, and none was taken as a new request
    parts = [c["argv"][2] for c in fake_osascript.calls()]
    assert len(parts) > 1
    assert ingress.latest_rowid() == typed + typed * len(parts)


def test_a_backlog_larger_than_one_read_comes_in_order_without_waiting(chat_db: ChatDbWriter) -> None:
    rowids = [chat_db.message(f"backlog {i}") for i in range(250)]
    ingress = IMessageIngress(chat_db.path, default_region="US", sent=None, poll_seconds=30)  # no poll to rescue it
    got = take(ingress, after=0, count=250, timeout=10)
    assert [m.rowid for m in got] == rowids
