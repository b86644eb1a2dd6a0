"""The daemon loop with a real store (SQLite) and an in-process connector the test controls."""

from __future__ import annotations

import itertools
import re
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from apple_flow.channels.base import CopyMarks, InboundMessage
from apple_flow.config import Settings
from apple_flow.connectors.base import Exchange, Status, TurnOutcome
from apple_flow.daemon.deciding.commands import parse
from apple_flow.daemon.store import Store
from support.daemon_fakes import FakeConnector
from support.daemon_harness import ANA, BOB, Harness, ask, wait_until


def test_a_chat_message_is_answered_and_recorded(harness: Callable[..., Harness]) -> None:
    h = harness().start()
    h.ingress.add(ANA, "hello there")
    assert h.finish() == 0
    assert h.egress.to(ANA) == ["echo: hello there"]
    record = h.store.messages.get_message("imessage", 1)
    assert record is not None and record.state == "sent" and record.reply == "echo: hello there"
    assert h.store.cursors.get_cursor("imessage") == 1
    assert h.connector.calls[0].request.read_only is False
    assert h.connector.shut_down


def test_a_daemon_starts_its_threads_in_run_not_when_it_is_made(harness: Callable[..., Harness]) -> None:
    # Thread objects, not idents: a thread of an earlier test that ends meanwhile frees its ident for a new one.
    before = set(threading.enumerate())
    h = harness(max_concurrent_ai_calls=3)
    assert not set(threading.enumerate()) - before  # made: nothing runs yet
    h.start()
    names = sorted(t.name for t in threading.enumerate() if t not in before and t.name != h._thread.name)
    assert names == ["ingress", "owner-link", "turn-0", "turn-1", "turn-2", "watchdog"]
    assert h.finish() == 0


def test_an_unknown_sender_gets_nothing_and_is_logged(harness: Callable[..., Harness]) -> None:
    h = harness().start()
    h.ingress.add("+15550000000", "let me in")
    h.finish()
    assert h.egress.sent == [] and h.connector.calls == []
    record = h.store.messages.get_message("imessage", 1)
    assert record is not None and (record.state, record.note) == ("ignored", "unknown sender")
    assert [e.sender for e in h.store.events.recent_events(kind="ignored")] == ["+15550000000"]


def test_unknown_senders_are_answered_only_when_configured(harness: Callable[..., Harness]) -> None:
    h = harness(reply_to_unknown_senders=True).start()
    h.ingress.add("+15550000000", "let me in")
    h.finish()
    assert h.egress.to("+15550000000") == ["Sorry, this Mac does not take requests from you. Ask its owner to add you."]
    assert h.connector.calls == []


def test_messages_sent_by_this_mac_are_skipped(harness: Callable[..., Harness]) -> None:
    h = harness().start()
    h.ingress.add(ANA, "echo: hello", is_from_me=True)
    h.finish()
    assert h.egress.sent == []


def test_a_fresh_install_answers_only_recent_messages_from_before_its_start(
    harness: Callable[..., Harness],
) -> None:
    from datetime import UTC, datetime, timedelta

    h = harness(startup_catchup_window_seconds=60, max_startup_replay_rows=2)
    h.ingress.add(ANA, "too far back", date=datetime.now(UTC) - timedelta(seconds=5))
    h.ingress.add(ANA, "last week", date=datetime.now(UTC) - timedelta(days=7))
    h.ingress.add(ANA, "just before the start", date=datetime.now(UTC) - timedelta(seconds=10))
    h.start()
    h.ingress.add(ANA, "new")
    h.finish()
    assert h.ingress.read_from == 1  # the newest two rows are looked at, no more
    assert h.egress.to(ANA) == ["echo: just before the start", "echo: new"]
    record = h.store.messages.get_message("imessage", 2)
    assert record is not None and record.state == "ignored" and "before the daemon" in (record.note or "")


