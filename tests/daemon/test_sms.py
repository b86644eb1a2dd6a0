"""SMS and RCS sender IDs can be forged (issue #24, item 1): by default such a message is not acted on, only counted
for `health`; with APPLE_FLOW_ALLOW_SMS it is taken, but it can never approve, deny or cancel, and its turns only
read."""

from __future__ import annotations

import re
from collections.abc import Callable

from apple_flow.connectors.base import TurnRequest
from apple_flow.health.check import CheckStatus
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
    wait_until(lambda: h.store.cursors.get("imessage") == 3)
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
    approval = h.store.approvals.get(rid)
    assert approval is not None and approval.state == "pending"
    assert len(h.connector.calls) == 1  # only the planning turn ran
    assert ask(h, ANA, f"approve {rid}").startswith(f"Done ({rid}")  # by iMessage it works
