"""Where the page meets the daemon: a task approved on the page runs in the sender's queue and its answer is sent to
them; runs remember the message they answer; replies link to their run page when a base URL is set."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from apple_flow.config import Settings
from apple_flow.connectors.base import TurnRequest
from apple_flow.daemon.deciding.approvals import Approvals
from apple_flow.web.actions import WebDecisions
from support.daemon_fakes import FakeConnector
from support.daemon_harness import ANA, Harness, ask, wait_until


def planner(prompt: str, request: TurnRequest) -> str:
    if request.read_only:
        return "1. Edit a.py"
    return "Changed a.py.\nATTACH: a.py" if "send me a.py" in prompt else "Changed a.py."


@pytest.fixture
def page_harness(tmp_path: Path) -> Iterator[Callable[..., Harness]]:
    made: list[Harness] = []
    workspace = tmp_path / "ws"
    workspace.mkdir()

    def make(**overrides: Any) -> Harness:
        settings = Settings(  # type: ignore[call-arg]
            _env_file=None, db_path=tmp_path / "relay.db", default_workspace=workspace, allowed_senders=[ANA],
            progress_interval_seconds=0, **{"web_enabled": True, "shutdown_grace_seconds": 2, **overrides},
        )
        h = Harness(settings, FakeConnector(answer=planner)).start()
        made.append(h)
        return h

    yield make
    for h in made:
        h.daemon.request_stop()


def test_a_task_approved_on_the_page_runs_and_its_answer_goes_to_the_sender(
    page_harness: Callable[..., Harness]
) -> None:
    h = page_harness()
    h.ingress.add(ANA, "task: fix a.py")
    plan = wait_until(lambda: h.egress.to(ANA))[0]
    request = re.search(r"approve (req_[0-9a-f]{8})", plan).group(1)  # type: ignore[union-attr]
    decisions = WebDecisions(h.store, Approvals(h.store.approvals, 20), h.daemon.run_approved)
    approved, why = decisions.approve(request, "only a.py")
    assert approved is not None and why == ""
    done = wait_until(lambda: [t for t in h.egress.to(ANA) if t.startswith("Done")])
    assert done[0].startswith(f"Done ({request}, run_") and done[0].endswith("Changed a.py.")
    assert (ANA, f"Approved {request}: working on it in {h.settings.workspaces.default}.") in h.egress.progress
    execute = h.connector.calls[-1].request
    assert not execute.read_only and execute.plan
    assert "Notes from the user: only a.py" in execute.message
    runs = h.store.runs.recent_runs()
    assert [(r.kind, r.state, r.message) for r in runs] == [("approve", "done", None), ("task", "done", "imessage:1")]
    assert decisions.approve(request) == (None, f"{request} was already approved.")


def test_replies_link_to_their_run_when_a_base_url_is_set(page_harness: Callable[..., Harness]) -> None:
    h = page_harness(web_base_url="https://mac.example.ts.net/")
    h.ingress.add(ANA, "hello")
    reply = wait_until(lambda: h.egress.to(ANA))[0]
    run = h.store.runs.recent_runs()[0]
    assert reply == f"Changed a.py.\n\nhttps://mac.example.ts.net/runs/{run.id}"
    assert run.message == "imessage:1"
    h.ingress.add(ANA, "status")
    assert not wait_until(lambda: h.egress.to(ANA)[1:])[0].endswith(run.id)  # no run, no link


def test_no_link_without_a_base_url_or_with_the_page_off(page_harness: Callable[..., Harness]) -> None:
    h = page_harness(web_base_url="https://mac.example.ts.net", web_enabled=False)
    h.ingress.add(ANA, "hello")
    assert wait_until(lambda: h.egress.to(ANA)) == ["Changed a.py."]


def approve_on_the_page(h: Harness, notes: str = "") -> str:
    """Plans a task by text and approves it on the page; returns the request's id."""
    h.ingress.add(ANA, "task: fix a.py")
    plan = wait_until(lambda: h.egress.to(ANA))[0]
    request = re.search(r"approve (req_[0-9a-f]{8})", plan).group(1)  # type: ignore[union-attr]
    decisions = WebDecisions(h.store, Approvals(h.store.approvals, 20), h.daemon.run_approved)
    approved, why = decisions.approve(request, notes)
    assert approved is not None, why
    return request


def test_a_task_approved_on_the_page_is_redone_after_a_restart_cut_its_run_short(
    page_harness: Callable[..., Harness],
) -> None:
    """Like a task approved by text (its message is handled again), one approved on the page and not finished when
    the daemon stopped runs again at the next start, and its answer is sent once."""
    h = page_harness(shutdown_grace_seconds=0.2)
    request = approve_on_the_page(h, "SLOW, only a.py")  # the notes reach the run's prompt: it hangs
    wait_until(lambda: h.connector.running == 1 and not h.connector.calls[-1].request.read_only)
    h.stop()  # the run is killed and nothing recorded for it, as after a crash
    assert not [t for t in h.egress.to(ANA) if t.startswith("Done")]
    h.store.close()

    again = page_harness()
    again.connector.release.set()
    done = wait_until(lambda: [t for t in again.egress.to(ANA) if t.startswith("Done")], 20)
    assert done[0].startswith(f"Done ({request}, run_") and done[0].endswith("Changed a.py.")
    assert "Notes from the user: SLOW, only a.py" in again.connector.calls[0].request.message
    assert [r.state for r in again.store.runs.recent_runs()] == ["done", "interrupted", "done"]
    again.stop()
    again.store.close()

    third = page_harness()  # finished and sent: not run again
    later = (third.store.cursors.get_cursor("imessage") or 0) + 1  # a row after those the restart reads again
    status = ask(third, ANA, "status", later)  # answered: what a restart resumes came before it
    assert third.connector.calls == [] and third.egress.sent == [(ANA, status)]