def test_a_first_start_cut_short_still_skips_the_old_history_at_the_restart(
    daemon_settings: Callable[..., Settings],
) -> None:
    from datetime import UTC, datetime, timedelta

    settings = daemon_settings(startup_catchup_window_seconds=60, max_startup_replay_rows=50)
    first = Harness(settings)
    first.ingress.add(ANA, "last week", date=datetime.now(UTC) - timedelta(days=7))

    def broken(after_rowid: int, stop: threading.Event) -> Iterator[Any]:
        raise RuntimeError("chat.db went away")
        yield  # a generator, as a real ingress is

    first.ingress.messages = broken  # type: ignore[method-assign]
    first.start()
    assert first.finish() == 1  # stopped before it handled the old row
    second = Harness(settings)
    second.ingress.add(ANA, "last week", date=datetime.now(UTC) - timedelta(days=7))
    second.ingress.add(ANA, "new")
    second.start()
    second.finish()
    assert second.egress.to(ANA) == ["echo: new"]


def test_a_restart_answers_everything_since_the_cursor_however_old(harness: Callable[..., Harness]) -> None:
    from datetime import UTC, datetime, timedelta

    h = harness()
    h.store.cursors.set_cursor("imessage", 0)
    h.ingress.add(ANA, "sent while the daemon was down", date=datetime.now(UTC) - timedelta(days=2))
    h.start()
    h.finish()
    assert h.egress.to(ANA) == ["echo: sent while the daemon was down"]


def test_a_channel_bug_while_sending_is_recorded_and_the_daemon_goes_on(harness: Callable[..., Harness]) -> None:
    h = harness().start()
    h.egress.crash_for.add(ANA)
    h.ingress.add(ANA, "hi")
    h.ingress.add(ANA, "status")
    h.ingress.add(BOB, "hello")
    h.finish()
    assert h.egress.to(BOB) == ["echo: hello"]
    assert [h.store.messages.get_message("imessage", i).state for i in (1, 2)] == ["send_failed"] * 2  # type: ignore[union-attr]
    assert h.store.cursors.get_cursor("imessage") == 3


def test_a_store_failure_while_handling_a_message_stops_the_daemon_with_status_1(
    harness: Callable[..., Harness],
) -> None:
    h = harness()

    def full_disk(channel: str, rowid: int, sender: str, text: str, marks: CopyMarks | None = None) -> None:
        import sqlite3

        raise sqlite3.OperationalError("database or disk is full")

    h.store.messages.take_message = full_disk  # type: ignore[method-assign]
    h.start()
    h.ingress.add(ANA, "status")  # answered at once: recorded while the message is handled (a turn's, as it starts)
    h._thread.join(10)
    assert h.status == 1
    assert "database or disk is full" in h.store.events.recent_events(kind="dispatch_error")[0].detail
    assert h.store.cursors.get_cursor("imessage") == 0  # redone after the restart


def test_fast_commands_answer_while_a_long_turn_runs(harness: Callable[..., Harness]) -> None:
    h = harness().start()
    h.ingress.add(ANA, "SLOW: refactor everything")
    wait_until(lambda: h.connector.running == 1)
    h.ingress.add(ANA, "status")
    status = wait_until(lambda: h.egress.to(ANA))
    assert status[0].startswith("Running for") and "refactor everything" in status[0]
    h.ingress.add(ANA, "help")
    wait_until(lambda: len(h.egress.to(ANA)) == 2)
    assert h.store.cursors.get_cursor("imessage") == 0  # the running turn holds the cursor back
    h.connector.release.set()
    h.finish()
    assert h.egress.to(ANA)[2] == "echo: SLOW: refactor everything"
    assert h.store.cursors.get_cursor("imessage") == 3


def test_one_turn_at_a_time_per_sender_in_order(harness: Callable[..., Harness]) -> None:
    h = harness(max_concurrent_ai_calls=4).start()
    for i in range(5):
        h.ingress.add(ANA, f"m{i}")
    h.finish()
    assert h.egress.to(ANA) == [f"echo: m{i}" for i in range(5)]
    calls = h.connector.calls
    for before, after in itertools.pairwise(calls):
        assert before.finished <= after.started


def test_turns_of_different_senders_run_side_by_side_within_the_bound(harness: Callable[..., Harness]) -> None:
    senders = [f"+1555000000{i}" for i in range(4)]
    h = harness(max_concurrent_ai_calls=2, allowed_senders=senders).start()
    for sender in senders:
        h.ingress.add(sender, "SLOW")
    wait_until(lambda: h.connector.running == 2)
    ask(h, senders[0], "status")  # a later message answered: every turn before it was queued long since
    assert h.connector.running == 2  # the pool is the bound
    h.connector.release.set()
    h.finish()
    assert h.connector.max_running == 2
    assert all(h.egress.to(s)[-1:] == ["echo: SLOW"] for s in senders)


