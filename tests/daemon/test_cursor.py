"""The cursor passes a message only when it and every message before it are finished."""

from __future__ import annotations

from apple_flow.daemon.running.message_jobs import CursorTracker


def test_the_cursor_waits_for_the_oldest_unfinished_message() -> None:
    tracker = CursorTracker(10)
    for rowid in (11, 12, 13):
        tracker.opened(rowid)
    assert tracker.finished(12) is None
    assert tracker.finished(13) is None
    assert tracker.position == 10
    assert tracker.finished(11) == 13
    assert tracker.position == 13


def test_skipped_rows_pass_only_behind_open_messages() -> None:
    tracker = CursorTracker(0)
    tracker.opened(1)
    assert tracker.passed(2) is None  # an echo the ingress skipped while message 1 still waits
    assert tracker.position == 0
    assert tracker.finished(1) == 2
    assert tracker.position == 2
    assert tracker.passed(3) == 3
