"""What the user sees when a reply does not go out: a real `apple-flow run --channel imessage` process on a
real-schema chat.db, with a fake `osascript` recording (and, when told, refusing) each send."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from apple_flow.daemon.commands import HELP_TEXT
from support.chatdb import ChatDbWriter
from support.daemon_process import DaemonProcess, wait_for

ANA = "+15551234567"


@pytest.fixture
def daemon(tmp_path: Path, chat_db: ChatDbWriter) -> Iterator[DaemonProcess]:
    process = DaemonProcess(
        tmp_path / "daemon", chat_db.path,
        {"APPLE_FLOW_ALLOWED_SENDERS": ANA, "APPLE_FLOW_AFM_COMMAND": str(tmp_path / "no-apple-code")},
    )
    yield process
    process.stop()


def reply_to(daemon: DaemonProcess, chat_db: ChatDbWriter, text: str, starting: str) -> str:
    """The first text sent to ANA after ``text`` arrives that starts with ``starting``."""
    before = len(daemon.sends_to(ANA))
    chat_db.message(text, sender=ANA)
    found = wait_for(
        lambda: [t for t in daemon.sends_to(ANA)[before:] if t.startswith(starting)], 20, f"the reply to {text!r}"
    )
    return str(found[0])


def test_a_reply_that_failed_for_good_shows_in_the_log_health_and_status(
    daemon: DaemonProcess, chat_db: ChatDbWriter
) -> None:
    daemon.start({"FAKE_OSASCRIPT_FAIL": "Commands:"})  # Messages refuses the help text
    assert reply_to(daemon, chat_db, "help", "Commands:") == HELP_TEXT  # tried, refused

    health = reply_to(daemon, chat_db, "health", "apple-flow is running")
    assert "Replies not delivered in the last 24 h: 1 (latest at " in health
    assert f"to {ANA}: could not send to {ANA}" in health and "(-1708)" in health
    status = reply_to(daemon, chat_db, "status", "")
    assert "Not delivered at " in status and "your reply to 'help'" in status and "(-1708)" in status
    assert f"could not send the reply to {ANA}" in daemon.log()
