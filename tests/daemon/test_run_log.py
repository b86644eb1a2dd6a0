"""The run log: a run's agent events kept in the store, each event and each run bounded, old runs forgotten, written
in batches (a transaction for many events, none waiting long)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from apple_flow.connectors.stream_events import parse_event
from apple_flow.daemon import run_log
from apple_flow.daemon.run_log import EVENT_MAX_BYTES, RunLog, bounded_json
from apple_flow.daemon.store import Store
from support.old_database import old_database
from support.waiting import wait_for


def test_events_are_kept_in_order_without_text_deltas(store: Store) -> None:
    store.runs.start("run_a", "+15551234567", "chat", "/ws", "fix it", message="imessage:7")
    record = RunLog(store, "run_a")
    record(parse_event({"type": "start", "backend": "openai", "model": "m"}))
    record(parse_event({"type": "tool_call", "id": "c1", "name": "readFile", "arguments": {"path": "a.py"}}))
    record(parse_event({"type": "text", "delta": "partial"}))
    record(parse_event({"type": "tool_result", "id": "c1", "name": "readFile", "ok": True, "output": "1\tx"}))
    record(parse_event({"type": "result", "subtype": "success", "result": "done"}))
    events = store.run_events.of_run("run_a")
    assert [e.type for e in events] == ["start", "tool_call", "tool_result", "result"]
    assert [e.seq for e in events] == [1, 2, 3, 4]
    assert json.loads(events[1].body)["arguments"] == {"path": "a.py"}
    run = store.runs.get("run_a")
    assert run is not None and run.message == "imessage:7" and run.events_dropped == 0


def test_a_run_past_its_budget_drops_events_but_keeps_its_result(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(run_log, "RUN_MAX_BYTES", 3 * EVENT_MAX_BYTES)
    store.runs.start("run_b", "+15551234567", "chat", "/ws", "read everything")
    record = RunLog(store, "run_b")
    for index in range(10):
        record(parse_event({"type": "tool_result", "id": f"c{index}", "output": "x" * 6000}))
    record(parse_event({"type": "result", "subtype": "success", "result": "y" * 6000}))
    types = [e.type for e in store.run_events.of_run("run_b")]
    assert types[-1] == "result"
    assert 2 <= types.count("tool_result") < 10
    run = store.runs.get("run_b")
    assert run is not None and run.events_dropped == 10 - types.count("tool_result")
    assert sum(len(e.body) for e in store.run_events.of_run("run_b")) <= 3 * EVENT_MAX_BYTES


def test_only_the_newest_runs_keep_their_events(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(run_log, "KEEP_RUNS", 2)
    clock = iter(range(100))
    store.db._clock = lambda: float(next(clock))
    for name in ("r1", "r2", "r3"):
        store.runs.start(name, "+15551234567", "chat", "/ws", name)
        with RunLog(store, name) as record:
            record(parse_event({"type": "notice", "message": name}))
    assert store.run_events.of_run("r1") == []
    assert [len(store.run_events.of_run(name)) for name in ("r2", "r3")] == [1, 1]
    assert [r.id for r in store.runs.recent()] == ["r3", "r2", "r1"]  # the runs themselves stay


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
    store.runs.start("run_c", "+15551234567", "chat", "/ws", "x")
    store.close()
    with RunLog(store, "run_c") as record:
        record(parse_event({"type": "notice", "message": "still fine"}))  # logged, not raised


def test_the_migration_keeps_existing_runs(tmp_path: Path) -> None:
    path = old_database(
        tmp_path / "relay.db", 3,
        "INSERT INTO runs (id, sender, kind, workspace, request, state, started_at) "
        "VALUES ('old', 's', 'chat', '/ws', 'hi', 'done', 1)",
    )
    run = Store(path).runs.get("old")
    assert run is not None and run.message is None and run.events_dropped == 0 and run.request == "hi"


def test_events_that_come_together_are_written_in_one_transaction(store: Store) -> None:
    # Before: one transaction per event (and a query of the run's size before each).
    store.runs.start("run_d", "+15551234567", "chat", "/ws", "read a lot")
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


def test_an_event_waits_at_most_the_flush_time_and_the_result_not_at_all(store: Store) -> None:
    store.runs.start("run_e", "+15551234567", "chat", "/ws", "x")
    record = RunLog(store, "run_e", flush_seconds=0.1)
    record(parse_event({"type": "tool_call", "id": "c1", "name": "runCommand", "arguments": {"command": "make test"}}))
    # Shown while the command runs: no later event needed.
    wait_for(lambda: store.run_events.of_run("run_e"), 5, "the event to be written")
    record(parse_event({"type": "result", "subtype": "success", "result": "done"}))
    assert [e.type for e in store.run_events.of_run("run_e")] == ["tool_call", "result"]
    record.close()
