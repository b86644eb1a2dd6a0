"""The run log: a run's agent events kept in the store, each event and each run bounded, old runs forgotten, written
in batches (a transaction for many events, none waiting long, the last ones with the run's end); the progress lines
of the turn go out with its batches, noted in the record of sent texts in the batch's transaction."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from apple_flow.channels.base import Handover, Noted
from apple_flow.config import Settings
from apple_flow.connectors.base import AgentEvent, Status, TurnOutcome
from apple_flow.connectors.events import parse_event
from apple_flow.daemon.running import turn_runner
from apple_flow.daemon.running.sending import ReplySender
from apple_flow.daemon.running.turn_runner import EVENT_MAX_BYTES, RunLog, bounded_json
from apple_flow.daemon.store import FinishedTurn, Store
from support.daemon_fakes import RecordingEgress
from support.old_database import old_database
from support.turns import Script, ScriptedTurn
from support.waiting import wait_for


def test_events_are_kept_in_order_without_text_deltas(store: Store) -> None:
    store.runs.start_run("run_a", "+15551234567", "chat", "/ws", "fix it", message="imessage:7")
    record = RunLog(store, "run_a")
    record(parse_event({"type": "start", "backend": "openai", "model": "m"}))
    record(parse_event({"type": "tool_call", "id": "c1", "name": "readFile", "arguments": {"path": "a.py"}}))
    record(parse_event({"type": "text", "delta": "partial"}))
    record(parse_event({"type": "tool_result", "id": "c1", "name": "readFile", "ok": True, "output": "1\tx"}))
    record(parse_event({"type": "result", "subtype": "success", "result": "done"}))
    record.close()
    events = store.run_events.of_run("run_a")
    assert [e.type for e in events] == ["start", "tool_call", "tool_result", "result"]
    assert [e.seq for e in events] == [1, 2, 3, 4]
    assert json.loads(events[1].body)["arguments"] == {"path": "a.py"}
    run = store.runs.get_run("run_a")
    assert run is not None and run.message == "imessage:7" and run.events_dropped == 0


def test_a_run_past_its_budget_drops_events_but_keeps_its_result(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(turn_runner, "RUN_MAX_BYTES", 3 * EVENT_MAX_BYTES)
    store.runs.start_run("run_b", "+15551234567", "chat", "/ws", "read everything")
    record = RunLog(store, "run_b")
    for index in range(10):
        record(parse_event({"type": "tool_result", "id": f"c{index}", "output": "x" * 6000}))
    record(parse_event({"type": "result", "subtype": "success", "result": "y" * 6000}))
    record.close()
    types = [e.type for e in store.run_events.of_run("run_b")]
    assert types[-1] == "result"
    assert 2 <= types.count("tool_result") < 10
    run = store.runs.get_run("run_b")
    assert run is not None and run.events_dropped == 10 - types.count("tool_result")
    assert sum(len(e.body) for e in store.run_events.of_run("run_b")) <= 3 * EVENT_MAX_BYTES


def test_only_the_newest_runs_keep_their_events(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(turn_runner, "KEEP_RUNS", 2)
    clock = iter(range(100))
    store.db._clock = lambda: float(next(clock))
    for name in ("r1", "r2", "r3"):
        store.runs.start_run(name, "+15551234567", "chat", "/ws", name)
        with RunLog(store, name) as record:
            record(parse_event({"type": "notice", "message": name}))
    assert store.run_events.of_run("r1") == []
    assert [len(store.run_events.of_run(name)) for name in ("r2", "r3")] == [1, 1]
    assert [r.id for r in store.runs.recent_runs()] == ["r3", "r2", "r1"]  # the runs themselves stay


def test_a_huge_event_is_cut_and_says_so() -> None:
    event = {"type": "tool_call", "name": "writeFile", "arguments": {"path": "big.txt", "content": "é" * 50_000}}
    body = bounded_json(event)
    assert len(body.encode()) <= EVENT_MAX_BYTES
    kept = json.loads(body)
    assert kept["arguments"]["path"] == "big.txt"
    assert kept["arguments"]["content"].endswith("characters]") and "[... cut: " in kept["arguments"]["content"]
    many = {"type": "tool_call", "arguments": {str(i): i for i in range(5000)}}
    assert json.loads(bounded_json(many)) == {"type": "tool_call", "cut": f"an event of {len(json.dumps(many))} bytes"}


def test_a_store_that_cannot_be_written_does_not_stop_the_run(store: Store, tmp_path: Path) -> None:
    store.runs.start_run("run_c", "+15551234567", "chat", "/ws", "x")
    store.close()
    with RunLog(store, "run_c") as record:
        record(parse_event({"type": "notice", "message": "still fine"}))  # logged, not raised


def test_the_migration_keeps_existing_runs(tmp_path: Path) -> None:
    path = old_database(
        tmp_path / "relay.db", 3,
        "INSERT INTO runs (id, sender, kind, workspace, request, state, started_at) "
        "VALUES ('old', 's', 'chat', '/ws', 'hi', 'done', 1)",
    )
    run = Store(path).runs.get_run("old")
    assert run is not None and run.message is None and run.events_dropped == 0 and run.request == "hi"


def test_events_that_come_together_are_written_in_one_transaction(store: Store) -> None:
    # Before: one transaction per event (and a query of the run's size before each).
    store.runs.start_run("run_d", "+15551234567", "chat", "/ws", "read a lot")
    statements: list[str] = []
    store.db.trace(statements.append)
    with RunLog(store, "run_d") as record:
        for index in range(20):
            record(parse_event({"type": "tool_call", "id": f"c{index}", "name": "readFile",
                                "arguments": {"path": f"{index}.py"}}))
        assert store.run_events.of_run("run_d") == []  # waiting to be written together
    store.db.trace(None)
    assert sum(1 for sql in statements if sql.startswith("COMMIT")) == 1
    assert [e.seq for e in store.run_events.of_run("run_d")] == list(range(1, 21))


def test_an_event_waits_at_most_the_flush_time(store: Store) -> None:
    store.runs.start_run("run_e", "+15551234567", "chat", "/ws", "x")
    record = RunLog(store, "run_e", flush_seconds=0.1)
    record(parse_event({"type": "tool_call", "id": "c1", "name": "runCommand", "arguments": {"command": "make test"}}))
    # Shown while the command runs: no later event needed.
    wait_for(lambda: store.run_events.of_run("run_e"), 5, "the event to be written")
    record.close()


def test_the_last_events_are_written_with_the_runs_end(store: Store) -> None:
    # Before: the result event was written at once, in a transaction of its own before the one ending the run.
    store.runs.start_run("run_f", "+15551234567", "chat", "/ws", "x")
    statements: list[str] = []
    store.db.trace(statements.append)
    with RunLog(store, "run_f", flush_seconds=3600) as record:
        record(parse_event({"type": "tool_call", "id": "c1", "name": "readFile", "arguments": {"path": "a.py"}}))
        record(parse_event({"type": "result", "subtype": "success", "result": "done"}))
        assert store.run_events.of_run("run_f") == []
        with record.ending():
            store.runs.finish_run("run_f", FinishedTurn("done", "done", "done"))
    store.db.trace(None)
    assert sum(1 for sql in statements if sql.startswith("COMMIT")) == 1
    assert [e.type for e in store.run_events.of_run("run_f")] == ["tool_call", "result"]


class NotingEgress(RecordingEgress):
    """Notes texts in the store's record of sent texts, as a channel whose texts come back does; remembers how each
    text came noted."""

    def __init__(self, store: Store) -> None:
        super().__init__()
        self.record = store.sent.for_channel("imessage", 600)
        self.noted: list[Noted | None] = []

    def note(self, recipient: str, text: str) -> Noted:
        self.record.record(recipient, text)
        return Noted(recipient, text)

    def hand_over(self, recipient: str, text: str, progress: bool = False, noted: Noted | None = None) -> Handover:
        self.noted.append(noted)
        return super().hand_over(recipient, text, progress, noted)


def test_progress_lines_go_together_noted_in_the_transaction_of_the_events_before_them(
    store: Store, daemon_settings: Callable[..., Settings]
) -> None:
    # Before: each line was noted as sent in a transaction of its own, and sent alone.
    store.runs.start_run("run_g", "+15551234567", "chat", "/ws", "x")
    egress = NotingEgress(store)
    sender = ReplySender(egress, store, daemon_settings())
    statements: list[str] = []
    store.db.trace(statements.append)
    with RunLog(store, "run_g", flush_seconds=3600, sender=sender, recipient="+15551234567") as record:
        record(parse_event({"type": "tool_call", "id": "c1", "name": "readFile", "arguments": {"path": "a.py"}}),
               ("reading a.py",))
        record(parse_event({"type": "tool_call", "id": "c2", "name": "runCommand", "arguments": {"command": "ls"}}),
               ("running:  ls",))
        assert egress.progress == []  # waiting for the events before them to be written
        record.flush()
        assert egress.progress == [("+15551234567", "… reading a.py\n… running: ls")]
        assert egress.noted == [Noted("+15551234567", "… reading a.py\n… running: ls")]
    store.db.trace(None)
    assert sum(1 for sql in statements if sql.startswith("COMMIT")) == 1
    written = " ".join(statements)
    assert "INSERT INTO run_events" in written and "INSERT INTO sent" in written
    assert store.sent.take_sent("imessage", "+15551234567", "… reading a.py\n… running: ls", since=0.0)


def test_an_events_activity_goes_out_as_the_throttle_lets_it_and_a_text_delta_is_not_kept(
    store: Store, daemon_settings: Callable[..., Settings]
) -> None:
    store.runs.start_run("run_h", "+15551234567", "chat", "/ws", "x")
    egress = NotingEgress(store)
    sender = ReplySender(egress, store, daemon_settings())
    every = RunLog(store, "run_h", flush_seconds=3600, sender=sender, recipient="+15551234567")
    every(parse_event({"type": "text", "delta": "par"}), ("writing the answer (3 characters so far)",))
    every(parse_event({"type": "text", "delta": "tial"}), ())
    every.close()
    assert egress.progress == [("+15551234567", "… writing the answer (3 characters so far)")]
    assert store.run_events.of_run("run_h") == []  # the result event holds the answer
    quiet = RunLog(store, "run_h", flush_seconds=3600, sender=sender, recipient="+15551234567",
                   progress_seconds=3600)
    quiet(parse_event({"type": "tool_call", "id": "c1", "name": "readFile"}), ("reading a.py",))
    quiet.close()
    assert egress.progress == [("+15551234567", "… writing the answer (3 characters so far)")]  # too soon for more
    assert [event.type for event in store.run_events.of_run("run_h")] == ["tool_call"]


def test_the_throttle_sends_one_line_an_interval_the_first_after_one() -> None:
    now = [0.0]
    throttle = turn_runner.ProgressThrottle(10, clock=lambda: now[0])
    assert throttle.message("reading a.py") is None  # a quick turn sends none
    now[0] = 10.0
    assert throttle.message("reading   a.py\n") == "… reading a.py"
    now[0] = 15.0
    assert throttle.message("running: ls") is None
    now[0] = 20.0
    assert throttle.message("x" * 200) == "… " + "x" * 159 + "…"
    assert throttle.message("   ") is None


def test_following_a_turn_keeps_its_events_and_returns_its_outcome_stopping_a_turn_it_leaves(store: Store) -> None:
    store.runs.start_run("run_k", "+15551234567", "chat", "/ws", "x")
    closed: list[bool] = []

    def turn(fails: bool) -> Script:
        try:
            yield AgentEvent(parse_event({"type": "tool_call", "id": "c1", "name": "readFile"}), ("reading a.py",))
            if fails:
                raise RuntimeError("a connector bug")
            return TurnOutcome(Status.ANSWERED, text="done")
        finally:
            closed.append(True)  # the connector's turn stops (its child is killed) when it ends or is closed

    with RunLog(store, "run_k") as record:
        assert record.follow(ScriptedTurn(turn(fails=False))) == TurnOutcome(Status.ANSWERED, text="done")
        assert closed == [True]
    assert [e.type for e in store.run_events.of_run("run_k")] == ["tool_call"]
    stopped: list[bool] = []

    class Leaving(ScriptedTurn):
        def close(self) -> None:
            stopped.append(True)
            super().close()

    with RunLog(store, "run_k") as record, pytest.raises(RuntimeError, match="a connector bug"):
        record.follow(Leaving(turn(fails=True)))
    assert closed == [True, True] and stopped == [True]
