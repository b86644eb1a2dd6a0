"""A clock the test sets: code that takes ``now`` as a callable sees ``clock.now``, moved on by the test."""

from __future__ import annotations


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now
