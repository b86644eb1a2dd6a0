"""`cancel` reaches the sender's queued turns: plain `cancel` (or `stop`) stops the running turn and drops the ones
waiting behind it, saying which; they are recorded as finished (never run, not after a restart either); another
sender's queue is untouched; `status` lists what is queued the same way. `cancel <run id>` stops only that run.
Real daemon and store, the in-process connector whose SLOW turns block until released."""

from __future__ import annotations

import re
from collections.abc import Callable

from apple_flow.config import Settings
from support.daemon_harness import ANA, BOB, Harness, ask, wait_until


def queue_behind_a_slow_turn(h: Harness, sender: str, *queued: str) -> None:
    """``sender``'s SLOW turn runs; ``queued`` wait behind it."""
    h.ingress.add(sender, f"SLOW turn of {sender}")
    wait_until(lambda: any(c.prompt == f"SLOW turn of {sender}" for c in h.connector.calls))
    for text in queued:
        h.ingress.add(sender, text)


def test_status_lists_the_queued_requests_in_order(harness: Callable[..., Harness]) -> None:
    h = harness().start()
    queue_behind_a_slow_turn(h, ANA, "fix the parser", "add a test for the lexer")
    reply = ask(h, ANA, "status")
    assert re.match(f"Running for [0-9.]+ s: SLOW turn of {re.escape(ANA)}\n", reply)
    assert '\nQueued: 2 — "fix the parser"; "add a test for the lexer"' in reply
    assert ask(h, ANA, "health").count("Yours: 2 queued.") == 1
    h.connector.release.set()
    h.finish()


def test_cancel_stops_the_running_turn_and_drops_the_queued_ones_for_good(harness: Callable[..., Harness]) -> None:
    h = harness().start()
    queue_behind_a_slow_turn(h, ANA, "fix the parser", "add a test for the lexer")
    reply = ask(h, ANA, "cancel")
    assert reply == (
        "Stopped your running request.\n"
        'Dropped your 2 queued requests, not run: "fix the parser"; "add a test for the lexer".'
    )
    assert ask(h, ANA, "status").startswith("Recent: ")  # nothing running, nothing queued any more
    h.connector.release.set()
    assert h.finish() == 0
    assert h.connector.prompts() == [f"SLOW turn of {ANA}"]  # the queued ones never ran
    assert len(h.egress.to(ANA)) == 2  # the answers to cancel and status; nothing from the stopped or dropped ones
    for rowid in (2, 3):
        record = h.store.messages.get_message("imessage", rowid)
        assert record is not None and (record.state, record.reply, record.note) == (
            "sent", None, "cancelled before it ran")
    assert h.store.cursors.get_cursor("imessage") == 5  # every message finished: the cursor passed them all
    assert [e.detail for e in h.store.events.recent_events(kind="dropped")] == [
        "not run (cancel): 'fix the parser'", "not run (cancel): 'add a test for the lexer'"]


def test_stop_with_only_queued_turns_drops_them_and_leaves_the_other_senders_queue(
    harness: Callable[..., Harness],
) -> None:
    """One worker: Bob's turn runs, Ana's wait for the worker (the first of them ready, not started)."""
    h = harness(max_concurrent_ai_calls=1).start()
    queue_behind_a_slow_turn(h, BOB, "bob's second")
    h.ingress.add(ANA, "ana's first")
    h.ingress.add(ANA, "ana's second")
    queued, check = ask(h, ANA, "status").split("\n")
    assert queued == 'Queued: 2 — "ana\'s first"; "ana\'s second"'
    assert check.startswith("No check found in")  # the check approved tasks must pass (none here)
    assert ask(h, ANA, "stop") == 'Dropped your 2 queued requests, not run: "ana\'s first"; "ana\'s second".'
    assert h.connector.cancelled == []  # Ana had nothing running: Bob's turn goes on
    h.connector.release.set()
    h.finish()
    assert h.connector.prompts() == [f"SLOW turn of {BOB}", "bob's second"]
    assert h.egress.to(BOB) == [f"echo: SLOW turn of {BOB}", "echo: bob's second"]