def test_progress_is_throttled_to_one_message_per_interval(harness: Callable[..., Harness]) -> None:
    connector = FakeConnector(progress=("readFile a.py", "editFile a.py", "runCommand pytest"))
    h = harness(connector, progress_interval_seconds=3600).start()
    h.ingress.add(ANA, "fix it")
    h.finish()
    assert h.egress.progress == []  # a quick turn sends no progress
    connector2 = FakeConnector(progress=("readFile a.py", "editFile a.py"))
    h2 = harness(connector2, progress_interval_seconds=0, db_path=h.settings.db_path.with_name("two.db")).start()
    h2.ingress.add(ANA, "fix it")
    h2.finish()
    # Lines that come within one flush of the run log go as one text (how many texts is a matter of timing).
    lines = [line for who, text in h2.egress.progress if who == ANA for line in text.split("\n")]
    assert lines == ["… readFile a.py", "… editFile a.py"]


def test_a_chat_turn_writes_the_store_three_times(harness: Callable[..., Harness]) -> None:
    # Before: ten transactions (the message taken, the run begun, each progress line and reply part noted as sent,
    # the run's events, the reply recorded, marked sent, the cursor moved).
    h = harness(FakeConnector(progress=("readFile a.py", "editFile a.py"), context_window=5)).start()
    written: list[set[str]] = []  # the tables each transaction wrote

    def statement(sql: str) -> None:
        if sql.startswith("BEGIN"):
            written.append(set())
        elif written and (match := re.match(r"(?:INSERT(?: OR \w+)? INTO|UPDATE|DELETE FROM) (\w+)", sql)):
            written[-1].add(match[1])

    h.store.db.trace(statement)
    h.ingress.add(ANA, "fix it")
    wait_until(lambda: h.store.cursors.get_cursor("imessage") == 1)
    h.store.db.trace(None)
    h.finish()
    assert written == [{"messages", "runs"}, {"run_events", "messages", "runs", "history"}, {"messages", "cursor"}]
    assert h.egress.to(ANA) == ["echo: fix it"]
    assert h.store.messages.get_message("imessage", 1).state == "sent"  # type: ignore[union-attr]


def test_cancel_stops_the_running_turn_and_the_sender_hears_once(harness: Callable[..., Harness]) -> None:
    h = harness().start()
    h.ingress.add(ANA, "SLOW forever")
    wait_until(lambda: h.connector.running == 1)
    h.ingress.add(ANA, "cancel")
    h.finish()
    assert h.egress.to(ANA) == ["Stopped your running request."]
    assert h.connector.cancelled == [ANA]
    run = h.store.runs.of_sender(ANA)[0]
    assert run.state == "cancelled"
    record = h.store.messages.get_message("imessage", 1)
    assert record is not None and record.state == "sent" and record.note == "cancelled"


def test_cancel_with_nothing_running_says_so(harness: Callable[..., Harness]) -> None:
    h = harness().start()
    h.ingress.add(ANA, "cancel")
    h.finish()
    assert h.egress.to(ANA) == ["Nothing of yours is running or queued."]


def test_a_turn_past_the_timeout_is_killed_and_the_sender_told(harness: Callable[..., Harness]) -> None:
    h = harness(turn_timeout_seconds=0.3).start()
    h.ingress.add(ANA, "SLOW hang")
    h.finish()
    assert h.connector.cancelled == [ANA]
    [reply] = h.egress.to(ANA)
    assert "took too long and was stopped after 0.3 s" in reply
    run = h.store.runs.of_sender(ANA)[0]
    assert run.state == "failed" and run.result == reply


