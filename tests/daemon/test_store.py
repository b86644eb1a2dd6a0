"""The store: created on first use, migrated by version, durable across reopen, clear about bad files."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from apple_flow.connectors.base import Exchange
from apple_flow.daemon.store import HISTORY_KEEP, SCHEMA_VERSION, FinishedTurn, Store, StoreError
from support.old_database import old_database


def test_first_open_creates_the_database_in_wal_mode_at_the_current_version(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "relay.db"
    store = Store(path)
    assert path.exists()
    assert store.db.schema_version == SCHEMA_VERSION >= 1
    mode = sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"


def test_everything_survives_reopening(tmp_path: Path) -> None:
    path = tmp_path / "relay.db"
    store = Store(path)
    store.cursors.set_cursor("imessage", 41)
    store.messages.take_message("imessage", 42, "+15551234567", "hi")
    store.messages.record_message_reply("imessage", 42, "hello")
    store.history.append_exchange("+15551234567", Exchange("hi", "hello"))
    store.events.log("start", "test")
    store.close()
    again = Store(path)
    assert again.cursors.get_cursor("imessage") == 41
    record = again.messages.get_message("imessage", 42)
    assert record is not None and (record.state, record.reply) == ("replied", "hello")
    assert again.history.recent_exchanges("+15551234567", 5) == [Exchange("hi", "hello")]
    assert [e.kind for e in again.events.recent_events()] == ["start"]


def test_a_database_from_a_newer_version_is_refused_with_what_to_do(tmp_path: Path) -> None:
    path = tmp_path / "relay.db"
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    db.close()
    with pytest.raises(StoreError, match="newer than this apple-flow"):
        Store(path)


def test_a_file_that_is_not_a_database_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "relay.db"
    path.write_text("not sqlite at all, just some notes " * 100)
    before = path.read_bytes()
    with pytest.raises(StoreError, match="APPLE_FLOW_DB_PATH"):
        Store(path)
    assert path.read_bytes() == before


def test_history_is_newest_last_limited_and_capped(tmp_path: Path) -> None:
    store = Store(tmp_path / "relay.db")
    for i in range(HISTORY_KEEP + 5):
        store.history.append_exchange("a", Exchange(f"q{i}", f"a{i}"))
    store.history.append_exchange("b", Exchange("other", "thread"))
    assert store.history.recent_exchanges("a", 2) == [Exchange(f"q{HISTORY_KEEP + 3}", f"a{HISTORY_KEEP + 3}"),
                                      Exchange(f"q{HISTORY_KEEP + 4}", f"a{HISTORY_KEEP + 4}")]
    assert len(store.history.recent_exchanges("a", 1000)) == HISTORY_KEEP
    assert store.history.recent_exchanges("a", 0) == []
    store.history.clear_history("a")
    assert store.history.recent_exchanges("a", 5) == []
    assert store.history.recent_exchanges("b", 5) == [Exchange("other", "thread")]


def test_a_failed_transaction_writes_nothing(tmp_path: Path) -> None:
    store = Store(tmp_path / "relay.db")
    with pytest.raises(RuntimeError), store.transaction():
        store.messages.take_message("imessage", 1, "x", "hi")
        store.cursors.set_cursor("imessage", 1)
        raise RuntimeError("boom")
    assert store.messages.get_message("imessage", 1) is None
    assert store.cursors.get_cursor("imessage") is None


def test_runs_left_running_are_marked_interrupted(tmp_path: Path) -> None:
    store = Store(tmp_path / "relay.db")
    store.runs.start_run("run_a", "x", "chat", "/ws", "hi")
    store.runs.start_run("run_b", "x", "chat", "/ws", "hi")
    store.runs.finish_run("run_b", FinishedTurn(None, "done", "ok"))
    assert store.runs.interrupt_running() == 1
    run = store.runs.get_run("run_a")
    assert run is not None and run.state == "interrupted"
    done = store.runs.get_run("run_b")
    assert done is not None and done.state == "done"


def test_a_version_1_database_is_migrated_keeping_its_data(tmp_path: Path) -> None:
    path = old_database(tmp_path / "relay.db", 1, "INSERT INTO cursor (channel, last_rowid) VALUES ('imessage', 7)")
    store = Store(path)
    assert store.db.schema_version == SCHEMA_VERSION == 15
    assert store.cursors.get_cursor("imessage") == 7
    store.meta.set_meta("child_token", "abc")
    assert store.meta.get_meta("child_token") == "abc" and store.meta.get_meta("other") is None


def test_a_finished_turn_is_recorded_whole_or_not_at_all(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from apple_flow.connectors.base import Status, TurnOutcome, Usage
    from apple_flow.daemon.deciding.approvals import Approvals

    store = Store(tmp_path / "relay.db")
    plan = Approvals(store.approvals, ttl_minutes=20).create("+15551234567", "task", "1. do it", "/ws")
    outcome = TurnOutcome(
        Status.ANSWERED, "1. do it", files_changed=("a.py",), commands_run=2, usage=Usage(900, 40, estimated=True)
    )
    turn = FinishedTurn("Plan: 1. do it", "done", "1. do it", outcome, Exchange("task", "1. do it"), plan)
    for rowid, run_id in ((1, "run_a"), (2, "run_b")):
        store.messages.take_message("imessage", rowid, "+15551234567", "task: do it")
        store.runs.start_run(run_id, "+15551234567", "task", "/ws", "do it")

    def disk_full(approval: object) -> None:
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(store.approvals, "add_approval", disk_full)
    with pytest.raises(sqlite3.OperationalError), store.transaction():
        store.messages.record_message_reply("imessage", 1, turn.reply)
        store.record_turn("+15551234567", "run_a", turn)
    message, run = store.messages.get_message("imessage", 1), store.runs.get_run("run_a")
    assert message is not None and (message.state, message.reply) == ("taken", None)
    assert run is not None and (run.state, run.outcome) == ("running", None)
    assert store.history.recent_exchanges("+15551234567", 5) == [] and store.approvals.get_approval(plan.id) is None

    monkeypatch.undo()
    with store.transaction():
        store.messages.record_message_reply("imessage", 2, turn.reply)
        store.record_turn("+15551234567", "run_b", turn)
    message, run = store.messages.get_message("imessage", 2), store.runs.get_run("run_b")
    assert message is not None and (message.state, message.reply) == ("replied", "Plan: 1. do it")
    assert run is not None and (run.state, run.result, run.outcome) == ("done", "1. do it", "answered")
    assert (run.files_changed, run.commands_run, run.input_tokens, run.output_tokens) == ('["a.py"]', 2, 900, 40)
    assert store.history.recent_exchanges("+15551234567", 5) == [Exchange("task", "1. do it")]
    assert store.approvals.get_approval(plan.id) == plan


def test_a_version_8_database_gains_the_runs_backend_and_searches_only_the_senders_runs(tmp_path: Path) -> None:
    path = old_database(
        tmp_path / "relay.db", 8,
        "INSERT INTO runs (id, sender, kind, workspace, request, state, result, started_at) VALUES "
        "('run_old', 'ana', 'chat', '/ws', 'Straße am Fluss', 'done', 'ok', 1), "
        "('run_bob', 'bob', 'chat', '/ws', 'STRASSE for bob', 'done', 'ok', 2)",
    )
    store = Store(path)
    old = store.runs.get_run("run_old")
    assert old is not None and (old.backend, old.tokens_estimated) == (None, None)
    # Casefolded, as Python compares: "Straße" contains "strasse"; SQLite's lower() would not see it.
    assert [run.id for run in store.runs.search("ana", "STRASSE")] == ["run_old"]
    assert [run.id for run in store.runs.search("bob", "strasse")] == ["run_bob"]
    assert store.runs.search("ana", "bob") == []


def test_the_cursor_advances_and_never_goes_back(tmp_path: Path) -> None:
    store = Store(tmp_path / "relay.db")
    store.cursors.advance_cursor("imessage", 5)
    store.cursors.advance_cursor("imessage", 3)  # a save that lost a race with a later one
    assert store.cursors.get_cursor("imessage") == 5
    store.cursors.advance_cursor("imessage", 9)
    assert store.cursors.get_cursor("imessage") == 9


def test_sent_texts_are_kept_for_the_echo_window_only(tmp_path: Path) -> None:
    now = [1000.0]
    store = Store(tmp_path / "relay.db", clock=lambda: now[0])
    store.sent.record_sent("imessage", "+15551234567", "old reply", keep_seconds=600)
    now[0] = 1700.0
    store.sent.record_sent("imessage", "+15551234567", "new reply", keep_seconds=600)  # writing prunes the old one
    store.sent.record_sent("console:1", "+15551234567", "elsewhere", keep_seconds=600)
    assert not store.sent.take_sent("imessage", "+15551234567", "old reply", since=0.0)  # gone, whatever is asked
    assert not store.sent.take_sent("imessage", "+15551234567", "elsewhere", since=0.0)  # another channel's
    assert not store.sent.take_sent("imessage", "+15551234567", "new reply", since=1800.0)  # older than asked
    assert store.sent.take_sent("imessage", "+15551234567", "new reply", since=1200.0)
    assert not store.sent.take_sent("imessage", "+15551234567", "new reply", since=1200.0)  # used up
    assert store.sent.take_sent("console:1", "+15551234567", "elsewhere", since=0.0)


def test_a_version_9_database_gains_the_record_of_a_replys_files_keeping_its_messages(tmp_path: Path) -> None:
    from apple_flow.daemon.store import ReplyFile, message_reply

    path = old_database(
        tmp_path / "relay.db", 9,
        "INSERT INTO messages (channel, rowid, sender, text, state, reply, received_at, updated_at) VALUES "
        "('imessage', 3, 'ana', 'send me the report', 'replied', 'Here it is.', 1, 1)",
    )
    store = Store(path)
    assert store.db.schema_version == SCHEMA_VERSION
    old = store.messages.get_message("imessage", 3)
    assert old is not None and (old.state, old.reply) == ("replied", "Here it is.")  # its restart sends it as before
    assert store.reply_files.unsent(message_reply("imessage", 3)) == []

    with store.transaction():
        store.messages.record_message_reply("imessage", 3, "Here it is.\n\nSending: a.csv (3 bytes), b.csv (3 bytes).")
        store.reply_files.record_files(message_reply("imessage", 3), "ana", "ana", "/ws", [("a.csv", "/ws/a.csv"),
                                                                                      ("b.csv", "/ws/b.csv")])
    first, second = store.reply_files.unsent(message_reply("imessage", 3))
    assert first == ReplyFile(first.id, "ana", "ana", "/ws", "a.csv", "/ws/a.csv") and second.shown == "b.csv"
    store.reply_files.mark_file_done(first.id)
    store.reply_files.mark_file_done(second.id, "no such file")
    assert store.reply_files.unsent(message_reply("imessage", 3)) == []
    rows = sqlite3.connect(path).execute("SELECT shown, state, problem FROM reply_files ORDER BY id").fetchall()
    assert rows == [("a.csv", "sent", None), ("b.csv", "not_sent", "no such file")]


def test_a_replys_files_are_recorded_with_it_or_not_at_all(tmp_path: Path) -> None:
    from apple_flow.daemon.store import WEB_REPLY_PREFIX, message_reply, web_reply

    store = Store(tmp_path / "relay.db")
    store.messages.take_message("imessage", 1, "ana", "send me a.csv")
    with pytest.raises(sqlite3.OperationalError), store.transaction():
        store.messages.record_message_reply("imessage", 1, "Here.")
        store.reply_files.record_files(message_reply("imessage", 1), "ana", "ana", "/ws", [("a.csv", "/ws/a.csv")])
        raise sqlite3.OperationalError("database or disk is full")
    assert store.reply_files.unsent(message_reply("imessage", 1)) == []
    message = store.messages.get_message("imessage", 1)
    assert message is not None and message.state == "taken"

    store.reply_files.record_files(web_reply("req_2"), "bob", "bob", "/ws", [("b.csv", "/ws/b.csv")])
    store.reply_files.record_files(message_reply("imessage", 1), "ana", "ana", "/ws", [("a.csv", "/ws/a.csv")])
    store.reply_files.record_files(web_reply("req_1"), "ana", "ana", "/ws", [("c.csv", "/ws/c.csv")])
    assert store.reply_files.replies_with_unsent(WEB_REPLY_PREFIX) == ["web:req_2", "web:req_1"]  # oldest first
