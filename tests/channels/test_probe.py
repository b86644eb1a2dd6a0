"""The Automation probe against a fake ``osascript`` that answers like the real one: only a script that sends
Messages an Apple event can be refused (-1743), and a Mac without an iMessage account has no account to name."""

from __future__ import annotations

from apple_flow.channels.imessage.probe import ProbeState, probe_messages_automation
from support.fake_osascript import FakeOsascript

QUERY = "get id of 1st account whose service type = iMessage"


def test_the_probe_asks_messages_for_its_imessage_account(fake_osascript: FakeOsascript) -> None:
    result = probe_messages_automation("osascript", 10)
    assert result.ok and result.state is ProbeState.OK
    assert "8D5E0A7B-3F1C-4B9E-9C11-2A7E5D40F6B3" in result.detail and "iMessage" in result.detail
    (call,) = fake_osascript.calls()
    assert call["argv"] == ["-"]
    assert QUERY in call["stdin"] and "get name" not in call["stdin"]


def test_the_probe_reads_the_accounts_enabled_and_connection_state(fake_osascript: FakeOsascript) -> None:
    result = probe_messages_automation("osascript", 10, app="Apple Flow")
    assert result.detail == "Apple Flow may control Messages (iMessage account 8D5E0A7B-3F1C-4B9E-9C11-2A7E5D40F6B3)"
    (call,) = fake_osascript.calls()
    assert "enabled of theAccount" in call["stdin"] and "connection status of theAccount" in call["stdin"]


def test_a_switched_off_imessage_account_is_not_ready_with_its_fix(fake_osascript: FakeOsascript) -> None:
    fake_osascript.account("disabled")
    result = probe_messages_automation("osascript", 10, app="Apple Flow")
    assert not result.ok and result.state is ProbeState.ACCOUNT_OFF
    assert result.detail.endswith("(iMessage account 8D5E0A7B-3F1C-4B9E-9C11-2A7E5D40F6B3), but the account is "
                                  "switched off")
    assert "Messages > Settings > iMessage" in result.fix and "\u201cEnable this account\u201d" in result.fix


def test_a_signed_out_or_offline_imessage_account_is_not_ready_with_its_fix(fake_osascript: FakeOsascript) -> None:
    fake_osascript.account("offline")
    result = probe_messages_automation("osascript", 10, app="Apple Flow")
    assert not result.ok and result.state is ProbeState.OFFLINE
    assert result.detail.endswith("but the account is disconnected, not connected")
    assert "signed in to iMessage" in result.fix and "online" in result.fix


def test_a_refused_apple_event_is_the_automation_permission_with_its_fix(fake_osascript: FakeOsascript) -> None:
    fake_osascript.mode("deny")
    result = probe_messages_automation("osascript", 10, app="Terminal")
    assert not result.ok and result.state is ProbeState.DENIED
    assert "Terminal is not allowed to control Messages" in result.detail
    assert "Privacy & Security > Automation" in result.fix and "Terminal" in result.fix


def test_no_imessage_account_says_sign_in(fake_osascript: FakeOsascript) -> None:
    fake_osascript.mode("no-imessage")
    result = probe_messages_automation("osascript", 10)
    assert not result.ok and result.state is ProbeState.NOT_SIGNED_IN
    assert "no iMessage account" in result.detail
    assert "Messages > Settings > iMessage" in result.fix


def test_a_probe_left_waiting_says_to_answer_the_prompt(fake_osascript: FakeOsascript) -> None:
    fake_osascript.mode("hang")
    result = probe_messages_automation("osascript", 1)
    assert not result.ok and result.state is ProbeState.NO_ANSWER
    assert "prompt" in result.fix


def test_without_osascript_the_probe_says_macos(fake_osascript: FakeOsascript) -> None:
    result = probe_messages_automation("no-such-osascript", 10)
    assert result.state is ProbeState.UNAVAILABLE and "macOS" in result.fix
