"""The record of sent texts (the daemon store's, as a channel sees it, with texts in ``normalise_text`` form): window,
whitespace-insensitive match, per recipient and channel, each copy consumed once, kept across restarts. The record
of copies: a copy's decision kept at once, a taken row's marks with its message's first record."""

from __future__ import annotations

from pathlib import Path

import pytest

from apple_flow.channels.base import CopyMarks, Known
from apple_flow.channels.imessage.echo import Copies, MemoryCopyRecord
from apple_flow.channels.imessage.outgoing import normalise_text
from apple_flow.daemon.store import Store
from apple_flow.daemon.store import copies as copies_module
from support.clock import Clock


def test_an_echo_is_recognised_within_the_window_only(tmp_path: Path) -> None:
    clock = Clock()
    log = Store(tmp_path / "relay.db", clock=clock).sent.for_channel("imessage", 60)
    log.record("+15551234567", "first")
    log.record("+15551234567", "second")
    clock.now += 30
    assert log.take_echo("+15551234567", "first")
    clock.now += 31
    assert not log.take_echo("+15551234567", "second")  # expired


def test_match_ignores_whitespace_changes_but_not_words(tmp_path: Path) -> None:
    log = Store(tmp_path / "relay.db").sent.for_channel("imessage", 60)
    log.record("a@b.c", normalise_text("Line one\nline  two "))
    assert not log.take_echo("a@b.c", normalise_text("Line one line three"))
    assert log.take_echo("a@b.c", normalise_text(" Line one line two"))


def test_each_copy_of_a_sent_text_is_recognised_once(tmp_path: Path) -> None:
    log = Store(tmp_path / "relay.db").sent.for_channel("imessage", 60)
    log.record("a@b.c", "ok")
    assert log.take_echo("a@b.c", "ok")  # the received copy
    assert not log.take_echo("a@b.c", "ok")
    assert log.take_echo("a@b.c", "ok", from_me=True)  # the sent copy (texting yourself)
    assert not log.take_echo("a@b.c", "ok", from_me=True)
    log.record("a@b.c", "again")
    assert log.take_echo("a@b.c", "again", from_me=True)  # either copy may come first
    assert log.take_echo("a@b.c", "again")


def test_zero_window_suppresses_nothing_later(tmp_path: Path) -> None:
    clock = Clock()
    log = Store(tmp_path / "relay.db", clock=clock).sent.for_channel("imessage", 0)
    log.record("a@b.c", "ok")
    clock.now += 0.001
    assert not log.take_echo("a@b.c", "ok")


def test_the_record_is_per_channel_and_survives_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "relay.db"
    first = Store(path)
    first.sent.for_channel("imessage", 600).record("a@b.c", "ok")
    first.sent.for_channel("console:1", 600).record("a@b.c", "elsewhere")
    first.close()
    again = Store(path).sent.for_channel("imessage", 600)
    assert not again.take_echo("a@b.c", "elsewhere")  # another channel's text
    assert again.take_echo("a@b.c", "ok")


def take(store: Store, rowid: int, marks: int | CopyMarks | None) -> None:
    """What the daemon does with a message the ingress took: its first record keeps the row's marks."""
    assert isinstance(marks, CopyMarks)
    with store.transaction():
        store.messages.take_message("imessage", rowid, "+15551234567", marks.text, marks)


def test_copies_kept_in_the_store_decide_a_row_read_again_as_the_first_time(tmp_path: Path) -> None:
    """After a restart the ingress reads again from the cursor: a row taken then is taken again (its message is
    handled again), a row skipped then as a copy stays skipped, and a copy arriving now is known."""
    path = tmp_path / "relay.db"
    store = Store(path)
    before = Copies(store.copies.copies_of("imessage"))
    take(store, 10, before.first_copy(10, "g10", "+15551234567", "status", from_me=True))
    assert before.first_copy(11, "g11", "+15551234567", normalise_text("status "), from_me=False) == 10
    take(store, 12, before.first_copy(12, "g12", None, "hello", from_me=False))
    store.close()
    store = Store(path)
    after = Copies(store.copies.copies_of("imessage"))
    assert after.first_copy(10, "g10", "+15551234567", "status", from_me=True) is None
    assert after.first_copy(11, "g11", "+15551234567", "status", from_me=False) == 10
    assert after.first_copy(13, "g12", None, "hello", from_me=False) == 12  # re-inserted with its guid
    typed_again = after.first_copy(14, "g14", "+15551234567", "status", from_me=False)
    assert isinstance(typed_again, CopyMarks)  # taken
    elsewhere = Copies(store.copies.copies_of("console:1")).first_copy(13, "g12", None, "hello", False)
    assert isinstance(elsewhere, CopyMarks)  # another channel's row


