"""SMS and RCS sender IDs can be forged (nothing vouches for the number, as the Apple account does for iMessage): by
default such a message is not acted on, only counted for `health`; with APPLE_FLOW_ALLOW_SMS it is taken, but it
can never approve, deny or cancel, and its turns only read."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from apple_flow.check_result import CheckStatus
from apple_flow.connectors.base import TurnRequest
from apple_flow.health.doctor import check_sms
from support.daemon_fakes import FakeConnector
from support.daemon_harness import ANA, Harness, ask, wait_until

MakeHarness = Callable[..., Harness]


def ask_by_sms(h: Harness, text: str) -> str:
    before = len(h.egress.to(ANA))
    h.ingress.add(ANA, text, forgeable=True)
    return str(wait_until(lambda: h.egress.to(ANA)[before] if len(h.egress.to(ANA)) > before else None))


def test_a_refused_sms_is_counted_and_health_says_so(harness: MakeHarness) -> None:
    h = harness().start()
    h.ingress.skip(1, "SMS, not iMessage: its sender can be forged", ANA, forgeable=True)
    h.ingress.skip(2, "echo", ANA)
    h.ingress.skip(3, "RCS, not iMessage: its sender can be forged", ANA, forgeable=True)
    wait_until(lambda: h.store.cursors.get_cursor("imessage") == 3)
    reply = ask(h, ANA, "health")
    assert "Not acted on: 2 SMS/RCS messages" in reply and f"from {ANA}" in reply
    assert "APPLE_FLOW_ALLOW_SMS=true" in reply
    assert not h.connector.calls
    check = check_sms(h.settings, h.store.events)
    assert check.status is CheckStatus.WARN and "2 SMS/RCS messages" in check.detail


def test_without_refusals_health_has_no_sms_line_and_the_check_is_ok(harness: MakeHarness) -> None:
    h = harness().start()
    assert "SMS" not in ask(h, ANA, "health")
    check = check_sms(h.settings, h.store.events)
    assert check.status is CheckStatus.OK and "not acted on" in check.detail


def test_an_allowed_sms_runs_read_only_turns_only(harness: MakeHarness) -> None:
    h = harness().start()
    h.ingress.add(ANA, "fix the bug in a.py", forgeable=True)
    h.ingress.add(ANA, "task: rewrite a.py", forgeable=True)
    wait_until(lambda: len(h.egress.to(ANA)) == 2)
    requests: list[TurnRequest] = [call.request for call in h.connector.calls]
    assert [(r.read_only, r.plan) for r in requests] == [(True, False), (True, False)]


def test_an_sms_can_never_approve_deny_or_cancel(harness: MakeHarness) -> None:
    h = harness(FakeConnector(answer=lambda prompt, request: "1. Edit a.py")).start()
    plan = ask(h, ANA, "task: fix the parser")  # by iMessage
    match = re.search(r"approve (req_[0-9a-f]{8})", plan)
    assert match
    rid = match.group(1)
    for text in (f"approve {rid}", "approve", f"deny {rid}", "deny all", "cancel", "web"):
        assert "is not taken by SMS or RCS" in ask_by_sms(h, text), text
    approval = h.store.approvals.get_approval(rid)
    assert approval is not None and approval.state == "pending"
    assert len(h.connector.calls) == 1  # only the planning turn ran
    assert ask(h, ANA, f"approve {rid}").startswith(f"Done ({rid}")  # by iMessage it works


def test_a_late_sms_keeps_its_mark_in_the_listing_and_on_run(harness: MakeHarness) -> None:
    """Held while the Mac slept, an SMS is listed as such, and `run` (even by iMessage) gives it the refusals and
    the read-only rule it would have had on arrival: a held SMS `approve <id>` approves nothing."""
    h = harness(FakeConnector(answer=lambda prompt, request: "1. Edit a.py")).start()
    plan = ask(h, ANA, "task: fix the parser")
    match = re.search(r"approve (req_[0-9a-f]{8})", plan)
    assert match
    rid = match.group(1)
    asleep = datetime.now(UTC) - timedelta(hours=2)
    before = len(h.egress.to(ANA))
    h.ingress.add(ANA, f"approve {rid}", date=asleep, late=True, forgeable=True)
    h.ingress.add(ANA, "fix the bug in a.py", date=asleep + timedelta(seconds=1), late=True, forgeable=True)
    h.ingress.add(ANA, "explain a.py", date=asleep + timedelta(seconds=2), late=True)
    listing = str(wait_until(lambda: h.egress.to(ANA)[before] if len(h.egress.to(ANA)) > before else None))
    lines = listing.splitlines()
    assert lines[1].startswith("1. ") and " by SMS approve " in lines[1]
    assert lines[2].startswith("2. ") and " by SMS fix the bug" in lines[2]
    assert lines[3].startswith("3. ") and "by SMS" not in lines[3]
    assert "is not taken by SMS or RCS" in ask(h, ANA, "run 1")
    approval = h.store.approvals.get_approval(rid)
    assert approval is not None and approval.state == "pending"
    ask(h, ANA, "run 2")
    ask(h, ANA, "run 3")
    requests = [call.request for call in h.connector.calls[1:]]
    assert [(r.message, r.read_only) for r in requests] == [("fix the bug in a.py", True), ("explain a.py", False)]
