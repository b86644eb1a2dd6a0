"""Delivery confirmation off the agent's path, in a real daemon (the real apple-code on the scripted server, a fake
`osascript` that leaves no row in chat.db, as when Messages is slow to show a reply): the sender's next message
starts its agent while the earlier reply is still being confirmed, the replies go out in order, and each reply
that is never confirmed is still reported as not delivered."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from support.chatdb import ChatDbWriter
from support.daemon_process import DaemonProcess, wait_for
from support.scripted_server import ScriptedServer, answer

ANA = "+15551234567"
CONFIRM_SECONDS = 4


def states(daemon: DaemonProcess) -> dict[int, str]:
    with sqlite3.connect(daemon.db_path) as db:
        return dict(db.execute("SELECT rowid, state FROM messages WHERE channel = 'imessage'").fetchall())


def runs_started(daemon: DaemonProcess) -> int:
    with sqlite3.connect(daemon.db_path) as db:
        return int(db.execute("SELECT COUNT(*) FROM runs").fetchone()[0])


def test_the_next_turn_starts_while_a_reply_is_still_being_confirmed(
    chat_db: ChatDbWriter, tmp_path: Path, apple_code_bin: Path
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with ScriptedServer([answer(f"answer {n}") for n in (1, 2, 3)]) as server:
        daemon = DaemonProcess(tmp_path / "daemon", chat_db.path, {
            "APPLE_FLOW_ALLOWED_SENDERS": ANA, "APPLE_FLOW_DEFAULT_WORKSPACE": str(workspace),
            "APPLE_FLOW_AFM_COMMAND": str(apple_code_bin), "APPLE_FLOW_AFM_BACKEND": "openai",
            "APPLE_FLOW_AFM_MODEL": "scripted", "APPLE_FLOW_AFM_BASE_URL": server.url,
            "APPLE_FLOW_SEND_CONFIRM_SECONDS": str(CONFIRM_SECONDS),
        })
        try:
            daemon.start({"FAKE_OSASCRIPT_ROW": "none"})  # Messages takes each reply and shows no row for it
            rowids = [chat_db.message(f"question {n}", sender=ANA) for n in (1, 2, 3)]
            wait_for(lambda: runs_started(daemon) == 3, 3 * CONFIRM_SECONDS, "three turns to start")
            # Before: the second turn waited for the first reply's confirmation window to end.
            assert states(daemon)[rowids[0]] == "replied"  # the first reply: sent, still being confirmed
            wait_for(lambda: set(states(daemon).values()) == {"send_failed"}, 4 * CONFIRM_SECONDS,
                     "each reply to be reported as not delivered")
            replies = [text for text in daemon.sends_to(ANA) if not text.startswith("…")]  # not progress
            assert replies == ["answer 1", "answer 2", "answer 3"]  # in order
            assert daemon.log().count(f"could not send the reply to {ANA}") == 3
            assert "no trace of it in" in daemon.log()
        finally:
            daemon.stop()
