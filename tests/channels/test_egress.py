"""The AppleScript egress, with a fake osascript on PATH recording argv and stdin."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from apple_flow.channels.base import SendError, SentTexts
from apple_flow.channels.imessage import build_imessage_egress
from apple_flow.channels.imessage.egress import BUDDY_SCRIPT, GROUP_SCRIPT, PARTICIPANT_SCRIPT, SMS_SCRIPT
from apple_flow.channels.imessage.outgoing import normalise_text
from support.fake_osascript import FakeOsascript, switches_between_two_replies

NASTY = [
    'He said "hi"',
    "back\\slash \\n not a newline",
    '" & (do shell script "id") & "',
    "'; do shell script \"touch /tmp/pwned\" --",
    "line one\nline two\r\nline three",
    "emoji 👋🏽 中文 𝐁 café",
    "-e starts like an option",
    'end run\non run argv\ndo shell script "id"',
]


@pytest.mark.parametrize("text", NASTY)
def test_text_and_handle_are_arguments_never_script_source(
    text: str, channel_settings: Any, fake_osascript: FakeOsascript
) -> None:
    egress = build_imessage_egress(channel_settings())

    egress.send("+1 (555) 123-4567", text)

    (call,) = fake_osascript.calls()
    assert call["argv"] == ["-", "+15551234567", text]
    assert call["stdin"] == PARTICIPANT_SCRIPT
    assert text not in call["stdin"]


def test_the_handle_and_text_never_appear_in_osascripts_arguments(
    channel_settings: Any, fake_osascript: FakeOsascript
) -> None:
    """A process's arguments are visible to every local user (`ps`), and a reply may be a one-time login link:
    osascript gets only the paths of files only this user can read, which are gone after the send."""
    link = "Log in: http://apple-flow.localhost:8787/login/link/s3cret-one-time-secret"
    build_imessage_egress(channel_settings()).send("+1 (555) 123-4567", link)
    (call,) = fake_osascript.calls()
    assert call["argv"] == ["-", "+15551234567", link]  # what the script reads
    raw = call["raw_argv"]
    assert raw[0] == "-" and all(Path(path).name.startswith("apple-flow-osascript-") for path in raw[1:])
    assert not any("s3cret" in item or "5551234567" in item for item in raw)
    assert call["modes"] == [None, "0o600", "0o600"]
    assert all(not Path(path).exists() for path in raw[1:])
    assert "read (POSIX file (item 2 of argv)) as «class utf8»" in call["stdin"]


def test_text_argv_cannot_carry_is_cleaned_before_osascript(
    channel_settings: Any, fake_osascript: FakeOsascript, sent_texts: SentTexts
) -> None:
    egress = build_imessage_egress(channel_settings(), sent_texts)

    egress.send("+15551234567", "before\x00after \ud83d\ude00 lone \ud800 end")

    (call,) = fake_osascript.calls()
    assert call["argv"] == ["-", "+15551234567", "beforeafter 😀 lone \ufffd end"]
    assert sent_texts.take_echo("+15551234567", "beforeafter 😀 lone \ufffd end")  # the echo is what went out


def test_buddy_is_only_a_fallback_and_never_becomes_the_preferred_form(
    channel_settings: Any, fake_osascript: FakeOsascript
) -> None:
    fake_osascript.mode("fail-participant-once")
    egress = build_imessage_egress(channel_settings())

    egress.send("someone@example.com", "first")
    egress.send("someone@example.com", "second")

    calls = fake_osascript.calls()
    assert [c["stdin"] for c in calls] == [PARTICIPANT_SCRIPT, BUDDY_SCRIPT, PARTICIPANT_SCRIPT]
    assert [c["argv"] for c in calls][1:] == [
        ["-", "someone@example.com", "first"],
        ["-", "someone@example.com", "second"],
    ]


# --- delivery: only chat.db says a text went out ---------------------------------------------------------------------


def test_a_send_is_confirmed_by_its_row_in_chat_db(channel_settings: Any, fake_osascript: FakeOsascript) -> None:
    delivery = build_imessage_egress(channel_settings()).deliver("+15551234567", "hello")
    assert delivery.confirmed and delivery.note == "Messages shows it as sent"


@pytest.mark.parametrize(
    ("mode", "rows", "why"),
    [
        ("ok", "none", r"no trace of it in .*chat\.db after 1 s"),
        ("fail-participant", "none-for-buddy", r"no trace of it in .*chat\.db after 1 s"),  # buddy: exit 0, nothing
        ("ok", "error", r"Messages could not send it \(chat\.db row \d+ has error 22\)"),
    ],
    ids=["exit-0-without-a-row", "buddy-delivers-nothing", "row-with-an-error"],
)
def test_a_send_without_a_good_row_in_chat_db_did_not_go_out(
    channel_settings: Any, fake_osascript: FakeOsascript, mode: str, rows: str, why: str
) -> None:
    fake_osascript.mode(mode)
    fake_osascript.rows(rows)
    with pytest.raises(SendError, match=why):
        build_imessage_egress(channel_settings(send_retries=2)).send("+15551234567", "hello")
    assert len(fake_osascript.calls()) == (2 if mode == "fail-participant" else 1)  # exit 0 is never resent


def test_a_row_messages_has_not_sent_yet_is_handed_over_not_failed(
    channel_settings: Any, fake_osascript: FakeOsascript
) -> None:
    fake_osascript.rows("queued")
    delivery = build_imessage_egress(channel_settings()).deliver("+15551234567", "hello")
    assert not delivery.confirmed and delivery.note.startswith("Messages has it (chat.db row ")
    assert "has not sent it yet" in delivery.note


def test_without_a_readable_chat_db_a_send_is_handed_over_unconfirmed(
    channel_settings: Any, fake_osascript: FakeOsascript, tmp_path: Any
) -> None:
    settings = channel_settings(messages_db_path=tmp_path / "elsewhere" / "chat.db")
    delivery = build_imessage_egress(settings).deliver("+15551234567", "hello")
    assert not delivery.confirmed and delivery.note.startswith("not confirmed: ")
    assert "does not exist" in delivery.note


def test_sms_senders_are_answered_through_the_sms_account(channel_settings: Any, fake_osascript: FakeOsascript) -> None:
    delivery = build_imessage_egress(channel_settings()).deliver("SMS;-;+15557654321", "hello by text")
    (call,) = fake_osascript.calls()
    assert call["argv"] == ["-", "+15557654321", "hello by text"]
    assert call["stdin"] == SMS_SCRIPT and "1st account whose service type = SMS" in call["stdin"]
    assert delivery.confirmed


def test_a_group_reply_goes_into_the_group_by_its_chat_id(channel_settings: Any, fake_osascript: FakeOsascript) -> None:
    # macOS 26 stores group guids as any;+;chat… and refuses them (-1728); the iMessage;+; form is the reported fix.
    fake_osascript.mode("fail-any-guid")
    delivery = build_imessage_egress(channel_settings()).deliver("any;+;chat493827163", "hello group")
    calls = fake_osascript.calls()
    assert [c["argv"] for c in calls] == [
        ["-", "any;+;chat493827163", "hello group"],
        ["-", "iMessage;+;chat493827163", "hello group"],
    ]
    assert all(c["stdin"] == GROUP_SCRIPT for c in calls) and "chat id targetHandle" in GROUP_SCRIPT
    assert delivery.confirmed


def test_a_group_reply_that_cannot_be_sent_says_so(channel_settings: Any, fake_osascript: FakeOsascript) -> None:
    fake_osascript.mode("fail")
    with pytest.raises(SendError, match=r"group chat chat493827163.*macOS 26"):
        build_imessage_egress(channel_settings(send_retries=0)).send("any;+;chat493827163", "hello group")


def test_failures_are_retried_a_bounded_number_of_times(channel_settings: Any, fake_osascript: FakeOsascript) -> None:
    fake_osascript.mode("fail")
    egress = build_imessage_egress(channel_settings(send_retries=2))

    with pytest.raises(SendError, match=r"after 3 attempts.*-1728"):
        egress.send("+15551234567", "hello")

    assert len(fake_osascript.calls()) == 6  # 3 attempts, each trying both forms


def test_a_transient_failure_is_retried_and_succeeds(channel_settings: Any, fake_osascript: FakeOsascript) -> None:
    fake_osascript.mode("fail-once")
    build_imessage_egress(channel_settings()).send("+15551234567", "hello")
    assert [c["stdin"] for c in fake_osascript.calls()] == [PARTICIPANT_SCRIPT, BUDDY_SCRIPT]


def test_retries_back_off(channel_settings: Any, fake_osascript: FakeOsascript) -> None:
    fake_osascript.mode("fail")
    waits: list[float] = []
    egress = build_imessage_egress(channel_settings(send_retries=2, send_retry_backoff_seconds=0.5))
    egress._sleep = waits.append  # the backoff schedule, without waiting for it
    with pytest.raises(SendError):
        egress.send("+15551234567", "hello")
    assert waits == [0.5, 1.0]


def test_missing_automation_permission_is_named_and_not_retried(
    channel_settings: Any, fake_osascript: FakeOsascript
) -> None:
    fake_osascript.mode("deny")
    with pytest.raises(SendError, match=r"Automation"):
        build_imessage_egress(channel_settings()).send("+15551234567", "hello")
    assert len(fake_osascript.calls()) == 1


def test_a_hanging_osascript_is_killed_at_the_timeout(channel_settings: Any, fake_osascript: FakeOsascript) -> None:
    fake_osascript.mode("hang")
    egress = build_imessage_egress(channel_settings(send_timeout_seconds=0.5))
    started = time.monotonic()
    with pytest.raises(SendError, match=r"did not finish within 0.5s"):
        egress.send("+15551234567", "hello")
    assert time.monotonic() - started < 5
    assert len(fake_osascript.calls()) == 1  # a hang is not retried: the text may already have gone out


def test_missing_osascript_says_it_needs_macos(channel_settings: Any, fake_osascript: FakeOsascript) -> None:
    with pytest.raises(SendError, match=r"needs macOS"):
        build_imessage_egress(channel_settings(osascript_command="no-such-osascript")).send("+15551234567", "x")


def test_long_replies_go_out_as_numbered_parts_each_recorded_for_echoes(
    channel_settings: Any, fake_osascript: FakeOsascript, sent_texts: SentTexts
) -> None:
    egress = build_imessage_egress(channel_settings(reply_chunk_chars=200), sent_texts)
    text = "\n\n".join(f"Step {i}: " + "do the thing carefully. " * 5 for i in range(5))

    egress.send("+15551234567", text)

    texts = [c["argv"][2] for c in fake_osascript.calls()]
    assert len(texts) > 1
    assert all(len(t) <= 200 for t in texts)
    assert texts[0].startswith(f"(1/{len(texts)}) ") and texts[-1].startswith(f"({len(texts)}/{len(texts)}) ")
    assert all(sent_texts.take_echo("+15551234567", normalise_text(t)) for t in texts)


def test_a_failed_part_says_how_many_went_out(channel_settings: Any, fake_osascript: FakeOsascript) -> None:
    fake_osascript.mode("fail-after-first")
    egress = build_imessage_egress(channel_settings(reply_chunk_chars=100, send_retries=0))

    with pytest.raises(SendError, match=r"part 2 of \d+; 1 sent"):
        egress.send("+15551234567", "First sentence here is long enough. " * 10)
    assert len(fake_osascript.calls()) == 3  # part 1, then part 2 in both forms


def test_concurrent_replies_to_one_chat_do_not_interleave_their_parts(
    channel_settings: Any, fake_osascript: FakeOsascript
) -> None:
    egress = build_imessage_egress(channel_settings(reply_chunk_chars=100))
    parts, switches = switches_between_two_replies(egress.send, fake_osascript)
    assert parts > 4
    assert switches == 1  # all of one reply, then all of the other


def test_a_slow_send_to_one_chat_does_not_hold_up_another_chat(
    channel_settings: Any, fake_osascript: FakeOsascript, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_OSASCRIPT_HANG", "slow one")  # hangs until the send's timeout kills it
    egress = build_imessage_egress(channel_settings(send_timeout_seconds=4, send_retries=0))
    failed: list[SendError] = []

    def send_slowly() -> None:
        try:
            egress.send("+15551234567", "the slow one")
        except SendError as exc:
            failed.append(exc)

    slow = threading.Thread(target=send_slowly)
    slow.start()
    fake_osascript.wait_for_calls(1)
    delivery = egress.deliver("+15557654321", "another chat")
    assert slow.is_alive()  # still in its osascript: before, the one lock for all chats made this one wait
    assert delivery.confirmed
    slow.join(30)
    assert failed and "did not finish within 4" in str(failed[0])


def test_a_handed_over_text_is_confirmed_later_and_the_next_goes_out_before(
    channel_settings: Any, fake_osascript: FakeOsascript
) -> None:
    fake_osascript.rows("none")  # Messages takes the texts and leaves no row: neither can be confirmed
    egress = build_imessage_egress(channel_settings())
    first = egress.hand_over("+15551234567", "first")
    second = egress.hand_over("+15551234567", "second")  # not held up by the first's confirmation
    assert [c["argv"][2] for c in fake_osascript.calls()] == ["first", "second"]
    assert first.confirm is not None and second.confirm is not None
    with pytest.raises(SendError, match=r"no trace of it in .*chat\.db after 1 s"):
        first.confirm()
    with pytest.raises(SendError, match="no trace"):
        second.confirm()


def test_a_handed_over_text_with_its_row_is_confirmed_with_its_guids(
    channel_settings: Any, fake_osascript: FakeOsascript
) -> None:
    egress = build_imessage_egress(channel_settings(reply_chunk_chars=100))
    handover = egress.hand_over("+15551234567", "A sentence long enough to need parts. " * 4)
    assert handover.confirm is not None and handover.ids is None
    guids = handover.confirm()  # Messages shows each part as sent: their guids, as send returns them
    assert guids is not None and len(guids) == len(fake_osascript.calls()) > 1 and all(guids)


def test_a_progress_line_handed_over_is_confirmed_by_its_row_alone(
    channel_settings: Any, fake_osascript: FakeOsascript
) -> None:
    fake_osascript.rows("queued")  # Messages has the row and has not sent it: enough for a progress line
    egress = build_imessage_egress(channel_settings(send_confirm_seconds=30))
    handover = egress.hand_over("+15551234567", "… working", progress=True)
    assert handover.confirm is not None
    began = time.monotonic()
    handover.confirm()
    assert time.monotonic() - began < 10  # not the 30 s a reply waits for Messages to send it


def test_without_confirmation_nothing_is_left_to_wait_for(
    channel_settings: Any, fake_osascript: FakeOsascript
) -> None:
    egress = build_imessage_egress(channel_settings(send_confirm_seconds=0))
    handover = egress.hand_over("+15551234567", "hello")
    assert handover.confirm is None and handover.ids == ()
    assert [c["argv"][2] for c in fake_osascript.calls()] == ["hello"]


