"""The record of sent texts (the daemon store's, as a channel sees it, with texts in ``normalise_text`` form): window,
whitespace-insensitive match, per recipient and channel, each copy consumed once, kept across restarts."""

from __future__ import annotations

from pathlib import Path

import pytest

from apple_flow.channels.imessage.copies import CopyTable
from apple_flow.channels.imessage.echo import normalise_text
from apple_flow.daemon.store import Store
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


def test_copies_kept_in_the_store_decide_a_row_read_again_as_the_first_time(tmp_path: Path) -> None:
    """After a restart the ingress reads again from the cursor: a row taken then is taken again (its message is
    handled again), a row skipped then as a copy stays skipped, and a copy arriving now is known."""
    from apple_flow.channels.imessage.echo import Copies

    path = tmp_path / "relay.db"
    before = Copies(CopyTable(Store(path).db, "imessage"))
    assert before.first_copy(10, "g10", "+15551234567", "status", from_me=True) is None
    assert before.first_copy(11, "g11", "+15551234567", "status ", from_me=False) == 10
    assert before.first_copy(12, "g12", None, "hello", from_me=False) is None
    after = Copies(CopyTable(Store(path).db, "imessage"))
    assert after.first_copy(10, "g10", "+15551234567", "status", from_me=True) is None
    assert after.first_copy(11, "g11", "+15551234567", "status", from_me=False) == 10
    assert after.first_copy(13, "g12", None, "hello", from_me=False) == 12  # re-inserted with its guid
    assert after.first_copy(14, "g14", "+15551234567", "status", from_me=False) is None  # typed again
    assert Copies(CopyTable(Store(path).db, "console:1")).first_copy(13, "g12", None, "hello", False) is None


def test_the_store_keeps_the_newest_copies_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import apple_flow.channels.imessage.copies as copies_module
    from apple_flow.channels.imessage.echo import Copies

    monkeypatch.setattr(copies_module, "COPIES_KEEP", 150)
    store = Store(tmp_path / "relay.db")
    table = CopyTable(store.db, "imessage")
    copies = Copies(table)
    for rowid in range(1, 401):
        assert copies.first_copy(rowid, f"g{rowid}", None, "hi", from_me=False) is None
    assert copies.first_copy(1000, "g400", None, "hi", from_me=False) == 400
    assert copies.first_copy(1001, "g1", None, "hi", from_me=False) is None  # forgotten: long gone
    assert table.verdict(400) == (True, None) and table.verdict(1) == (False, None)
