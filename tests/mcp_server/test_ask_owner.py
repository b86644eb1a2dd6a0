"""notify_owner, ask_owner and send_file_to_owner end to end: the MCP SDK's client drives `apple-flow mcp`, which
reaches a real `apple-flow run --channel imessage` process over its socket; the owner answers through chat.db (the
fake Messages writes what the daemon sends, the test writes what the owner does, as Messages would)."""

from __future__ import annotations

import os
import re
import sqlite3
import stat
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession

from support.chatdb import ChatDbWriter
from support.daemon_process import DaemonProcess, MakeDaemon, scripted_agent, wait_for
from support.mcp_client import call, structured, text_of, with_session
from support.scripted_server import ScriptedServer, answer

ANA = "+15551234567"  # the owner: the first allowed sender
BOB = "+15557654321"
LIKE, DISLIKE = 2001, 2002


@pytest.fixture
def model() -> Iterator[ScriptedServer]:
    with ScriptedServer([answer("Hello Bob.")]) as server:
        yield server


@pytest.fixture
def owner_daemon(new_daemon: MakeDaemon, tmp_path: Path, workspace: Path, apple_code_bin: Path,
                 model: ScriptedServer) -> DaemonProcess:
    """The daemon `apple-flow mcp` reaches: Ana (the owner) and Bob allowed, the scripted model given."""
    return new_daemon({
        "APPLE_FLOW_ALLOWED_SENDERS": f"{ANA},{BOB}", **scripted_agent(apple_code_bin, workspace),
        "APPLE_FLOW_AFM_BASE_URL": model.url, "APPLE_FLOW_WEB_ENABLED": "false",
        # Files to send are staged there (as Messages needs): inside this test's folder, not the home folder's.
        "APPLE_FLOW_MESSAGES_ATTACHMENTS_PATH": str(tmp_path / "Messages" / "Attachments"),
    })


@pytest.fixture
def mcp(tmp_path: Path, owner_daemon: DaemonProcess, workspace: Path) -> Callable[..., Any]:
    """Runs ``body(session)`` against `apple-flow mcp` with the daemon's settings (its database, so its socket)."""
    def run(body: Callable[[ClientSession], Any]) -> Any:
        env = {"APPLE_FLOW_DB_PATH": str(owner_daemon.db_path), "APPLE_FLOW_DEFAULT_WORKSPACE": str(workspace),
               "APPLE_FLOW_ALLOWED_SENDERS": f"{ANA},{BOB}"}
        return with_session(env, tmp_path, body)

    return run


def questions_to(owner_daemon: DaemonProcess, who: str) -> list[str]:
    return [text for text in owner_daemon.sends_to(who) if text.startswith("An agent asks")]


def question_row(chat_db: ChatDbWriter, owner_daemon: DaemonProcess, number: int) -> tuple[str, str]:
    """Waits until the ``number``-th question (from 1) was texted to the owner and noted for tapbacks: its id and
    the guid Messages gave it."""
    text = wait_for(lambda: questions_to(owner_daemon, ANA)[number - 1:number], 30, f"question {number}")[0]
    found = re.search(r"\((q_[0-9a-f]{8})\)", text)
    assert found is not None, text

    def guid() -> str | None:
        row = chat_db.conn.execute(
            "SELECT guid FROM message WHERE is_from_me = 1 AND text = ? ORDER BY ROWID DESC", (text,)).fetchone()
        return str(row[0]) if row else None

    message = str(wait_for(guid, 10, "the question's row"))
    wait_for(lambda: noted(owner_daemon, message), 30, "the question's message to be noted")
    return found.group(1), message


def noted(owner_daemon: DaemonProcess, guid: str) -> bool:
    with sqlite3.connect(owner_daemon.db_path) as db:
        return bool(db.execute("SELECT 1 FROM approval_messages WHERE message_id = ?", (guid,)).fetchall())


def state_of(owner_daemon: DaemonProcess, question: str) -> str:
    with sqlite3.connect(owner_daemon.db_path) as db:
        return str(db.execute("SELECT state FROM approvals WHERE id = ?", (question,)).fetchone()[0])


def tapback(chat_db: ChatDbWriter, kind: int, guid: str, sender: str = ANA) -> int:
    return chat_db.message(f'Reacted to "{guid}"', sender=sender, associated_message_type=kind,
                           associated_message_guid=f"p:0/{guid}")


class Background:
    """``work`` on a thread of its own (the MCP session), while the test's thread plays the owner on chat.db (whose
    connection belongs to the test's thread)."""

    def __init__(self, work: Callable[[], Any]) -> None:
        self._result: list[Any] = []
        self._error: list[BaseException] = []
        self._thread = threading.Thread(target=self._run, args=(work,), daemon=True)
        self._thread.start()

    def _run(self, work: Callable[[], Any]) -> None:
        try:
            self._result.append(work())
        except BaseException as exc:
            self._error.append(exc)

    def result(self, timeout: float = 60) -> Any:
        self._thread.join(timeout)
        if self._error:
            raise self._error[0]
        assert self._result, f"the MCP session did not end within {timeout} s"
        return self._result[0]


async def ask(session: ClientSession, arguments: dict[str, Any]) -> Any:
    return (await call(session, "ask_owner", arguments))[0]


