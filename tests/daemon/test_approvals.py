"""task: -> read-only plan -> approval request -> approve (same sender only) -> run with tools; deny, expiry."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from apple_flow.config import Settings
from apple_flow.connectors.base import TurnRequest
from apple_flow.daemon.deciding.approvals import ApprovalDecision, Approvals
from apple_flow.daemon.store import Store
from support.daemon_fakes import FakeConnector
from support.daemon_harness import ANA, BOB, Harness
from support.waiting import wait_for


def planner(prompt: str, request: TurnRequest) -> str:
    if request.read_only:
        return "1. Edit a.py\n2. Run the tests"
    return "Changed a.py; tests pass."


@pytest.fixture
def run_daemon(harness: Callable[..., Harness]) -> Callable[..., Harness]:
    """Starts a daemon whose fake connector plans and runs with ``planner``."""
    return lambda **overrides: harness(FakeConnector(answer=planner), **overrides).start()


def request_id(reply: str) -> str:
    match = re.search(r"approve (req_[0-9a-f]{8})", reply)
    assert match, reply
    return match.group(1)


def test_a_task_is_planned_read_only_then_runs_with_tools_once_approved(run_daemon: Callable[..., Harness]) -> None:
    h = run_daemon()
    h.ingress.add(ANA, "task: fix the parser")
    plan_reply = _wait_for_replies(h, ANA, 1)[0]
    assert "1. Edit a.py" in plan_reply and "Expires in 20 minutes" in plan_reply
    plan_call = h.connector.calls[0]
    assert (plan_call.request.read_only, plan_call.request.plan) == (True, False)
    assert plan_call.request.workspace == h.settings.workspaces.default
    assert "fix the parser" in plan_call.prompt
    rid = request_id(plan_reply)
    h.ingress.add(ANA, f"approve {rid} keep the old API")
    h.finish()
    replies = h.egress.to(ANA)
    assert replies[1].startswith(f"Done ({rid}, run_") and "Changed a.py" in replies[1]
    assert (ANA, f"Approved {rid}: working on it in {h.settings.workspaces.default}.") in h.egress.progress
    run_call = h.connector.calls[1]
    assert (run_call.request.read_only, run_call.request.plan) == (False, True)
    assert run_call.request.workspace == h.settings.workspaces.default
    assert "fix the parser" in run_call.prompt and "1. Edit a.py" in run_call.prompt
    assert "keep the old API" in run_call.prompt
    approval = h.store.approvals.get_approval(rid)
    assert approval is not None and approval.state == "approved"


def test_with_chat_read_only_questions_only_read_and_an_approved_task_still_writes(
    run_daemon: Callable[..., Harness],
) -> None:
    """The demo profile's chat_read_only: a plain message gets a read-only turn; `task:` plans read-only and, once
    approved, runs with write tools as before."""
    h = run_daemon(chat_read_only=True)
    h.ingress.add(ANA, "what is in a.py?")
    h.ingress.add(ANA, "task: fix the parser")
    rid = request_id(_wait_for_replies(h, ANA, 2)[1])
    h.ingress.add(ANA, f"approve {rid}")
    h.finish()
    assert [call.request.read_only for call in h.connector.calls] == [True, True, False]


def test_only_the_requesting_sender_may_approve(run_daemon: Callable[..., Harness]) -> None:
    h = run_daemon()
    h.ingress.add(ANA, "task: fix the parser")
    rid = request_id(_wait_for_replies(h, ANA, 1)[0])
    h.ingress.add(BOB, f"approve {rid}")
    h.finish()
    assert h.egress.to(BOB) == [f"No approval request {rid}. You have none pending."]
    assert len(h.connector.calls) == 1
    approval = h.store.approvals.get_approval(rid)
    assert approval is not None and approval.state == "pending"


def test_deny_unknown_and_repeated_decisions(run_daemon: Callable[..., Harness]) -> None:
    h = run_daemon()
    h.ingress.add(ANA, "task: fix the parser")
    rid = request_id(_wait_for_replies(h, ANA, 1)[0])
    h.ingress.add(ANA, f"deny {rid}")
    h.ingress.add(ANA, f"approve {rid}")
    h.ingress.add(ANA, "approve req_00000000")
    h.ingress.add(ANA, "approve")
    h.finish()
    assert h.egress.to(ANA)[1:] == [
        f"Denied {rid}; nothing was changed.",
        f"{rid} was already denied.",
        "No approval request req_00000000. You have none pending.",
        "You have no pending approval requests.",
    ]
    assert len(h.connector.calls) == 1


def test_deny_all_denies_every_pending_request_of_the_sender(run_daemon: Callable[..., Harness]) -> None:
    h = run_daemon()
    h.ingress.add(ANA, "task: one")
    h.ingress.add(ANA, "task: two")
    replies = _wait_for_replies(h, ANA, 2)
    ids = sorted(request_id(r) for r in replies)
    h.ingress.add(ANA, "approve")
    h.ingress.add(ANA, "deny all")
    h.ingress.add(ANA, "deny all")
    h.finish()
    which, denied, none = h.egress.to(ANA)[2:]
    assert which.startswith("Which one? Pending:") and all(i in which for i in ids)
    assert denied.startswith("Denied 2 request(s)")
    assert none == "You have no pending approval requests."
    assert all(h.store.approvals.get_approval(i).state == "denied" for i in ids)  # type: ignore[union-attr]


def recorded(store: Store, decision: ApprovalDecision) -> ApprovalDecision:
    """Records what a decision decided, as the daemon does with the message that made it."""
    for approval in decision.decided:
        store.approvals.record_decisions([approval])
    return decision


def test_deciding_writes_nothing_until_the_decision_is_recorded(tmp_path: Path) -> None:
    store = Store(tmp_path / "relay.db")
    approvals = Approvals(store.approvals, ttl_minutes=20)
    request = approvals.create(ANA, "task", "plan", "/ws")
    store.approvals.add_approval(request)
    decision = approvals.approve(ANA, request.id, "imessage:9", "keep the API")
    assert decision.approval is not None and decision.approval.state == "approved"
    assert decision.decided == (decision.approval,) and decision.approval.extra == "keep the API"
    assert store.approvals.get_approval(request.id) == request  # still pending: the daemon records it with the message
    recorded(store, decision)
    stored = store.approvals.get_approval(request.id)
    assert stored is not None and (stored.state, stored.decided_by, stored.extra) == (
        "approved", "imessage:9", "keep the API"
    )


def test_an_expired_request_cannot_be_approved(tmp_path: Path) -> None:
    now = [1000.0]
    store = Store(tmp_path / "relay.db")
    approvals = Approvals(store.approvals, ttl_minutes=20, clock=lambda: now[0])
    request = approvals.create(ANA, "task", "plan", "/ws")
    store.approvals.add_approval(request)
    now[0] += 20 * 60 + 1
    decision = approvals.approve(ANA, request.id, "imessage:9")
    assert decision.approval is None
    assert decision.message == f"{request.id} expired (requests last 20 minutes). Send the task again."
    assert approvals.pending(ANA) == []


def test_a_decision_that_lands_between_the_check_and_the_write_wins_alone(tmp_path: Path) -> None:
    """The web page and a text can decide the same request at once: only the first write counts."""
    store = Store(tmp_path / "relay.db")
    approvals = Approvals(store.approvals, ttl_minutes=20)
    request = approvals.create(ANA, "task", "plan", "/ws")
    store.approvals.add_approval(request)
    decision = approvals.approve(ANA, request.id, "imessage:9")  # checked while still pending
    other = replace(request, state="denied", decided_by="web:other", decided_at=1.0)
    assert store.approvals.record_decisions([other])  # the other decider writes first
    assert not store.approvals.record_decisions(decision.decided)  # so this one records nothing
    stored = store.approvals.get_approval(request.id)
    assert stored is not None and (stored.state, stored.decided_by) == ("denied", "web:other")
    again = approvals.approve(ANA, request.id, "imessage:9")
    assert again.approval is None and again.message == f"{request.id} was already denied."


def test_the_daemon_decides_again_when_a_request_was_decided_meanwhile(
    daemon_settings: Callable[..., Settings], monkeypatch: pytest.MonkeyPatch
) -> None:
    h = Harness(daemon_settings(), FakeConnector(answer=planner)).start()
    h.ingress.add(ANA, "task: fix the parser")
    rid = request_id(_wait_for_replies(h, ANA, 1)[0])
    decide = h.daemon.orchestrator.decide

    def web_denies_meanwhile(*args: Any) -> Any:
        decision = decide(*args)
        current = h.store.approvals.get_approval(rid)
        assert current is not None
        h.store.approvals.record_decisions([replace(current, state="denied", decided_by="web:click")])  # no-op 2nd time
        return decision

    monkeypatch.setattr(h.daemon.orchestrator, "decide", web_denies_meanwhile)
    h.ingress.add(ANA, f"approve {rid}")
    h.finish()
    assert h.egress.to(ANA)[1] == f"{rid} was already denied."
    assert len(h.connector.calls) == 1  # the task did not run
    stored = h.store.approvals.get_approval(rid)
    assert stored is not None and (stored.state, stored.decided_by) == ("denied", "web:click")


def test_replaying_the_approving_message_after_a_crash_runs_the_task_again(tmp_path: Path) -> None:
    store = Store(tmp_path / "relay.db")
    approvals = Approvals(store.approvals, ttl_minutes=20)
    request = approvals.create(ANA, "task", "plan", "/ws")
    store.approvals.add_approval(request)
    first = recorded(store, approvals.approve(ANA, request.id, "imessage:9"))
    replay = recorded(store, approvals.approve(ANA, request.id, "imessage:9"))
    other = approvals.approve(ANA, request.id, "imessage:10")
    assert first.approval is not None and replay.approval is not None and replay.approval.id == request.id
    assert other.approval is None and other.message == f"{request.id} was already approved."


def test_replaying_a_bare_approve_after_a_crash_runs_the_task_again(tmp_path: Path) -> None:
    # The approving message stays "taken" while the approved task runs (minutes): a crash then replays it.
    store = Store(tmp_path / "relay.db")
    approvals = Approvals(store.approvals, ttl_minutes=20)
    request = approvals.create(ANA, "task", "plan", "/ws")
    store.approvals.add_approval(request)
    first = recorded(store, approvals.approve(ANA, None, "imessage:9"))
    replay = recorded(store, approvals.approve(ANA, None, "imessage:9"))
    assert first.approval is not None and replay.approval is not None and replay.approval.id == request.id
    assert approvals.approve(BOB, None, "imessage:9").approval is None  # the key alone proves nothing
    denied = approvals.create(ANA, "task 2", "plan", "/ws")
    store.approvals.add_approval(denied)
    assert recorded(store, approvals.deny(ANA, None, "imessage:10")).message == (
        f"Denied {denied.id}; nothing was changed."
    )
    assert recorded(store, approvals.deny(ANA, None, "imessage:10")).message == (
        f"Denied {denied.id}; nothing was changed."
    )
    more = [approvals.create(ANA, f"task {i}", "plan", "/ws") for i in (3, 4)]
    for request in more:
        store.approvals.add_approval(request)
    said = recorded(store, approvals.deny_all(ANA, "imessage:11")).message
    assert said.startswith("Denied 2 request(s)")
    assert recorded(store, approvals.deny_all(ANA, "imessage:11")).message == said  # the replay says the same
    assert approvals.deny_all(ANA, "imessage:12").message == "You have no pending approval requests."


def test_a_workspace_alias_inside_the_allowed_workspaces_is_used(
    daemon_settings: Callable[..., Settings], tmp_path: Path, workspace: Path
) -> None:
    site = workspace / "site"
    site.mkdir(parents=True)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    settings = daemon_settings(workspace_aliases={"site": str(site), "out": str(outside)})
    h = Harness(settings, FakeConnector(answer=planner)).start()
    h.ingress.add(ANA, "@site what is here")
    h.ingress.add(ANA, "@out what is here")
    h.ingress.add(ANA, "@nope what is here")
    h.finish()
    assert h.connector.calls[0].request.workspace == site
    assert len(h.connector.calls) == 1
    assert sorted(h.egress.to(ANA)) == [
        "@out points outside the allowed workspaces; ask the owner to allow it.",
        "Changed a.py; tests pass.",
        "Unknown workspace @nope (known: @out, @site).",
    ]


def test_status_names_running_pending_and_recent_work(run_daemon: Callable[..., Harness]) -> None:
    h = run_daemon()
    h.ingress.add(ANA, "task: fix the parser")
    rid = request_id(_wait_for_replies(h, ANA, 1)[0])
    h.ingress.add(ANA, "status")
    status = _wait_for_replies(h, ANA, 2)[1]
    assert f"Awaiting approval: {rid}" in status and "fix the parser" in status and "task done" in status
    run_id = h.store.runs.of_sender(ANA)[0].id
    h.ingress.add(ANA, f"status {run_id}")
    h.ingress.add(ANA, f"status {rid}")
    h.ingress.add(BOB, f"status {run_id}")
    h.finish()
    assert h.egress.to(ANA)[2].startswith(f"{run_id} (task) done: 1. Edit a.py")
    assert h.egress.to(ANA)[3] == f"{rid} pending: fix the parser"
    assert h.egress.to(BOB) == [f"No run or request {run_id}. Send `status` for yours."]


def _wait_for_replies(h: Harness, sender: str, count: int, timeout: float = 5) -> list[str]:
    replies: list[str] = wait_for(lambda: len(h.egress.to(sender)) >= count and h.egress.to(sender), timeout,
                                  f"{count} replies to {sender}")
    return replies


def test_an_approved_task_runs_in_the_workspace_its_plan_was_made_in(
    daemon_settings: Callable[..., Settings], workspace: Path
) -> None:
    site = workspace / "site"
    site.mkdir(parents=True)
    h = Harness(daemon_settings(workspace_aliases={"site": str(site)}), FakeConnector(answer=planner)).start()
    h.ingress.add(ANA, "@site task: fix the tests")
    rid = request_id(_wait_for_replies(h, ANA, 1)[0])
    h.ingress.add(ANA, f"approve {rid}")
    h.finish()
    assert [c.request.workspace for c in h.connector.calls] == [site, site]
    assert h.connector.calls[1].request.read_only is False


def test_a_bare_deny_denies_the_one_pending_request_and_never_reaches_the_agent(
    run_daemon: Callable[..., Harness],
) -> None:
    h = run_daemon()
    h.ingress.add(ANA, "deny")
    h.ingress.add(ANA, "task: fix the parser")
    rid = request_id(_wait_for_replies(h, ANA, 2)[1])
    h.ingress.add(ANA, "deny")
    h.finish()
    assert h.egress.to(ANA)[0] == "You have no pending approval requests."
    assert h.egress.to(ANA)[2] == f"Denied {rid}; nothing was changed."
    assert len(h.connector.calls) == 1  # only the planning turn
    approval = h.store.approvals.get_approval(rid)
    assert approval is not None and approval.state == "denied"


def test_an_alias_through_a_symlink_that_leaves_the_allowed_workspaces_is_refused(
    daemon_settings: Callable[..., Settings], tmp_path: Path, workspace: Path
) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    link = workspace / "escape"
    link.symlink_to(outside)
    h = Harness(daemon_settings(workspace_aliases={"esc": str(link)}), FakeConnector(answer=planner)).start()
    h.ingress.add(ANA, "@esc task: delete everything")
    h.finish()
    assert h.egress.to(ANA) == ["@esc points outside the allowed workspaces; ask the owner to allow it."]
    assert h.connector.calls == []


def test_a_blocked_plan_asks_the_user_and_creates_no_approval_request(
    daemon_settings: Callable[..., Settings],
) -> None:
    def blocked(prompt: str, request: TurnRequest) -> str:
        return "BLOCKER: which parser do you mean, the CSV or the JSON one?"

    h = Harness(daemon_settings(), FakeConnector(answer=blocked)).start()
    h.ingress.add(ANA, "task: fix the parser")
    reply = _wait_for_replies(h, ANA, 1)[0]
    h.ingress.add(ANA, "approve")
    h.finish()
    assert reply == "BLOCKER: which parser do you mean, the CSV or the JSON one?"
    assert "approve" not in reply
    assert h.store.approvals.pending(ANA) == []
    assert h.egress.to(ANA)[1] == "You have no pending approval requests."
    assert h.store.runs.of_sender(ANA)[-1].state == "blocked"
