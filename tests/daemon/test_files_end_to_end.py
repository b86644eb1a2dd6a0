"""Files both ways through the whole path with real parts: a real `apple-flow run` process, the real apple-code
on the scripted model, a chat.db built from the real schema with real attachment rows and files, and the fake
osascript recording what would be sent."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.chatdb import ChatDbWriter
from support.daemon_process import DaemonProcess, scripted_agent, wait_for
from support.scripted_server import ScriptedServer, answer, tool_call

ANA = "+15551234567"


@pytest.fixture
def attachments(tmp_path: Path) -> Path:
    """The Messages attachments folder of this test."""
    path = tmp_path / "Messages" / "Attachments"
    path.mkdir(parents=True)
    return path


@pytest.fixture
def daemon(
    tmp_path: Path, chat_db: ChatDbWriter, workspace: Path, apple_code_bin: Path, attachments: Path
) -> Iterator[DaemonProcess]:
    process = DaemonProcess(tmp_path / "daemon", chat_db.path, {
        "APPLE_FLOW_ALLOWED_SENDERS": ANA,
        "APPLE_FLOW_MESSAGES_ATTACHMENTS_PATH": str(attachments),
        "APPLE_FLOW_ATTACHMENT_WAIT_SECONDS": "60",
        **scripted_agent(apple_code_bin, workspace),
    })
    yield process
    process.stop()


def replies(daemon: DaemonProcess) -> list[str]:
    return [t for t in daemon.sends_to(ANA) if not t.startswith("… ")]


def test_a_message_of_one_file_alone_reaches_the_agent_which_reads_it_from_the_inbox(
    daemon: DaemonProcess, chat_db: ChatDbWriter, workspace: Path, attachments: Path
) -> None:
    stored = attachments / "4f" / "15" / "C0FFEE-1" / "crash.log"
    content = "Traceback (most recent call last):\nValueError: the answer is 42\n"
    script = [
        tool_call("readFile", {"path": ".apple-flow/inbox/1-1-crash.log"}),
        answer("Your log ends in a ValueError: the answer is 42."),
    ]
    with ScriptedServer(script) as server:
        daemon.start({"APPLE_FLOW_AFM_BASE_URL": server.url})
        # Recorded while Messages still downloads it (transfer_state 3), finished a moment later.
        rowid = chat_db.message("\ufffc", sender=ANA, files=[{
            "filename": "~/Library/Messages/Attachments/4f/15/C0FFEE-1/crash.log", "transfer_name": "crash.log",
            "mime_type": "text/plain", "total_bytes": len(content), "transfer_state": 3,
        }])
        time.sleep(1)
        stored.parent.mkdir(parents=True)
        stored.write_text(content)
        chat_db.update_attachments(rowid, transfer_state=5)
        reply = wait_for(lambda: replies(daemon), 30, "the reply")[0]
        first, second = server.requests()[:2]

    assert reply == "Your log ends in a ValueError: the answer is 42."
    assert (workspace / ".apple-flow" / "inbox" / "1-1-crash.log").read_bytes() == stored.read_bytes()
    prompt = str(first["messages"])
    assert ".apple-flow/inbox/1-1-crash.log" in prompt and "read it with your file tools" in prompt
    assert "ValueError: the answer is 42" in str(second["messages"])  # the agent read the copy with its tool


def test_a_hostile_attachment_path_is_refused_and_the_agent_told(
    daemon: DaemonProcess, chat_db: ChatDbWriter, workspace: Path, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("private\n")
    with ScriptedServer([answer("I could not get your file.")]) as server:
        daemon.start({"APPLE_FLOW_AFM_BASE_URL": server.url})
        chat_db.message("\ufffc", sender=ANA, files=[{"filename": str(secret), "transfer_name": "secret.txt"}])
        wait_for(lambda: replies(daemon), 30, "the reply")
        [request] = server.requests()

    assert "secret.txt: not received (its path in chat.db is outside the Messages attachments folder" in str(
        request["messages"])
    assert list((workspace / ".apple-flow" / "inbox").iterdir()) == []


def test_the_agent_sends_back_the_file_it_wrote_and_nothing_from_outside_the_workspace(
    daemon: DaemonProcess, chat_db: ChatDbWriter, workspace: Path, attachments: Path, tmp_path: Path
) -> None:
    (tmp_path / "secret.txt").write_text("private\n")
    script = [
        tool_call("writeFile", {"path": "report.csv", "content": "day,sales\nmon,3\n"}),
        answer("Here is the report.\nATTACH: report.csv\nATTACH: ../secret.txt"),
    ]
    with ScriptedServer(script) as server:
        daemon.start({"APPLE_FLOW_AFM_BASE_URL": server.url})
        chat_db.message("write a sales report and send me the file", sender=ANA)
        wait_for(lambda: daemon.file_sends(), 30, "the file to be sent")
        [first] = server.requests()[:1]

    assert "ATTACH: <path of the file>" in str(first["messages"])  # the convention, told because it was asked
    [reply] = replies(daemon)
    assert reply == ("Here is the report.\n\nSending: report.csv (16 bytes).\n"
                     "Not sent: ../secret.txt (outside the workspace).")
    [call] = daemon.file_sends()
    handle, staged = call["argv"][1:]
    assert handle == ANA and Path(staged).read_text() == "day,sales\nmon,3\n"
    assert Path(staged).is_relative_to(attachments / "apple-flow")
    assert staged not in call["stdin"] and "POSIX file (item 2 of argv)" in call["stdin"]
