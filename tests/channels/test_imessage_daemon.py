"""A real `apple-flow run --channel imessage` process on a real-schema chat.db holding rows as a Mac writes them,
with a fake `osascript` that records each send and leaves its row as Messages does (or refuses it, when told):
what the user sees when a reply does not go out, texting yourself, replays, group chats, SMS senders, unsends."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from apple_flow.daemon.deciding.commands import HELP_TEXT
from support.chatdb import ChatDbWriter, apple_ns, make_body
from support.daemon_process import DaemonProcess, MakeDaemon, wait_for
from support.scripted_server import ScriptedServer, answer

ANA = "+15551234567"


@pytest.fixture
def agentless_daemon(new_daemon: MakeDaemon, tmp_path: Path) -> DaemonProcess:
    """A daemon whose agent is missing: what these tests check happens before any agent runs."""
    return new_daemon({"APPLE_FLOW_ALLOWED_SENDERS": ANA, "APPLE_FLOW_AFM_COMMAND": str(tmp_path / "no-apple-code")})



def reply_to(agentless_daemon: DaemonProcess, chat_db: ChatDbWriter, text: str, starting: str) -> str:
    """The first text sent to ANA after ``text`` arrives that starts with ``starting``."""
    before = len(agentless_daemon.sends_to(ANA))
    chat_db.message(text, sender=ANA)
    found = wait_for(
        lambda: [t for t in agentless_daemon.sends_to(ANA)[before:] if t.startswith(starting)], 20,
        f"the reply to {text!r}",
    )
    return str(found[0])


def test_a_reply_that_failed_for_good_shows_in_the_log_health_and_status(
    agentless_daemon: DaemonProcess, chat_db: ChatDbWriter
) -> None:
    agentless_daemon.start({"FAKE_OSASCRIPT_FAIL": "Commands:"})  # Messages refuses the help text
    assert reply_to(agentless_daemon, chat_db, "help", "Commands:") == HELP_TEXT  # tried, refused

    health = reply_to(agentless_daemon, chat_db, "health", "apple-flow is running")
    assert "Replies not delivered in the last 24 h: 1 (latest at " in health
    assert f"to {ANA}: could not send to {ANA}" in health and "(-1708)" in health
    status = reply_to(agentless_daemon, chat_db, "status", "")
    assert "Not delivered at " in status and "your reply to 'help'" in status and "(-1708)" in status
    assert f"could not send the reply to {ANA}" in agentless_daemon.log()


# --- a real daemon on rows as a Mac writes them -----------------------------------------------------------------------


def test_text_yourself_help_on_macos_26_is_answered_once_and_its_reply_never_answered(
    agentless_daemon: DaemonProcess, chat_db: ChatDbWriter
) -> None:
    # Several devices on macOS 26: your text, and each reply the daemon sends you, exist only as sent rows.
    agentless_daemon.start({"FAKE_OSASCRIPT_OWNER": ANA})
    chat_db.message(None, body=make_body("help"), sender=ANA, is_from_me=True, destination_caller_id=ANA)
    wait_for(lambda: agentless_daemon.sends_to(ANA), 20, "the answer to help")
    agentless_daemon.wait_passed(chat_db.latest_rowid())  # the reply's own row, which the send wrote, read and skipped
    assert agentless_daemon.sends_to(ANA) == [HELP_TEXT]
    states = agentless_daemon.message_states()
    assert list(states.values()) == ["sent"]


def test_text_yourself_with_both_copies_is_answered_once(
    agentless_daemon: DaemonProcess, chat_db: ChatDbWriter
) -> None:
    agentless_daemon.start({"FAKE_OSASCRIPT_OWNER": ANA, "FAKE_OSASCRIPT_SELF_COPY": "1"})
    chat_db.message("help", sender=ANA, is_from_me=True, destination_caller_id=ANA)
    chat_db.message("help", sender=ANA, destination_caller_id=ANA)
    wait_for(lambda: agentless_daemon.sends_to(ANA), 20, "the answer to help")
    agentless_daemon.wait_passed(chat_db.latest_rowid())  # the second copy, and the reply's rows
    assert agentless_daemon.sends_to(ANA) == [HELP_TEXT]


def test_months_of_replayed_history_are_answered_at_no_start(
    agentless_daemon: DaemonProcess, chat_db: ChatDbWriter
) -> None:
    agentless_daemon.start()
    assert agentless_daemon.terminate() == 0
    agentless_daemon.start()  # not the first start: the daemon has a cursor
    months_ago = datetime.now(UTC) - timedelta(days=120)
    replayed = [chat_db.message(f"status {i}", sender=ANA, when=months_ago + timedelta(hours=i)) for i in range(5)]
    assert reply_to(agentless_daemon, chat_db, "help", "Commands:") == HELP_TEXT
    assert agentless_daemon.sends_to(ANA) == [HELP_TEXT]
    assert all(rowid not in agentless_daemon.message_states() for rowid in replayed)


def test_a_group_message_is_skipped_or_answered_into_the_group(
    agentless_daemon: DaemonProcess, chat_db: ChatDbWriter
) -> None:
    agentless_daemon.start()
    chat_db.message("help", sender=ANA, chat="chat493827163")
    assert reply_to(agentless_daemon, chat_db, "health", "apple-flow is running")  # the group message was passed over
    assert not [text for text in agentless_daemon.sends_to(ANA) if text == HELP_TEXT]
    assert agentless_daemon.terminate() == 0

    agentless_daemon.start({"APPLE_FLOW_GROUP_REPLIES": "true"})
    chat_db.message("help", sender=ANA, chat="chat493827163")
    wait_for(lambda: agentless_daemon.sends_to("iMessage;+;chat493827163"), 20, "the reply in the group")
    assert agentless_daemon.sends_to("iMessage;+;chat493827163") == [HELP_TEXT]
    assert HELP_TEXT not in agentless_daemon.sends_to(ANA)  # not answered privately


def test_an_sms_is_not_acted_on_by_default_and_health_counts_it(
    agentless_daemon: DaemonProcess, chat_db: ChatDbWriter
) -> None:
    agentless_daemon.start()
    chat_db.message("help", sender=ANA, service="SMS")
    assert "Not acted on: 1 SMS/RCS message" in reply_to(agentless_daemon, chat_db, "health", "apple-flow is running")
    assert HELP_TEXT not in agentless_daemon.sends_to(ANA)
    assert not [call for call in agentless_daemon.calls() if "service type = SMS" in call["stdin"]]


def test_an_sms_sender_is_answered_through_the_sms_account(
    agentless_daemon: DaemonProcess, chat_db: ChatDbWriter
) -> None:
    agentless_daemon.start({"APPLE_FLOW_ALLOW_SMS": "true"})
    chat_db.message("help", sender=ANA, service="SMS")
    wait_for(lambda: agentless_daemon.sends_to(ANA), 20, "the answer")
    (call,) = agentless_daemon.calls()
    assert "1st account whose service type = SMS" in call["stdin"] and call["argv"][1:] == [ANA, HELP_TEXT]


def test_a_reply_messages_could_not_send_is_reported_not_trusted(
    agentless_daemon: DaemonProcess, chat_db: ChatDbWriter
) -> None:
    agentless_daemon.start({"FAKE_OSASCRIPT_ROW": "error"})  # osascript exits 0; Messages' row says error 22
    chat_db.message("help", sender=ANA)
    wait_for(lambda: "send_failed" in agentless_daemon.message_states().values(), 20, "the failed send")
    assert "Messages could not send it (chat.db row" in agentless_daemon.log()


def test_a_reply_messages_stored_before_a_kill_9_is_not_sent_again(
    agentless_daemon: DaemonProcess, chat_db: ChatDbWriter
) -> None:
    # The daemon dies after Messages stored the reply but before it could record it as sent: chat.db says it went.
    agentless_daemon.start({"FAKE_OSASCRIPT_LINGER": "5"})
    request = chat_db.message("help", sender=ANA)
    wait_for(lambda: sent_rows(chat_db) == [HELP_TEXT], 20, "the reply's row in chat.db")
    agentless_daemon.kill9()
    assert agentless_daemon.message_states() == {request: "replied"}
    agentless_daemon.start()
    wait_for(lambda: agentless_daemon.message_states().get(request) == "sent", 20, "the reply to be known as sent")
    assert agentless_daemon.sends_to(ANA) == [HELP_TEXT] and sent_rows(chat_db) == [HELP_TEXT]


def sent_rows(chat_db: ChatDbWriter) -> list[str]:
    return [row[0] for row in chat_db.conn.execute("SELECT text FROM message WHERE is_from_me = 1 ORDER BY ROWID")]


def test_a_queued_task_or_approve_unsent_before_it_ran_is_not_run(
    chat_db: ChatDbWriter, tmp_path: Path, apple_code_bin: Path
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    script = [answer("1. Create hello.txt."), answer("slow chat answer", delay=4), answer("should never run")]
    with ScriptedServer(script) as server:
        daemon = DaemonProcess(tmp_path / "daemon", chat_db.path, {
            "APPLE_FLOW_ALLOWED_SENDERS": ANA, "APPLE_FLOW_DEFAULT_WORKSPACE": str(workspace),
            "APPLE_FLOW_AFM_COMMAND": str(apple_code_bin), "APPLE_FLOW_AFM_BACKEND": "openai",
            "APPLE_FLOW_AFM_MODEL": "scripted", "APPLE_FLOW_AFM_BASE_URL": server.url,
            "APPLE_FLOW_AFM_PLAN_TASKS": "false",
        })
        try:
            daemon.start()
            plan = reply_to(daemon, chat_db, "task: add hello.txt", "Plan (")
            request = re.search(r"approve (req_[0-9a-f]{8})", plan)
            assert request is not None
            chat_db.message("tell me a story", sender=ANA)  # a slow turn: what follows waits behind it
            wait_for(lambda: len(server.requests()) == 2, 20, "the slow turn to start")
            approve = chat_db.message(f"approve {request.group(1)}", sender=ANA)
            task = chat_db.message("task: delete everything", sender=ANA)
            wait_for(lambda: any(t.startswith("Approved") for t in daemon.sends_to(ANA)), 20, "the approval")
            for rowid in (approve, task):  # unsent while waiting
                chat_db.update(rowid, date_retracted=apple_ns(datetime.now(UTC)), text=None)
            note = wait_for(lambda: [t for t in daemon.sends_to(ANA) if t.startswith("Not run")], 20, "the note")
            daemon.wait_passed(task)
            assert len(server.requests()) == 2  # neither the approved task nor the new one ran
            assert note == [f"Not run: you unsent `approve {request.group(1)}` before it started. "
                            f"{request.group(1)} is pending again."]
            states = daemon.message_states()
            assert states[approve] == "sent" and states[task] == "sent"
            assert "Awaiting approval: " + request.group(1) in reply_to(daemon, chat_db, "status", "")
        finally:
            daemon.stop()


# --- what was taken is remembered across restarts ---------------------------------------------------------------------


def test_the_second_copy_of_a_text_to_yourself_arriving_after_a_restart_is_not_run_again(
    agentless_daemon: DaemonProcess, chat_db: ChatDbWriter
) -> None:
    agentless_daemon.start({"FAKE_OSASCRIPT_OWNER": ANA})
    chat_db.message("help", sender=ANA, is_from_me=True, destination_caller_id=ANA)
    wait_for(lambda: agentless_daemon.sends_to(ANA), 20, "the answer to help")
    wait_for(lambda: list(agentless_daemon.message_states().values()) == ["sent"], 20,
             "the answer to be recorded as sent")
    agentless_daemon.kill9()
    agentless_daemon.start({"FAKE_OSASCRIPT_OWNER": ANA})
    chat_db.message("help", sender=ANA, destination_caller_id=ANA)  # the received copy, synced late
    # Read after the copy, so the copy was read.
    assert reply_to(agentless_daemon, chat_db, "health", "apple-flow is running")
    assert agentless_daemon.sends_to(ANA).count(HELP_TEXT) == 1


def test_a_row_re_inserted_with_its_guid_after_a_restart_is_not_run_again(
    agentless_daemon: DaemonProcess, chat_db: ChatDbWriter
) -> None:
    agentless_daemon.start()
    first = chat_db.message("help", sender=ANA, guid="6B1F0A52-BBBB")
    wait_for(lambda: agentless_daemon.message_states().get(first) == "sent", 20, "the answer to help")
    assert agentless_daemon.terminate() == 0
    agentless_daemon.start()
    chat_db.conn.execute("DELETE FROM message WHERE ROWID = ?", (first,))  # iCloud deletes and re-inserts it
    again = chat_db.message("help", sender=ANA, guid="6B1F0A52-BBBB")
    assert reply_to(agentless_daemon, chat_db, "health", "apple-flow is running")
    assert agentless_daemon.sends_to(ANA).count(HELP_TEXT) == 1
    assert again not in agentless_daemon.message_states()