def test_the_answer_of_a_page_approved_task_recorded_before_a_crash_is_sent_at_the_restart(
    page_harness: Callable[..., Harness], tmp_path: Path
) -> None:
    h = page_harness()
    request = approve_on_the_page(h)
    wait_until(lambda: [t for t in h.egress.to(ANA) if t.startswith("Done")])
    h.stop()
    # As if the daemon had died between recording the answer and sending it.
    h.store.web_runs.record_web_reply(request, "the recorded answer")
    h.store.close()

    again = page_harness()
    assert wait_until(lambda: again.egress.to(ANA)) == ["the recorded answer"]
    again.stop()
    again.store.close()
    third = page_harness()
    status = ask(third, ANA, "status", (third.store.cursors.get_cursor("imessage") or 0) + 1)
    assert third.connector.calls == [] and third.egress.sent == [(ANA, status)]


def page_approved_task_sent_with_its_file(page_harness: Callable[..., Harness]) -> tuple[Harness, str, str]:
    """A task approved on the page whose answer sends a.py; stopped once all went out. (request, answer)"""
    h = page_harness()
    (h.settings.workspaces.default / "a.py").write_text("print(1)\n")
    request = approve_on_the_page(h, "and send me a.py")
    wait_until(lambda: h.egress.files)
    [done] = [t for t in h.egress.to(ANA) if t.startswith("Done")]
    assert done.endswith("Changed a.py.\n\nSending: a.py (9 bytes).")
    h.stop()
    return h, request, done


def crash_state(h: Harness, sql: str) -> None:
    """Puts back what a crash at that point leaves: the daemon records all of it, and marks it done as it goes."""
    with sqlite3.connect(h.settings.db_path) as db:
        db.execute(sql)
    h.store.close()


def test_the_answer_of_a_page_approved_task_recorded_before_a_crash_goes_at_the_restart_with_its_file(
    page_harness: Callable[..., Harness],
) -> None:
    h, request, done = page_approved_task_sent_with_its_file(page_harness)
    h.store.web_runs.record_web_reply(request, done)
    crash_state(h, "UPDATE reply_files SET state = 'pending'")

    again = page_harness()
    wait_until(lambda: again.egress.files)
    assert again.egress.order == [("text", ANA, done), ("file", ANA, "a.py")]
    again.stop()
    again.store.close()
    third = page_harness()  # what a restart resends, it sends before it is ready
    assert third.egress.order == []


def test_a_file_of_a_page_approved_task_cut_short_by_a_crash_goes_at_the_restart_alone(
    page_harness: Callable[..., Harness],
) -> None:
    h, _request, _done = page_approved_task_sent_with_its_file(page_harness)
    crash_state(h, "UPDATE reply_files SET state = 'pending'")  # the answer went out (web_runs: sent), a.py not

    again = page_harness()
    wait_until(lambda: again.egress.files)
    assert again.egress.order == [("file", ANA, "a.py")]
    assert [e.detail for e in again.store.events.recent_events(kind="file_sent")] == ["a.py", "a.py"]


def test_cancel_drops_a_page_approved_task_waiting_in_the_queue_for_good(page_harness: Callable[..., Harness]) -> None:
    """`cancel` drops a task approved on the page as one approved by text: not run, pending again, and its run
    recorded as finished, so a restart does not run it either."""
    h = page_harness()
    h.ingress.add(ANA, "task: fix a.py")
    plan = wait_until(lambda: h.egress.to(ANA))[0]
    request = re.search(r"approve (req_[0-9a-f]{8})", plan).group(1)  # type: ignore[union-attr]
    h.ingress.add(ANA, "SLOW chat")
    wait_until(lambda: h.connector.running == 1)
    approved, why = WebDecisions(h.store, Approvals(h.store.approvals, 20), h.daemon.run_approved).approve(request)
    assert approved is not None, why
    wait_until(lambda: (ANA, f"Approved {request}: working on it in {h.settings.workspaces.default}.")
               in h.egress.progress)
    h.ingress.add(ANA, "cancel")
    reply = wait_until(lambda: h.egress.to(ANA)[1:])[0]
    assert reply == (
        "Stopped your running request.\n"
        f'Dropped your queued request, not run: "fix a.py" ({request}). '
        f"{request} is pending again (`approve {request}` runs it, `deny {request}` not)."
    )
    assert h.store.web_runs.unfinished() == []
    h.stop()
    assert [c.request.read_only for c in h.connector.calls] == [True, False]  # the plan and the SLOW chat only
    h.store.close()

    again = page_harness()
    again.ingress.add(ANA, "status", rowid=4)
    status = wait_until(lambda: again.egress.to(ANA))[0]
    assert status.startswith(f"Awaiting approval: {request}")  # not running, not queued: pending
    assert again.connector.calls == []
