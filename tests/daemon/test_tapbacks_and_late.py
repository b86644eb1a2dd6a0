"""The daemon (in-process, a real store, fake channel and connector) on tapbacks and late messages: a like or love
from the asker on the plan's message approves it as `approve <id>` would, a dislike denies it; nothing else does;
late messages are held, listed once per sender when the backlog is read, and run on `run` / `run <n>`."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from apple_flow.channels.base import Tapback
from apple_flow.connectors.base import TurnRequest
from support.daemon_fakes import FakeConnector
from support.daemon_harness import ANA, BOB, Harness, wait_until


def planner(prompt: str, request: TurnRequest) -> str:
    return "1. Edit a.py" if request.read_only else f"did: {prompt[:40]}"


@pytest.fixture
def run_echoing_daemon(harness: Callable[..., Harness]) -> Callable[..., Harness]:
    """Starts a daemon whose fake connector plans and runs with ``planner``."""
    return lambda **overrides: harness(FakeConnector(answer=planner), **overrides).start()


def plan(h: Harness, task: str = "task: fix the parser") -> tuple[str, str]:
    """(the request's id, the id of the plan's message)."""
    before = len(h.egress.to(ANA))
    h.ingress.add(ANA, task)
    reply = wait_until(lambda: h.egress.to(ANA)[before] if len(h.egress.to(ANA)) > before else None)
    assert "like this message to approve it, dislike it to deny" in reply
    found = re.search(r"approve (req_[0-9a-f]{8})", reply)
    assert found is not None
    return found.group(1), h.egress.guid_of("Plan (")


def test_a_like_or_a_love_from_the_asker_approves_a_dislike_denies(run_echoing_daemon: Callable[..., Harness]) -> None:
    h = run_echoing_daemon()
    liked, liked_on = plan(h, "task: one")
    loved, loved_on = plan(h, "task: two")
    disliked, disliked_on = plan(h, "task: three")
    h.ingress.add(ANA, 'Liked "Plan"', tapback=Tapback(True, liked_on))
    h.ingress.add(ANA, 'Loved "Plan"', tapback=Tapback(True, loved_on))
    h.ingress.add(ANA, 'Disliked "Plan"', tapback=Tapback(False, disliked_on))
    h.finish()
    states = [h.store.approvals.get_approval(i).state for i in (liked, loved, disliked)]  # type: ignore[union-attr]
    assert states == ["approved", "approved", "denied"]
    assert f"Denied {disliked}; nothing was changed." in h.egress.to(ANA)
    assert [c.request.read_only for c in h.connector.calls] == [True, True, True, False, False]


def test_a_tapback_from_someone_else_or_on_another_message_does_nothing(
    run_echoing_daemon: Callable[..., Harness]
) -> None:
    h = run_echoing_daemon()
    h.ingress.add(ANA, "help")
    wait_until(lambda: h.egress.to(ANA))
    request, plan_on = plan(h)
    h.ingress.add(BOB, 'Liked "Plan"', tapback=Tapback(True, plan_on))  # allowed too, but not the asker
    h.ingress.add(ANA, 'Liked "Commands"', tapback=Tapback(True, h.egress.guid_of("Commands:")))
    h.ingress.add(ANA, 'Liked "?"', tapback=Tapback(True, "not-a-message-of-ours"))
    h.finish()
    assert h.egress.to(BOB) == [] and len(h.egress.to(ANA)) == 2  # help and the plan: nothing more
    assert h.store.approvals.get_approval(request).state == "pending"  # type: ignore[union-attr]
    assert len(h.connector.calls) == 1


def test_a_tapback_on_a_decided_or_expired_plan_gets_one_line(run_echoing_daemon: Callable[..., Harness]) -> None:
    h = run_echoing_daemon()
    decided, decided_on = plan(h, "task: one")
    expired, expired_on = plan(h, "task: two")
    h.ingress.add(ANA, f"deny {decided}")
    h.store.db.write("UPDATE approvals SET expires_at = 0 WHERE id = ?", (expired,))
    h.ingress.add(ANA, 'Liked "Plan"', tapback=Tapback(True, decided_on))
    h.ingress.add(ANA, 'Liked "Plan"', tapback=Tapback(True, expired_on))
    h.finish()
    assert h.egress.to(ANA)[-2:] == [
        f"{decided} was already denied.",
        f"{expired} expired (requests last 20 minutes). Send the task again.",
    ]


# --- late messages ----------------------------------------------------------------------------------------------


def test_late_messages_are_listed_once_per_sender_and_run_on_run(run_echoing_daemon: Callable[..., Harness]) -> None:
    h = run_echoing_daemon()
    asleep = datetime.now(UTC) - timedelta(hours=2)
    for index in range(200):
        h.ingress.add(ANA, f"request {index}", date=asleep + timedelta(seconds=index), late=True)
    h.ingress.add(BOB, "fix the build", date=asleep, late=True)
    listing = wait_until(lambda: h.egress.to(ANA))
    wait_until(lambda: h.egress.to(BOB))
    assert len(listing) == 1 and listing[0].startswith(
        "While this Mac was asleep or offline you sent 200 messages; none was run. The last 5:\n196. ")
    assert h.egress.to(BOB)[0].startswith("While this Mac was asleep or offline you sent this; it was not run:\n1. ")
    assert h.connector.calls == []
    h.ingress.add(ANA, "run")
    h.ingress.add(ANA, "run 3")
    h.ingress.add(ANA, "run 201")
    h.finish()
    assert [c.request.message for c in h.connector.calls] == ["request 199", "request 2"]
    assert "There is no 201: `run 1` to `run 200`, or `run` for the last one." in h.egress.to(ANA)
    assert len([t for t in h.egress.to(ANA) if t.startswith("While this Mac")]) == 1


def test_run_with_nothing_held_says_so(run_echoing_daemon: Callable[..., Harness]) -> None:
    h = run_echoing_daemon()
    h.ingress.add(ANA, "run")
    h.finish()
    assert h.egress.to(ANA) == ["Nothing from while this Mac was asleep or offline is waiting to run."]
    assert h.connector.calls == []
