"""The daemon's outbound side on the real iMessage egress (a fake `osascript`): one recipient's slow send does not
hold up another's, and a reply's confirmation is waited for on a thread of its own."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from apple_flow.channels.imessage import build_imessage_egress
from apple_flow.daemon.outbound import Outbound
from apple_flow.daemon.store import Store
from support.fake_osascript import FakeOsascript


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "relay.db")


def test_a_slow_send_to_one_recipient_does_not_hold_up_another(
    channel_settings: Any, fake_osascript: FakeOsascript, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_OSASCRIPT_HANG", "slow one")  # hangs until the send's timeout kills it
    settings = channel_settings(send_timeout_seconds=4, send_retries=0)
    outbound = Outbound(build_imessage_egress(settings), store, settings)
    slow = threading.Thread(target=outbound.hand_over, args=("+15551234567", "the slow one"))
    slow.start()
    deadline = time.monotonic() + 10
    while not fake_osascript.calls():
        assert time.monotonic() < deadline
        time.sleep(0.02)
    handed = outbound.hand_over("+15557654321", "another chat")
    assert slow.is_alive()  # before: the daemon's one send lock made the other chat wait for it
    assert handed.failed is None and handed.confirmation is not None
    slow.join(30)


def test_a_confirmation_is_waited_for_on_its_own_thread(
    channel_settings: Any, fake_osascript: FakeOsascript, store: Store
) -> None:
    fake_osascript.rows("none")  # no row: the confirmation waits its full second, then fails
    settings = channel_settings()
    outbound = Outbound(build_imessage_egress(settings), store, settings)
    outcomes: list[tuple[str, str | None]] = []
    handed = outbound.hand_over("+15551234567", "hello")
    outbound.when_confirmed(handed, lambda failed: outcomes.append((threading.current_thread().name, failed)))
    assert outcomes == []  # returned at once: the caller does not wait
    assert outbound.wait_confirmations(10)
    [(thread, failed)] = outcomes
    assert thread == "confirm" and failed is not None and "no trace of it" in failed