@pytest.mark.parametrize(
    ("outcome", "expected"),
    [
        (
            TurnOutcome(Status.TIMED_OUT, detail="Request timed out after 120s. The agent was stopped.",
                        limit_seconds=120),
            "took too long and was stopped after 120 s",
        ),
        (
            TurnOutcome(Status.BINARY_MISSING,
                        detail="AFM CLI not found at 'apple-code'. Check apple_flow_afm_command setting."),
            "cannot start",
        ),
        (
            TurnOutcome(Status.NO_MODEL, detail="Apple Intelligence is off. Turn on Apple Intelligence (macOS 26), "
                        "or set APPLE_FLOW_AFM_BACKEND=openai", agent="apple-code", exit_code=3),
            "no model is available: Apple Intelligence is off. Turn on Apple Intelligence",
        ),
        (
            TurnOutcome(Status.FAILED, detail="apple-code execution failed (exit code 1). error_max_turns"),
            "the agent failed: apple-code",
        ),
        (TurnOutcome(Status.EMPTY), "without an answer"),
        (
            TurnOutcome(Status.CANCELLED, detail="apple-code was interrupted (exit code 130)."),
            "stopped before it finished: apple-code was interrupted",
        ),
    ],
)
def test_failures_get_short_honest_replies(
    harness: Callable[..., Harness], outcome: TurnOutcome, expected: str
) -> None:
    h = harness(FakeConnector(answer=lambda prompt, request: outcome)).start()
    h.ingress.add(ANA, "hi")
    h.finish()
    [reply] = h.egress.to(ANA)
    assert expected in reply and "Traceback" not in reply and len(reply) < 400
    run = h.store.runs.of_sender(ANA)[0]
    assert run.state == "failed" and run.result == outcome.as_text()


def test_an_answer_that_starts_with_error_is_an_answer(harness: Callable[..., Harness]) -> None:
    # What the agent says is its answer, whatever its first word; only the outcome's status says it failed.
    text = "Error: handling in parse() swallows the exception; re-raise it after logging."
    h = harness(FakeConnector(answer=lambda prompt, request: text)).start()
    h.ingress.add(ANA, "why does parse() hide errors?")
    h.finish()
    assert h.egress.to(ANA) == [text]
    assert h.store.runs.of_sender(ANA)[0].state == "done"


def test_a_connector_exception_becomes_a_reply_not_a_crash(harness: Callable[..., Harness]) -> None:
    def explode(prompt: str, options: Any) -> str:
        raise ValueError("bad json from the agent")

    h = harness(FakeConnector(answer=explode)).start()
    h.ingress.add(ANA, "hi")
    h.ingress.add(ANA, "again")
    h.finish()
    replies = h.egress.to(ANA)
    assert len(replies) == 2 and all("ValueError: bad json from the agent" in r for r in replies)


def test_a_failed_send_is_recorded_and_does_not_block_the_cursor(harness: Callable[..., Harness]) -> None:
    h = harness().start()
    h.egress.fail_for.add(ANA)
    h.ingress.add(ANA, "hi")
    h.ingress.add(BOB, "hello")
    h.finish()
    assert h.egress.to(BOB) == ["echo: hello"]
    record = h.store.messages.get_message("imessage", 1)
    assert record is not None and record.state == "send_failed" and "refused" in (record.note or "")
    assert h.store.cursors.get_cursor("imessage") == 2


def test_rate_limited_messages_are_skipped_after_one_notice(harness: Callable[..., Harness]) -> None:
    h = harness(max_messages_per_minute=2).start()
    for i in range(5):
        h.ingress.add(ANA, f"m{i}")
    h.finish()
    replies = h.egress.to(ANA)
    assert [r for r in replies if r.startswith("echo")] == ["echo: m0", "echo: m1"]
    assert sum("too fast" in r for r in replies) == 1
    assert len(replies) == 3
    assert [h.store.messages.get_message("imessage", i).note for i in (4, 5)] == ["rate limited", "rate limited"]  # type: ignore[union-attr]


def test_sigterm_style_stop_kills_turns_past_the_grace_and_leaves_them_for_the_restart(
    harness: Callable[..., Harness], daemon_settings: Callable[..., Settings]
) -> None:
    h = harness(shutdown_grace_seconds=0.2).start()
    h.ingress.add(ANA, "SLOW one")
    h.ingress.add(ANA, "queued two")
    wait_until(lambda: h.connector.running == 1)
    began = time.monotonic()
    h.stop()
    assert time.monotonic() - began < 3
    assert h.connector.cancelled == [None]  # every running turn killed
    assert h.egress.sent == []
    first = h.store.messages.get_message("imessage", 1)
    assert first is not None and first.state == "taken"
    h.store.close()

    # The restart redoes both, in order, and answers each once.
    again = Harness(h.settings)
    again.start()
    again.ingress.add(ANA, "SLOW one", rowid=1)
    again.ingress.add(ANA, "queued two", rowid=2)
    again.connector.release.set()
    again.finish()
    assert again.ingress.read_from == 0
    assert again.egress.to(ANA) == ["echo: SLOW one", "echo: queued two"]
    assert again.store.runs.of_sender(ANA, 5)[-1].state == "interrupted"


