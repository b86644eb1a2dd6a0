"""The record of sent texts: window, whitespace-insensitive match, per recipient, consumed once."""

from __future__ import annotations

from apple_flow.channels.imessage.echo import SentLog


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_an_echo_is_recognised_within_the_window_only() -> None:
    clock = Clock()
    log = SentLog(60, clock=clock)
    log.record("+15551234567", "first")
    log.record("+15551234567", "second")
    clock.now += 30
    assert log.take_echo("+15551234567", "first")
    clock.now += 31
    assert not log.take_echo("+15551234567", "second")  # expired


def test_match_ignores_whitespace_changes_but_not_words() -> None:
    log = SentLog(60)
    log.record("a@b.c", "Line one\nline  two ")
    assert not log.take_echo("a@b.c", "Line one line three")
    assert log.take_echo("a@b.c", " Line one line two")


def test_each_sent_text_suppresses_one_copy() -> None:
    log = SentLog(60)
    log.record("a@b.c", "ok")
    assert log.take_echo("a@b.c", "ok")
    assert not log.take_echo("a@b.c", "ok")


def test_zero_window_suppresses_nothing_later() -> None:
    clock = Clock()
    log = SentLog(0, clock=clock)
    log.record("a@b.c", "ok")
    clock.now += 0.001
    assert not log.take_echo("a@b.c", "ok")