def test_a_copy_coming_while_its_message_waits_is_known_and_the_pair_stays_complete_once_kept(tmp_path: Path) -> None:
    """A message waiting in the queue has no record yet (it is recorded when its turn starts): its row is known
    to the ingress meanwhile, its marks reach the store with its record, and the pair it completed stays complete
    across a restart (a third copy of the words is a new request)."""
    path = tmp_path / "relay.db"
    store = Store(path)
    copies = Copies(store.copies.copies_of("imessage"))
    waiting = copies.first_copy(20, "g20", "+15551234567", "run the tests", from_me=True)
    assert isinstance(waiting, CopyMarks) and not store.copies.known("imessage", 20, "").decided
    assert copies.first_copy(21, "g21", "+15551234567", "run the tests", from_me=False) == 20  # the other copy
    assert copies.first_copy(22, "g20", None, "run the tests", from_me=True) == 20  # re-inserted with its guid
    take(store, 20, waiting)  # its turn starts
    assert store.copies.known("imessage", 20, "") == Known(True, None)
    store.close()
    store = Store(path)
    again = Copies(store.copies.copies_of("imessage"))
    assert again.first_copy(21, "g21", "+15551234567", "run the tests", from_me=False) == 20
    assert isinstance(again.first_copy(23, "g23", "+15551234567", "run the tests", from_me=False), CopyMarks)


def test_a_row_whose_message_was_never_recorded_is_decided_again_after_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "relay.db"
    store = Store(path)
    assert isinstance(Copies(store.copies.copies_of("imessage")).first_copy(30, "g30", None, "hi", False), CopyMarks)
    store.close()  # before its turn started: the cursor has not passed it, it is read again
    assert isinstance(Copies(Store(path).copies.copies_of("imessage")).first_copy(30, "g30", None, "hi", False),
                      CopyMarks)


def test_a_messages_marks_are_written_in_the_transaction_that_takes_it(tmp_path: Path) -> None:
    store = Store(tmp_path / "relay.db")
    marks = Copies(store.copies.copies_of("imessage")).first_copy(40, "g40", None, "hi", False)
    statements: list[str] = []
    store.db.trace(statements.append)
    take(store, 40, marks)
    store.db.trace(None)
    assert [s.split()[0] for s in statements] == ["BEGIN", "INSERT", "INSERT", "COMMIT"]
    assert "INTO messages" in statements[1] and "INTO copies" in statements[2]


def test_the_store_keeps_the_newest_copies_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(copies_module, "COPIES_KEEP", 150)
    store = Store(tmp_path / "relay.db")
    copies = Copies(store.copies.copies_of("imessage"))
    for rowid in range(1, 401):
        take(store, rowid, copies.first_copy(rowid, f"g{rowid}", None, "hi", from_me=False))
    fresh = Copies(store.copies.copies_of("imessage"))  # the rows taken lately are known in memory too
    assert fresh.first_copy(1000, "g400", None, "hi", from_me=False) == 400
    assert isinstance(fresh.first_copy(1001, "g1", None, "hi", from_me=False), CopyMarks)  # forgotten: long gone
    assert store.copies.known("imessage", 400, "") == Known(True, None)
    assert not store.copies.known("imessage", 1, "").decided


def test_the_memory_record_knows_a_guid_while_a_row_with_it_is_kept() -> None:
    record = MemoryCopyRecord(keep=3)
    record.add(1, "g1", "", "hi", False, 0.0, None)
    record.add(2, "g1", "", "hi", False, 0.0, 1)  # re-inserted: a copy of row 1
    record.add(3, "g3", "", "yo", False, 0.0, None)
    assert record.known(9, "g1").first_with_guid == 1 and record.known(9, "g3").first_with_guid == 3
    assert record.known(2, "g1") == Known(True, 1, 1)
    record.add(4, "g4", "", "hey", False, 0.0, None)  # row 1 goes; its copy keeps the guid known
    assert record.known(1, "g1") == Known(False, None, 1)
    record.add(5, "g5", "", "ok", False, 0.0, None)  # the copy goes too
    assert record.known(9, "g1").first_with_guid is None and record.known(9, "g4").first_with_guid == 4
    record.add(4, "g6", "", "hey", False, 0.0, None)  # a row decided again under another guid
    assert record.known(9, "g4").first_with_guid is None and record.known(9, "g6").first_with_guid == 4