def test_a_restart_sends_a_recorded_reply_and_skips_finished_messages(daemon_settings: Callable[..., Settings]) -> None:
    settings = daemon_settings()
    store = Store(settings.db_path)
    store.cursors.set_cursor("imessage", 0)
    store.messages.take_message("imessage", 1, ANA, "done before")
    store.messages.record_message_reply("imessage", 1, "old answer")
    store.messages.mark_message_sent("imessage", 1)
    store.messages.take_message("imessage", 2, ANA, "answered, not sent")
    store.messages.record_message_reply("imessage", 2, "recorded answer")
    store.messages.take_message("imessage", 3, ANA, "taken, not answered")
    store.close()
    h = Harness(settings).start()
    for rowid, text in [(1, "done before"), (2, "answered, not sent"), (3, "taken, not answered")]:
        h.ingress.add(ANA, text, rowid=rowid)
    h.finish()
    assert h.egress.to(ANA) == ["recorded answer", "echo: taken, not answered"]
    assert h.connector.prompts() == ["taken, not answered"]
    assert h.store.cursors.get_cursor("imessage") == 3


def test_the_ingress_failing_stops_the_daemon_with_status_1(harness: Callable[..., Harness]) -> None:
    h = harness()

    def broken(after_rowid: int, stop: threading.Event) -> Iterator[Any]:
        raise PermissionError("authorization denied: grant Full Disk Access")
        yield

    h.ingress.messages = broken  # type: ignore[method-assign]
    h.start()
    h._thread.join(5)
    assert h.status == 1
    assert "Full Disk Access" in h.store.events.recent_events(kind="ingress_error")[0].detail


def test_health_reports_an_unready_connector(harness: Callable[..., Harness]) -> None:
    connector = FakeConnector()
    connector.fail_start = "apple-code not found: run scripts/setup.sh"
    h = harness(connector).start()
    h.ingress.add(ANA, "health")
    h.finish()
    [reply] = h.egress.to(ANA)
    assert "not ready: apple-code not found: run scripts/setup.sh" in reply


def test_clear_context_clears_the_stored_history_the_next_turn_starts_afresh(
    harness: Callable[..., Harness],
) -> None:
    h = harness(FakeConnector(context_window=3))
    h.store.history.append_exchange(ANA, Exchange("q", "a"))
    h.start()
    h.ingress.add(ANA, "new chat")
    h.ingress.add(ANA, "hello again")
    h.finish()
    assert h.store.history.recent_exchanges(ANA, 5) == [Exchange("hello again", "echo: hello again")]
    assert h.connector.calls[0].request.exchanges == ()  # the turn after the clear sees no earlier exchange
    assert h.egress.to(ANA)[0] == "Context cleared: the next message starts a new conversation."


def test_the_daemon_keeps_each_senders_exchanges_and_hands_the_connector_its_window(
    harness: Callable[..., Harness],
) -> None:
    h = harness(FakeConnector(context_window=2)).start()
    for text in ("one", "two", "three"):
        h.ingress.add(ANA, f"ana {text}")
    h.ingress.add(BOB, "bob one")
    h.finish()
    ana = [c.request for c in h.connector.calls if c.request.sender == ANA]
    assert [e.user for e in ana[2].exchanges] == ["ana one", "ana two"]  # the newest two, oldest first
    assert ana[2].exchanges[-1] == Exchange("ana two", "echo: ana two")
    bob = next(c.request for c in h.connector.calls if c.request.sender == BOB)
    assert bob.exchanges == ()  # another sender's conversation is not his


def test_failed_turns_leave_no_exchange_and_a_connector_without_a_window_gets_none(
    harness: Callable[..., Harness],
) -> None:
    failing = FakeConnector(answer=lambda p, r: TurnOutcome(Status.FAILED, detail="x"), context_window=2)
    h = harness(failing).start()
    h.ingress.add(ANA, "hi")
    h.finish()
    assert h.store.history.recent_exchanges(ANA, 5) == []
    h2 = harness(FakeConnector(), db_path=h.settings.db_path.with_name("two.db")).start()
    h2.ingress.add(ANA, "hi")
    h2.finish()
    assert h2.store.history.recent_exchanges(ANA, 5) == []


