"""Files both ways through the whole path with real parts: a real `apple-flow run` process, the real apple-code
on the scripted model, a chat.db built from the real schema with real attachment rows and files, and the fake
osascript recording what would be sent."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from support.chatdb import ChatDbWriter
from support.daemon_process import DaemonProcess, MakeDaemon, scripted_agent, wait_for
from support.scripted_server import ScriptedServer, answer, tool_call

ANA = "+15551234567"


@pytest.fixture
def files_daemon(new_daemon: MakeDaemon, workspace: Path, apple_code_bin: Path,
                 attachments: Path) -> DaemonProcess:
    """The scripted agent's daemon with the test's own Messages attachments folder."""
    return new_daemon({
        "APPLE_FLOW_ALLOWED_SENDERS": ANA,
        "APPLE_FLOW_MESSAGES_ATTACHMENTS_PATH": str(attachments),
        "APPLE_FLOW_ATTACHMENT_WAIT_SECONDS": "60",
        **scripted_agent(apple_code_bin, workspace),
    })


def replies(files_daemon: DaemonProcess) -> list[str]:
    return [t for t in files_daemon.sends_to(ANA) if not t.startswith("… ")]


def test_a_message_of_one_file_alone_reaches_the_agent_which_reads_it_from_the_inbox(
    files_daemon: DaemonProcess, chat_db: ChatDbWriter, workspace: Path, attachments: Path
) -> None:
    stored = attachments / "4f" / "15" / "C0FFEE-1" / "crash.log"
    content = "Traceback (most recent call last):\nValueError: the answer is 42\n"
    script = [
        tool_call("readFile", {"path": ".apple-flow/inbox/1-1-crash.log"}),
        answer("Your log ends in a ValueError: the answer is 42."),
    ]
    with ScriptedServer(script) as server:
        files_daemon.start({"APPLE_FLOW_AFM_BASE_URL": server.url})
        # Recorded while Messages still downloads it (transfer_state 3), finished a moment later.
        rowid = chat_db.message("\ufffc", sender=ANA, files=[{
            "filename": "~/Library/Messages/Attachments/4f/15/C0FFEE-1/crash.log", "transfer_name": "crash.log",
            "mime_type": "text/plain", "total_bytes": len(content), "transfer_state": 3,
        }])
        wait_for(lambda: files_daemon.message_states().get(rowid) == "taken", 20, "the daemon to take the message")
        stored.parent.mkdir(parents=True)  # it waits for the download meanwhile
        stored.write_text(content)
        chat_db.update_attachments(rowid, transfer_state=5)
        reply = wait_for(lambda: replies(files_daemon), 30, "the reply")[0]
        first, second = server.requests()[:2]

    assert reply == "Your log ends in a ValueError: the answer is 42."
    assert (workspace / ".apple-flow" / "inbox" / "1-1-crash.log").read_bytes() == stored.read_bytes()
    prompt = str(first["messages"])
    assert ".apple-flow/inbox/1-1-crash.log" in prompt and "read it with your file tools" in prompt
    assert "ValueError: the answer is 42" in str(second["messages"])  # the agent read the copy with its tool


def test_a_hostile_attachment_path_is_refused_and_the_agent_told(
    files_daemon: DaemonProcess, chat_db: ChatDbWriter, workspace: Path, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("private\n")
    with ScriptedServer([answer("I could not get your file.")]) as server:
        files_daemon.start({"APPLE_FLOW_AFM_BASE_URL": server.url})
        chat_db.message("\ufffc", sender=ANA, files=[{"filename": str(secret), "transfer_name": "secret.txt"}])
        wait_for(lambda: replies(files_daemon), 30, "the reply")
        [request] = server.requests()

    assert "secret.txt: not received (its path in chat.db is outside the Messages attachments folder" in str(
        request["messages"])
    assert list((workspace / ".apple-flow" / "inbox").iterdir()) == []


def test_the_agent_sends_back_the_file_it_wrote_and_nothing_from_outside_the_workspace(
    files_daemon: DaemonProcess, chat_db: ChatDbWriter, workspace: Path, attachments: Path, tmp_path: Path
) -> None:
    (tmp_path / "secret.txt").write_text("private\n")
    script = [
        tool_call("writeFile", {"path": "report.csv", "content": "day,sales\nmon,3\n"}),
        answer("Here is the report.\nATTACH: report.csv\nATTACH: ../secret.txt"),
    ]
    with ScriptedServer(script) as server:
        files_daemon.start({"APPLE_FLOW_AFM_BASE_URL": server.url})
        chat_db.message("write a sales report and send me the file", sender=ANA)
        wait_for(lambda: files_daemon.file_sends(), 30, "the file to be sent")
        [first] = server.requests()[:1]

    assert "ATTACH: <path of the file>" in str(first["messages"])  # the convention, told because it was asked
    [reply] = replies(files_daemon)
    assert reply == ("Here is the report.\n\nSending: report.csv (16 bytes).\n"
                     "Not sent: ../secret.txt (outside the workspace).")
    [call] = files_daemon.file_sends()
    handle, staged = call["argv"][1:]
    assert handle == ANA and Path(staged).read_text() == "day,sales\nmon,3\n"
    assert Path(staged).is_relative_to(attachments / "apple-flow")
    assert staged not in call["stdin"] and "POSIX file (read (POSIX file (item 2 of argv))" in call["stdin"]


# ---------------------------------------------------------------------------------------------- kill -9 and files

WRITE_TWO = [
    tool_call("writeFile", {"path": "a.csv", "content": "a\n"}),
    tool_call("writeFile", {"path": "b.csv", "content": "b\n"}),
    answer("Here are both.\nATTACH: a.csv\nATTACH: b.csv"),
]
REPLY = "Here are both.\n\nSending: a.csv (2 bytes), b.csv (2 bytes)."
ASK = "write a.csv and b.csv and send me the files"


def sent_after(files_daemon: DaemonProcess, count: int) -> list[tuple[str, str]]:
    """What went to ANA after the first ``count`` sends: ("text", its words) or ("file", its name), in order."""
    found = []
    for call in files_daemon.calls()[count:]:
        recipient, what = call["argv"][1:3]
        if recipient == ANA:
            found.append(("file", Path(what).name) if "send theFile" in call["stdin"] else ("text", what))
    return found


def stored(files_daemon: DaemonProcess, sql: str) -> list[Any]:
    with sqlite3.connect(files_daemon.db_path) as db:
        return db.execute(sql).fetchall()


def killed_in_the_middle_of(
    files_daemon: DaemonProcess, chat_db: ChatDbWriter, hang: str, then: tuple[str, str]
) -> int:
    """Asks for two files, the send of whatever contains ``hang`` never returning; kill -9 once ``then`` (as
    ``sent_after`` gives it) is being sent. Returns the message's rowid."""
    with ScriptedServer(WRITE_TWO) as server:
        files_daemon.start({"APPLE_FLOW_AFM_BASE_URL": server.url, "FAKE_OSASCRIPT_HANG": hang})
        rowid = chat_db.message(ASK, sender=ANA)
        wait_for(lambda: then in sent_after(files_daemon, 0), 30, f"{then} to be sent")
        files_daemon.kill9()
    return rowid