def test_only_the_owners_imessage_answer_counts(
    owner_daemon: DaemonProcess, chat_db: ChatDbWriter, mcp: Callable[..., Any], model: ScriptedServer
) -> None:
    owner_daemon.start()

    async def body(session: ClientSession) -> list[Any]:
        return [
            await ask(session, {"question": "May I delete build/?", "details": "It holds 2 GB."}),
            await ask(session, {"question": "Deploy?"}),
            await ask(session, {"question": "Drop the table?"}),
            await ask(session, {"question": "Anything to keep?"}),
        ]

    session = Background(lambda: mcp(body))
    question, guid = question_row(chat_db, owner_daemon, 1)
    tapback(chat_db, LIKE, guid, sender=BOB)  # another allowed sender
    chat_db.message(f"approve {question}", sender=ANA, service="SMS")  # an SMS, forgeable
    chat_db.message(f"approve {question}", sender=ANA, chat="chat493827163")  # a group chat
    bob_chat = chat_db.message("hello", sender=BOB)  # another sender's plain text: his own chat turn
    owner_daemon.wait_passed(bob_chat)
    wait_for(lambda: owner_daemon.sends_to(BOB), 30, "Bob's answer")
    assert state_of(owner_daemon, question) == "pending"
    tapback(chat_db, LIKE, guid)
    for number, verb in ((2, "approve"), (3, "deny")):
        question, _ = question_row(chat_db, owner_daemon, number)
        chat_db.message(f"{verb} {question}", sender=ANA)
    question_row(chat_db, owner_daemon, 4)
    chat_db.message("Yes, but keep the logs.", sender=ANA)

    liked, approved, denied, answered = [structured(result) for result in session.result()]
    assert liked["outcome"] == "approved" and approved["outcome"] == "approved"
    assert denied["outcome"] == "denied"
    assert answered == {"id": answered["id"], "outcome": "answered", "answer": "Yes, but keep the logs."}
    first = questions_to(owner_daemon, ANA)[0]
    assert "May I delete build/?\nIt holds 2 GB." in first and f"approve {liked['id']}" in first
    assert questions_to(owner_daemon, BOB) == []
    assert [text for text in owner_daemon.sends_to(BOB) if not text.startswith("… ")] == ["Hello Bob."]
    assert f"Passed your answer to {answered['id']} on to the agent." in owner_daemon.sends_to(ANA)
    assert len(model.requests()) == 1  # only Bob's chat ran the agent: no answer did


@pytest.mark.slow
def test_a_question_open_across_a_restart_is_answered_after_it_and_one_left_alone_times_out(
    owner_daemon: DaemonProcess, chat_db: ChatDbWriter, mcp: Callable[..., Any]
) -> None:
    owner_daemon.start()

    async def body(session: ClientSession) -> list[Any]:
        across = await ask(session, {"question": "Rebase main?", "timeout_seconds": 120})
        alone = await ask(session, {"question": "Still there?", "timeout_seconds": 1})
        return [across, alone]

    session = Background(lambda: mcp(body))
    _, guid = question_row(chat_db, owner_daemon, 1)
    owner_daemon.terminate()
    owner_daemon.start()
    tapback(chat_db, DISLIKE, guid)

    across, alone = [structured(result) for result in session.result()]
    assert across["outcome"] == "denied"
    assert alone["outcome"] == "timed-out" and alone["answer"] is None
    assert state_of(owner_daemon, alone["id"]) == "pending"  # expired, never decided: gone from the approvals list


def test_notify_and_send_a_file_and_the_socket_is_the_owners_only(
    owner_daemon: DaemonProcess, mcp: Callable[..., Any], workspace: Path, tmp_path: Path
) -> None:
    owner_daemon.start()
    socket = owner_daemon.db_path.parent / "owner.sock"
    assert stat.S_IMODE(os.stat(socket).st_mode) == 0o600
    (workspace / "report.txt").write_text("all good\n")
    (tmp_path / "secret.txt").write_text("no\n")

    async def body(session: ClientSession) -> list[Any]:
        return [
            (await call(session, "notify_owner", {"text": "Build finished."}))[0],
            (await call(session, "send_file_to_owner", {"path": str(workspace / "report.txt")}))[0],
            (await call(session, "send_file_to_owner", {"path": str(tmp_path / "secret.txt")}))[0],
        ]

    notified, sent, refused = mcp(body)
    assert structured(notified) == {"sent": True} and structured(sent)["sent"] is True
    assert owner_daemon.sends_to(ANA)[-1] == "Build finished."
    files = owner_daemon.file_sends()
    assert len(files) == 1 and files[0]["argv"][1] == ANA
    staged = Path(files[0]["argv"][2])
    assert staged.name == "report.txt" and staged.is_relative_to(tmp_path / "Messages" / "Attachments")
    assert refused.is_error and "may not be sent" in text_of(refused)


def test_without_a_running_daemon_the_tools_say_so(owner_daemon: DaemonProcess, mcp: Callable[..., Any]) -> None:
    async def body(session: ClientSession) -> list[Any]:
        return [(await call(session, name, arguments))[0] for name, arguments in (
            ("notify_owner", {"text": "hi"}), ("ask_owner", {"question": "ok?"}),
            ("send_file_to_owner", {"path": "/x"}),
        )]

    for result in mcp(body):
        assert result.is_error and "apple-flow's daemon is not running" in text_of(result)