def test_cancel_with_one_queued_turn_names_it(harness: Callable[..., Harness]) -> None:
    h = harness().start()
    queue_behind_a_slow_turn(h, ANA, "write the docs " + "at length " * 20)
    reply = ask(h, ANA, "cancel")
    assert reply.startswith("Stopped your running request.\nDropped your queued request, not run: \"write the docs")
    assert reply.endswith('…".') and len(reply) < 140  # each request clipped
    h.finish()


def test_a_dropped_turn_does_not_run_after_a_restart(
    harness: Callable[..., Harness], daemon_settings: Callable[..., Settings]
) -> None:
    """Bob's turn, killed by the stop, keeps the cursor before all of Ana's messages: the restart reads them again,
    and only Bob's is run again; Ana's dropped turns and her cancel are finished (and not answered twice)."""
    h = harness(shutdown_grace_seconds=0.2).start()
    queue_behind_a_slow_turn(h, BOB)
    queue_behind_a_slow_turn(h, ANA, "fix the parser", "add a test")
    ask(h, ANA, "cancel")
    h.stop()
    assert h.connector.prompts() == [f"SLOW turn of {BOB}", f"SLOW turn of {ANA}"]
    assert h.store.cursors.get_cursor("imessage") == 0
    h.store.close()

    again = Harness(h.settings)
    again.start()
    for rowid, (sender, text) in enumerate(
        [(BOB, f"SLOW turn of {BOB}"), (ANA, f"SLOW turn of {ANA}"), (ANA, "fix the parser"), (ANA, "add a test"),
         (ANA, "cancel")], start=1,
    ):
        again.ingress.add(sender, text, rowid=rowid)
    again.connector.release.set()
    again.finish()
    assert again.connector.prompts() == [f"SLOW turn of {BOB}"]
    assert again.egress.to(ANA) == [] and again.egress.to(BOB) == [f"echo: SLOW turn of {BOB}"]
    assert again.store.cursors.get_cursor("imessage") == 5


def test_a_dropped_approved_task_is_pending_again(harness: Callable[..., Harness]) -> None:
    h = harness().start()
    plan = ask(h, ANA, "task: fix a.py")
    request = re.search(r"approve (req_[0-9a-f]{8})", plan).group(1)  # type: ignore[union-attr]
    queue_behind_a_slow_turn(h, ANA, f"approve {request}")
    wait_until(lambda: any(text.startswith(f"Approved {request}") for _, text in h.egress.progress))
    assert f'Queued: 1 — "fix a.py" ({request})' in ask(h, ANA, "status")
    assert ask(h, ANA, "cancel") == (
        "Stopped your running request.\n"
        f'Dropped your queued request, not run: "fix a.py" ({request}). '
        f"{request} is pending again (`approve {request}` runs it, `deny {request}` not)."
    )
    approval = h.store.approvals.get_approval(request)
    assert approval is not None and approval.state == "pending"
    assert ask(h, ANA, f"approve {request}").startswith("Done")  # it can still be run, once, when wanted
    h.finish()
    assert [c.prompt.startswith("Carry out this task") for c in h.connector.calls].count(True) == 1


def test_cancel_by_run_id_leaves_the_queued_turns_and_says_so(harness: Callable[..., Harness]) -> None:
    h = harness().start()
    queue_behind_a_slow_turn(h, ANA, "fix the parser")
    run_id = wait_until(lambda: h.store.runs.of_sender(ANA)[0].id if h.store.runs.of_sender(ANA) else None)
    assert ask(h, ANA, f"cancel {run_id}") == (
        f'Stopped {run_id}. Your queued request will still run (`cancel` alone drops it): "fix the parser".'
    )
    h.finish()
    assert h.egress.to(ANA)[-1] == "echo: fix the parser"


def test_help_says_cancel_drops_the_queued_requests(harness: Callable[..., Harness]) -> None:
    h = harness().start()
    text = ask(h, ANA, "help")
    assert "cancel [RUN] — stop your running request and drop your queued ones" in text
    h.finish()
