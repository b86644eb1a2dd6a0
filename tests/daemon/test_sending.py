"""The daemon's outbound side on the real iMessage egress (the fake `osascript` leaving Messages' rows in a chat.db
with the real schema): one send lock per recipient, and a reply's confirmation waited for on a thread of its own."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from apple_flow.channels.imessage import build_imessage_egress
from apple_flow.channels.imessage.chatdb import ChatDB
from apple_flow.daemon.deciding.approvals import Approvals
from apple_flow.daemon.running.sending import ReplySender
from apple_flow.daemon.store import Store
from support.fake_osascript import FakeOsascript, switches_between_two_replies


def reply_sender(settings: Any, store: Store) -> ReplySender:
    return ReplySender(build_imessage_egress(settings, store.sent.for_channel("imessage", 600)), store, settings)


def test_a_slow_send_to_one_recipient_does_not_hold_up_another(
    channel_settings: Any, fake_osascript: FakeOsascript, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_OSASCRIPT_HANG", "slow one")  # hangs until the send's timeout kills it
    out = reply_sender(channel_settings(send_timeout_seconds=4, send_retries=0), store)
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
    out = reply_sender(channel_settings(reply_chunk_chars=100), store)
    parts, switches = switches_between_two_replies(out.send, fake_osascript)
    assert parts > 4
    assert switches == 1  # all of one reply, then the other


def test_a_confirmation_is_waited_for_on_its_own_thread_and_a_failure_reported(
    channel_settings: Any, fake_osascript: FakeOsascript, store: Store
) -> None:
    fake_osascript.rows("none")  # no row: the confirmation waits its whole second, then fails
    out = reply_sender(channel_settings(), store)
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
    store.approvals.add_approval(approval)
    out = reply_sender(channel_settings(), store)
    handed = out.hand_over("+15551234567", "Here is the plan. Like it to approve.", approval.id)
    out.when_confirmed(handed, lambda failed: None)
    assert out.wait_confirmations(10)
    assert len(fake_osascript.calls()) == 1
    [guid] = [row.guid for row in ChatDB(channel_settings().imessage.messages_db_path).sent_rows_after(0)]
    found = store.approvals.of_message(guid)  # a tapback on the plan's message finds the request
    assert found is not None and found.id == approval.id


def test_a_reply_noted_in_the_transaction_that_records_it_is_not_noted_again_as_it_goes(
    channel_settings: Any, fake_osascript: FakeOsascript, store: Store
) -> None:
    # Before: the channel noted each part in a transaction of its own as it sent it, after the reply's was done.
    out = reply_sender(channel_settings(reply_chunk_chars=100), store)
    reply = "a reply " * 30  # three parts
    statements: list[str] = []
    store.db.trace(statements.append)
    with store.transaction():
        store.events.log("reply", "stands in for the reply's record")
        noted = out.note("+15551234567", reply)
    written = len(statements)
    handed = out.hand_over("+15551234567", reply, noted=noted)
    store.db.trace(None)
    assert handed.failed is None and len(fake_osascript.calls()) == 3
    assert noted is not None and sum(1 for sql in statements[:written] if sql.startswith("INSERT INTO sent")) == 3
    assert not any(sql.startswith(("BEGIN", "INSERT INTO sent")) for sql in statements[written:])
    echoes = store.sent.for_channel("imessage", 600)
    parts = [" ".join(call["argv"][2].split()) for call in fake_osascript.calls()]
    assert all(echoes.take_echo("+15551234567", part) for part in parts)  # each echo known, once
    assert not echoes.take_echo("+15551234567", parts[0])
