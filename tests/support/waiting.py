"""Waiting for something to happen, with a deadline: the suite's one polling loop (no test sleeps a fixed time
for an event)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

POLL_SECONDS = 0.02


def wait_for(condition: Callable[[], Any], timeout: float, what: str) -> Any:
    """Calls ``condition`` until it returns something true and returns that; fails the test, naming ``what``, once
    ``timeout`` seconds have passed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(POLL_SECONDS)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")