def test_rows_the_ingress_skips_move_the_cursor_once_earlier_messages_are_done(
    harness: Callable[..., Harness],
) -> None:
    h = harness().start()
    h.ingress.add(ANA, "SLOW", rowid=1)
    wait_until(lambda: h.connector.running == 1)
    h.ingress.skip(2, "echo")
    ask(h, ANA, "status", rowid=3)  # answered: the row before it, skipped, was read
    assert h.store.cursors.get_cursor("imessage") == 0  # message 1 still runs
    h.connector.release.set()
    h.finish()
    assert h.store.cursors.get_cursor("imessage") == 3  # the skipped row is passed with it


def test_a_skipped_row_alone_moves_the_cursor(harness: Callable[..., Harness]) -> None:
    h = harness().start()
    h.ingress.skip(1, "reaction")
    h.finish()
    assert h.store.cursors.get_cursor("imessage") == 1
    assert h.egress.sent == [] and h.connector.calls == []


def test_an_unreadable_source_at_first_start_is_a_start_error(harness: Callable[..., Harness]) -> None:
    from apple_flow.daemon.running.runtime import StartError

    h = harness()

    def unreadable() -> int:
        raise PermissionError("chat.db: authorization denied; grant Full Disk Access to python3")

    h.ingress.latest_rowid = unreadable  # type: ignore[method-assign]
    with pytest.raises(StartError, match="Full Disk Access"):
        h.daemon.run()


@pytest.mark.parametrize("text", ["task:", "idea:   ", "plan:"])
def test_a_prefix_without_text_gets_an_example_and_runs_nothing(harness: Callable[..., Harness], text: str) -> None:
    h = harness().start()
    h.ingress.add(ANA, text)
    h.finish()
    [reply] = h.egress.to(ANA)
    assert "needs some text, e.g." in reply
    assert h.connector.calls == []


def test_the_connectors_history_is_written_with_the_reply_not_before(
    daemon_settings: Callable[..., Settings], tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A crash between the agent's answer and the recorded reply redoes the turn; its first run must leave no
    # exchange in the history. Stand-in for the crash: recording the first reply fails.
    import sqlite3

    from apple_flow.assemble import TurnConnectors, assemble
    from apple_flow.channels.base import Channel
    from apple_flow.connectors.afm import AfmConnector
    from support.daemon_fakes import ListIngress, RecordingEgress
    from support.install import FAKE_APPLE_CODE, install_script

    settings = daemon_settings(afm_command=str(install_script(FAKE_APPLE_CODE, tmp_path / "apple-code")))
    store = Store(settings.db_path)
    record_reply = store.messages.record_message_reply
    attempts = itertools.count()

    def fails_once(*args: Any) -> None:
        if next(attempts) == 0:
            raise sqlite3.OperationalError("disk I/O error")
        record_reply(*args)

    monkeypatch.setattr(store.messages, "record_message_reply", fails_once)
    ingress, egress = ListIngress(), RecordingEgress()
    daemon = assemble(settings, store, Channel("imessage", ingress, egress), TurnConnectors(AfmConnector(settings)))
    ingress.add(ANA, "first")
    ingress.add(ANA, "second")
    ingress.close()
    runner = threading.Thread(target=daemon.run)
    runner.start()
    runner.join(30)
    assert not runner.is_alive()
    assert [exchange.user for exchange in store.history.recent_exchanges(ANA, 10)] == ["second"]
    assert egress.to(ANA) == ["fake answer"]


def test_only_the_commands_that_show_what_runs_have_it_looked_up(harness: Callable[..., Harness]) -> None:
    # In a burst a sender's queue is long: the view of it is built for the commands that show it, not per message.
    orchestrator = harness().daemon.orchestrator
    texts = ("status", "health", "cancel", "escalate", "run 2", "hi", "task: add a test", "approve req_1", "help")
    wanted = [orchestrator.needs_view(InboundMessage(1, ANA, text, datetime.now(UTC)), parse(text)) for text in texts]
    assert wanted == [True] * 5 + [False] * 4
