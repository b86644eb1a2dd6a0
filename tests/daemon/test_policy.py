"""Allowlist in the channel's form of a sender, local senders, per-sender rate limit."""

from __future__ import annotations

from apple_flow.channels.console import ConsoleSenders
from apple_flow.channels.imessage.channel import IMessageSenders
from apple_flow.daemon.deciding.policy import Policy
from support.clock import Clock


def test_the_allowlist_is_put_in_the_form_the_channel_gives_senders_in() -> None:
    # iMessage's ingress gives E.164 numbers and lower-case e-mails; its Senders put the allowlist in that form.
    policy = Policy(["(555) 123-4567", "Ana@Example.com"], 30, IMessageSenders())
    assert policy.check("+15551234567").allowed
    assert policy.check("ana@example.com").allowed
    unknown = policy.check("+15559999999")
    assert not unknown.allowed and unknown.reason == "unknown sender" and not unknown.notify


def test_a_sender_is_an_opaque_string_the_daemon_does_not_parse() -> None:
    # Another channel's chat id that looks like a phone number is neither rewritten nor confused with one.
    policy = Policy([" 5551234567 "], 30)
    assert policy.check("5551234567").allowed
    assert not policy.check("+15551234567").allowed


def test_an_empty_allowlist_lets_nobody_in_but_the_local_user() -> None:
    policy = Policy([], 30, ConsoleSenders())
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