def restarted(files_daemon: DaemonProcess, rowid: int) -> list[tuple[str, str]]:
    """Restarts the daemon (sending works again) until the cursor passes the message; what it sent."""
    before = len(files_daemon.calls())
    with ScriptedServer([]) as server:
        files_daemon.start({"APPLE_FLOW_AFM_BASE_URL": server.url})
        wait_for(lambda: stored(files_daemon, "SELECT last_rowid FROM cursor")[0][0] >= rowid, 30,
                 "the message finished")
        assert files_daemon.terminate() == 0
        assert server.requests() == []  # the turn is not run again
    return sent_after(files_daemon, before)


def test_a_reply_recorded_before_a_kill_9_goes_at_the_restart_and_then_its_files(
    files_daemon: DaemonProcess, chat_db: ChatDbWriter
) -> None:
    rowid = killed_in_the_middle_of(files_daemon, chat_db, hang="Here are both.", then=("text", REPLY))
    assert stored(files_daemon, "SELECT state FROM messages") == [("replied",)]
    assert stored(files_daemon, "SELECT shown, state FROM reply_files ORDER BY id") == [("a.csv", "pending"),
                                                                                  ("b.csv", "pending")]

    assert restarted(files_daemon, rowid) == [("text", REPLY), ("file", "a.csv"), ("file", "b.csv")]
    assert stored(files_daemon, "SELECT state FROM reply_files") == [("sent",), ("sent",)]


def test_files_cut_short_by_a_kill_9_go_at_the_restart_and_nothing_twice(
    files_daemon: DaemonProcess, chat_db: ChatDbWriter
) -> None:
    rowid = killed_in_the_middle_of(files_daemon, chat_db, hang="/b.csv", then=("file", "b.csv"))
    assert sent_after(files_daemon, 0)[-3:] == [("text", REPLY), ("file", "a.csv"), ("file", "b.csv")]  # b.csv hung
    # The reply's files go right after it; it is marked sent once its confirmation (off the turn's path) is in,
    # and the restart asks chat.db whether it went out rather than send it again.
    assert stored(files_daemon, "SELECT state FROM messages") == [("replied",)]
    assert stored(files_daemon, "SELECT shown, state FROM reply_files ORDER BY id") == [("a.csv", "sent"),
                                                                                  ("b.csv", "pending")]
    assert stored(files_daemon, "SELECT last_rowid FROM cursor")[0][0] < rowid  # not passed while a file is owed

    assert restarted(files_daemon, rowid) == [("file", "b.csv")]


def test_a_file_gone_before_the_restart_is_said_and_nothing_else_is_lost(
    files_daemon: DaemonProcess, chat_db: ChatDbWriter, workspace: Path
) -> None:
    rowid = killed_in_the_middle_of(files_daemon, chat_db, hang="Here are both.", then=("text", REPLY))
    (workspace / "a.csv").unlink()
    (workspace / "b.csv").write_text("b, longer now\n")

    assert restarted(files_daemon, rowid) == [
        ("text", REPLY), ("text", "Could not send a.csv: no such file"), ("file", "b.csv"),
    ]
    assert Path(files_daemon.file_sends()[-1]["argv"][2]).read_text() == "b, longer now\n"  # checked, copied again
    assert stored(files_daemon, "SELECT shown, state, problem FROM reply_files ORDER BY id") == [
        ("a.csv", "not_sent", "no such file"), ("b.csv", "sent", None),
    ]
