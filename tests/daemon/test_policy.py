"""Allowlist in normal form, local senders, per-sender rate limit."""

from __future__ import annotations

from apple_flow.daemon.policy import Policy
from support.clock import Clock


def test_the_allowlist_matches_any_format_of_the_same_handle() -> None:
    policy = Policy(["(555) 123-4567", "Ana@Example.com"], 30)
    assert policy.check("+15551234567").allowed
    assert policy.check("15551234567").allowed
    assert policy.check("ana@example.com").allowed
    unknown = policy.check("+15559999999")
    assert not unknown.allowed and unknown.reason == "unknown sender" and not unknown.notify


def test_an_empty_allowlist_lets_nobody_in_but_the_local_user() -> None:
    policy = Policy([], 30, local_senders=["console"])
    assert not policy.check("+15551234567").allowed
    assert policy.check("console").allowed
    assert not Policy([], 30).check("console").allowed


def test_the_rate_limit_is_per_sender_and_tells_once_per_window() -> None:
    clock = Clock()
    policy = Policy(["+15551234567", "+15557654321"], 3, clock=clock)
    assert [policy.check("+15551234567").allowed for _ in range(3)] == [True, True, True]
    fourth = policy.check("+15551234567")
    fifth = policy.check("+15551234567")
    assert (fourth.allowed, fourth.reason, fourth.notify) == (False, "rate limited", True)
    assert (fifth.allowed, fifth.notify) == (False, False)
    assert policy.check("+15557654321").allowed  # someone else is not affected
    clock.now += 61
    assert policy.check("+15551234567").allowed
