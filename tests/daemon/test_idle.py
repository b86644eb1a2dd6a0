"""An idle daemon sleeps: its main loop waits for the next item without a timeout, and the watchdog only wakes
when a running turn's time is up; a stop request still ends it at once."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import pytest

from support.daemon_harness import ANA, Harness, ask
from support.waiting import wait_for

pytestmark = pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counts context switches in /proc")


def switches(thread: threading.Thread) -> int:
    status = Path(f"/proc/self/task/{thread.native_id}/status").read_text()
    return int(next(x for x in status.splitlines() if x.startswith("voluntary_ctxt_switches")).split()[1])


def message_states(h: Harness) -> list[str]:
    with closing(sqlite3.connect(h.settings.db_path)) as db:
        return [state for (state,) in db.execute("SELECT state FROM messages ORDER BY rowid")]


def named(name: str) -> threading.Thread:
    return next(thread for thread in threading.enumerate() if thread.name == name)


def test_an_idle_daemon_does_not_wake(harness: Callable[..., Harness]) -> None:
    # Before: the main loop woke every 0.2 s and the watchdog every 0.5 s (about 14 wake-ups in this time).
    h = harness().start()
    assert ask(h, ANA, "hello")  # a turn ran: the watchdog saw it and went back to sleep
    wait_for(lambda: message_states(h) == ["sent"], 5, "the reply to be recorded as sent (the turn over)")
    threads = [h._thread, named("watchdog")]
    before = [switches(thread) for thread in threads]
    time.sleep(2.0)  # time passes for the idle daemon: what is measured is that it does not wake in it
    woke = [switches(thread) - count for thread, count in zip(threads, before, strict=True)]
    assert woke[0] <= 2 and woke[1] <= 2, woke
    began = time.monotonic()
    h.stop()  # request_stop wakes the main loop
    assert time.monotonic() - began < 5
