"""Delivery confirmation off the agent's path, in a real daemon: the real apple-code on the scripted model, a chat.db
with the real schema, and the fake `osascript` leaving (or not) Messages' row for each reply. The sender's next
message starts its agent while an earlier reply is still being confirmed, the replies go out in order, a reply that
is never confirmed is still reported, shutdown waits for confirmations under way, and a kill -9 while they are
pending neither loses nor repeats a reply."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest

from support.chatdb import ChatDbWriter
from support.daemon_process import DaemonProcess, wait_for
from support.scripted_server import ScriptedServer, answer

ANA = "+15551234567"


def stored(agent_daemon: DaemonProcess, sql: str) -> list[Any]:
    with sqlite3.connect(agent_daemon.db_path) as db:
        return db.execute(sql).fetchall()


def states(agent_daemon: DaemonProcess) -> list[str]:
    return [state for (state,) in stored(agent_daemon, "SELECT state FROM messages ORDER BY rowid")]


def replies(agent_daemon: DaemonProcess) -> list[str]:
    return [text for text in agent_daemon.sends_to(ANA) if not text.startswith("… ")]  # not progress lines


def test_the_next_turn_starts_while_a_reply_is_still_being_confirmed_and_a_late_confirmation_counts(
    agent_daemon: DaemonProcess, chat_db: ChatDbWriter
) -> None:
    # Messages stores each reply and is slow to send it: its row stays "not sent yet" until the test says so.
    with ScriptedServer([answer(f"answer {n}") for n in (1, 2, 3)]) as server:
        agent_daemon.start({"APPLE_FLOW_AFM_BASE_URL": server.url, "APPLE_FLOW_SEND_CONFIRM_SECONDS": "120",
                      "FAKE_OSASCRIPT_ROW": "queued"})
        for n in (1, 2, 3):
            chat_db.message(f"question {n}", sender=ANA)
        # Before: the second turn waited for the first reply's confirmation window (120 s) to end.
        wait_for(lambda: len(replies(agent_daemon)) == 3, 60, "three replies handed to Messages")
        assert replies(agent_daemon) == ["answer 1", "answer 2", "answer 3"]  # in order
        assert states(agent_daemon) == ["replied"] * 3  # each still being confirmed
        assert len(stored(agent_daemon, "SELECT id FROM runs")) == 3

        def reply_rows() -> list[int]:  # the fake logs a send before it stores its row
            sql = "SELECT ROWID FROM message WHERE is_from_me = 1 AND text LIKE 'answer %'"
            return [rowid for (rowid,) in chat_db.conn.execute(sql)]

        for rowid in wait_for(lambda: len(reply_rows()) == 3 and reply_rows(), 30, "the replies' rows"):
            chat_db.update(rowid, is_sent=1)  # Messages sends them at last
        wait_for(lambda: states(agent_daemon) == ["sent"] * 3, 30, "the replies to be confirmed")
        assert agent_daemon.terminate() == 0
    assert stored(agent_daemon, "SELECT COUNT(*) FROM events WHERE kind = 'send_failed'") == [(0,)]


def test_a_reply_never_confirmed_is_reported_and_did_not_hold_up_the_next_turn(
    agent_daemon: DaemonProcess, chat_db: ChatDbWriter
) -> None:
    # Messages takes each reply and shows no row for it: each confirmation waits its whole window, then fails.
    with ScriptedServer([answer("answer 1"), answer("answer 2")]) as server:
        agent_daemon.start({"APPLE_FLOW_AFM_BASE_URL": server.url, "APPLE_FLOW_SEND_CONFIRM_SECONDS": "4",
                      "FAKE_OSASCRIPT_ROW": "none"})
        chat_db.message("question 1", sender=ANA)
        chat_db.message("question 2", sender=ANA)
        wait_for(lambda: states(agent_daemon) == ["send_failed"] * 2, 60, "both replies reported as not delivered")
        assert agent_daemon.terminate() == 0

    assert replies(agent_daemon) == ["answer 1", "answer 2"]  # in order, each once (never resent: it may be out)
    # Reported as before the change: the message's state, an event with why, the log.
    failed = stored(agent_daemon, "SELECT at, detail FROM events WHERE kind = 'send_failed' ORDER BY id")
    assert len(failed) == 2 and all("no trace of it in" in detail for _, detail in failed)
    assert agent_daemon.log().count(f"could not send the reply to {ANA}") == 2
    # The second turn started before the first reply's failure was known (before: only after it).
    second_started = stored(agent_daemon, "SELECT started_at FROM runs ORDER BY started_at")[1][0]
    assert second_started < failed[0][0]


def test_shutdown_waits_for_the_confirmations_under_way(agent_daemon: DaemonProcess, chat_db: ChatDbWriter) -> None:
    with ScriptedServer([answer("answer 1")]) as server:
        agent_daemon.start({"APPLE_FLOW_AFM_BASE_URL": server.url, "APPLE_FLOW_SEND_CONFIRM_SECONDS": "8",
                      "FAKE_OSASCRIPT_ROW": "none"})
        rowid = chat_db.message("question 1", sender=ANA)
        wait_for(lambda: replies(agent_daemon), 30, "the reply handed to Messages")
        assert states(agent_daemon) == ["replied"]
        # The turn is over (grace 1 s, then 5 s for killed turns: before, the process ended in the middle of the
        # confirmation, leaving the reply unrecorded).
        assert agent_daemon.terminate() == 0

    assert states(agent_daemon) == ["send_failed"]
    assert stored(agent_daemon, "SELECT COUNT(*) FROM events WHERE kind = 'send_failed'") == [(1,)]
    assert stored(agent_daemon, "SELECT last_rowid FROM cursor")[0][0] >= rowid  # passed: a restart does nothing again


@pytest.mark.parametrize(("rows", "again"), [
    ("queued", []),  # Messages has both: the restart sends neither again
    ("none", ["answer 1", "answer 2"]),  # no trace of either in chat.db: each goes once more, not lost
])
def test_a_kill_9_while_confirmations_are_pending_neither_loses_nor_repeats_a_reply(
    agent_daemon: DaemonProcess, chat_db: ChatDbWriter, rows: str, again: list[str]
) -> None:
    with ScriptedServer([answer("answer 1"), answer("answer 2")]) as server:
        agent_daemon.start({"APPLE_FLOW_AFM_BASE_URL": server.url, "APPLE_FLOW_SEND_CONFIRM_SECONDS": "120",
                      "FAKE_OSASCRIPT_ROW": rows})
        first = chat_db.message("question 1", sender=ANA)
        second = chat_db.message("question 2", sender=ANA)
        # Before: the second turn waited for the first reply's confirmation (120 s).
        wait_for(lambda: len(replies(agent_daemon)) == 2, 60, "both replies handed to Messages")
        agent_daemon.kill9()
    assert states(agent_daemon) == ["replied", "replied"]
    assert stored(agent_daemon, "SELECT last_rowid FROM cursor")[0][0] < first

    before = len(replies(agent_daemon))
    with ScriptedServer([]) as server:
        agent_daemon.start({"APPLE_FLOW_AFM_BASE_URL": server.url, "APPLE_FLOW_SEND_CONFIRM_SECONDS": "2"})
        wait_for(lambda: stored(agent_daemon, "SELECT last_rowid FROM cursor")[0][0] >= second, 30, "both finished")
        assert agent_daemon.terminate() == 0
        assert server.requests() == []  # no turn runs again
    assert replies(agent_daemon)[before:] == again
    assert states(agent_daemon) == ["sent", "sent"]
