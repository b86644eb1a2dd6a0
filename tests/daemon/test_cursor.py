"""The cursor passes a message only when it and every message before it are finished."""

from __future__ import annotations

from apple_flow.daemon.cursor import CursorTracker


def test_the_cursor_waits_for_the_oldest_unfinished_message() -> None:
    saved: list[int] = []
    tracker = CursorTracker(10, saved.append)
    for rowid in (11, 12, 13):
        tracker.opened(rowid)
    tracker.finished(12)
    tracker.finished(13)
    assert saved == [] and tracker.position == 10
    tracker.finished(11)
    assert saved == [13] and tracker.position == 13


def test_skipped_rows_pass_only_behind_open_messages() -> None:
    saved: list[int] = []
    tracker = CursorTracker(0, saved.append)
    tracker.opened(1)
    tracker.passed(2)  # an echo the ingress skipped while message 1 still waits
    assert tracker.position == 0
    tracker.finished(1)
    assert tracker.position == 2
    tracker.passed(3)
    assert saved == [2, 3]
