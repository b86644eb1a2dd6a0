"""The daemon's outbound side on the real iMessage egress (the fake `osascript` leaving Messages' rows in a chat.db
with the real schema): one send lock per recipient, and a reply's confirmation waited for on a thread of its own."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from apple_flow.channels.imessage import build_imessage_egress
from apple_flow.channels.imessage.chatdb import ChatDB
from apple_flow.daemon.approvals import Approvals
from apple_flow.daemon.outbound import Outbound
from apple_flow.daemon.store import Store
from support.fake_osascript import FakeOsascript, switches_between_two_replies


def outbound(settings: Any, store: Store) -> Outbound:
    return Outbound(build_imessage_egress(settings, store.sent.for_channel("imessage", 600)), store, settings)


def test_a_slow_send_to_one_recipient_does_not_hold_up_another(
    channel_settings: Any, fake_osascript: FakeOsascript, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_OSASCRIPT_HANG", "slow one")  # hangs until the send's timeout kills it
    out = outbound(channel_settings(send_timeout_seconds=4, send_retries=0), store)
    slow = threading.Thread(target=out.hand_over, args=("+15551234567", "the slow one"))
    slow.start()
    fake_osascript.wait_for_calls(1)
    handed = out.hand_over("+15557654321", "another chat")
    assert slow.is_alive()  # before: the daemon's one send lock made the other chat wait for it
    assert handed.failed is None and handed.pending
    slow.join(30)


def test_replies_to_one_recipient_from_two_threads_never_interleave(
    channel_settings: Any, fake_osascript: FakeOsascript, store: Store
) -> None:
    out = outbound(channel_settings(reply_chunk_chars=100), store)
    parts, switches = switches_between_two_replies(out.send, fake_osascript)
    assert parts > 4
    assert switches == 1  # all of one reply, then the other


def test_a_confirmation_is_waited_for_on_its_own_thread_and_a_failure_reported(
    channel_settings: Any, fake_osascript: FakeOsascript, store: Store
) -> None:
    fake_osascript.rows("none")  # no row: the confirmation waits its whole second, then fails
    out = outbound(channel_settings(), store)
    outcomes: list[tuple[str, str | None]] = []
    handed = out.hand_over("+15551234567", "hello")
    out.when_confirmed(handed, lambda failed: outcomes.append((threading.current_thread().name, failed)))
    assert outcomes == []  # returned at once: the caller does not wait
    assert out.wait_confirmations(10)
    [(thread, failed)] = outcomes
    assert thread == "confirm" and failed is not None and "no trace of it" in failed


def test_a_plan_is_noted_with_its_parts_guids_once_confirmed(
    channel_settings: Any, fake_osascript: FakeOsascript, store: Store, tmp_path: Path
) -> None:
    approval = Approvals(store.approvals, ttl_minutes=20).create("+15551234567", "task", "plan", str(tmp_path))
    store.approvals.add(approval)
    out = outbound(channel_settings(), store)
    handed = out.hand_over("+15551234567", "Here is the plan. Like it to approve.", approval.id)
    out.when_confirmed(handed, lambda failed: None)
    assert out.wait_confirmations(10)
    assert len(fake_osascript.calls()) == 1
    [guid] = [row.guid for row in ChatDB(channel_settings().messages_db_path).sent_rows_after(0)]
    found = store.approvals.of_message(guid)  # a tapback on the plan's message finds the request
    assert found is not None and found.id == approval.id
