"""The conversation on a phone, through a real `apple-flow run --channel imessage` process on a real-schema chat.db
(the fake osascript leaves each send's row, with its guid, as Messages does) and, where a task runs, the real
apple-code on the scripted model: a tapback on the plan's message approves or denies it; messages from while the Mac
slept are listed once and run on `run`; a file whose send leaves no row in chat.db is said to have failed."""

from __future__ import annotations

import re
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from support.chatdb import ChatDbWriter
from support.daemon_process import DaemonProcess, MakeDaemon, scripted_agent, wait_for
from support.scripted_server import ScriptedServer, answer, tool_call

ANA = "+15551234567"
BOB = "+15557654321"
LIKE, LOVE, DISLIKE, REMOVED_LIKE = 2001, 2000, 2002, 3001


@pytest.fixture
def two_sender_daemon(new_daemon: MakeDaemon, workspace: Path, apple_code_bin: Path) -> DaemonProcess:
    """The scripted agent's daemon for two allowed senders, Ana and Bob."""
    return new_daemon({
        "APPLE_FLOW_ALLOWED_SENDERS": f"{ANA},{BOB}", **scripted_agent(apple_code_bin, workspace),
    })


def texts_to(two_sender_daemon: DaemonProcess, who: str, after: int = 0) -> list[str]:
    """The texts sent to ``who`` (not progress lines), from the ``after``-th on."""
    return [t for t in two_sender_daemon.sends_to(who) if not t.startswith("… ")][after:]


def sent_guid(chat_db: ChatDbWriter, starting: str) -> str:
    """The guid of the row Messages (the fake) stored for the daemon's newest text starting with ``starting``
    (waited for: the fake records the call before it writes the row)."""
    def newest() -> str | None:
        row = chat_db.conn.execute(
            "SELECT guid FROM message WHERE is_from_me = 1 AND text LIKE ? ORDER BY ROWID DESC", (f"{starting}%",)
        ).fetchone()
        return str(row[0]) if row else None

    return str(wait_for(newest, 10, f"the sent row starting with {starting!r}"))


def tapback(chat_db: ChatDbWriter, kind: int, guid: str, sender: str = ANA, prefix: str = "p:0/") -> int:
    return chat_db.message(f'Reacted to "{guid}"', sender=sender, associated_message_type=kind,
                           associated_message_guid=f"{prefix}{guid}")


def approval_state(two_sender_daemon: DaemonProcess, approval_id: str) -> str:
    with sqlite3.connect(two_sender_daemon.db_path) as db:
        return str(db.execute("SELECT state FROM approvals WHERE id = ?", (approval_id,)).fetchone()[0])


def plan_of(two_sender_daemon: DaemonProcess, chat_db: ChatDbWriter, task: str) -> tuple[str, str]:
    """Sends ``task`` and waits for the plan: (its approval id, the guid of the plan's message)."""
    before = len(texts_to(two_sender_daemon, ANA))
    chat_db.message(task, sender=ANA)
    plan = wait_for(
        lambda: [t for t in texts_to(two_sender_daemon, ANA, before) if t.startswith("Plan (")], 30, "the plan"
    )[0]
    assert "like this message to approve it, dislike it to deny" in plan
    found = re.search(r"approve (req_[0-9a-f]{8})", plan)
    assert found is not None
    guid = sent_guid(chat_db, "Plan (")
    # Noted once the send is confirmed: a person's tapback comes later than this test's could.
    wait_for(lambda: known_plan_message(two_sender_daemon, guid), 30, "the plan's message to be noted with its request")
    return found.group(1), guid


def known_plan_message(two_sender_daemon: DaemonProcess, guid: str) -> bool:
    with sqlite3.connect(two_sender_daemon.db_path) as db:
        return bool(db.execute("SELECT 1 FROM approval_messages WHERE message_id = ?", (guid,)).fetchall())


STATUS_STARTS = ("Running for", "Queued:", "Awaiting approval", "Not delivered", "File not sent", "Recent:",
                 "Nothing running")


def quiet(two_sender_daemon: DaemonProcess, chat_db: ChatDbWriter, sent: int) -> list[str]:
    """What went to ANA after the first ``sent`` texts and before the answer to a `status` sent now (every row
    before it has been handled by then)."""
    chat_db.message("status", sender=ANA)
    wait_for(lambda: any(t.startswith(STATUS_STARTS) for t in texts_to(two_sender_daemon, ANA, sent)), 30, "the status")
    texts = texts_to(two_sender_daemon, ANA, sent)
    return texts[:next(i for i, t in enumerate(texts) if t.startswith(STATUS_STARTS))]


def test_a_like_from_the_asker_on_the_plan_approves_it_and_nothing_else_does(
    two_sender_daemon: DaemonProcess, chat_db: ChatDbWriter, workspace: Path
) -> None:
    script = [answer("1. Create hello.txt."), tool_call("writeFile", {"path": "hello.txt", "content": "hi\n"}),
              answer("Created hello.txt.")]
    with ScriptedServer(script) as server:
        two_sender_daemon.start({"APPLE_FLOW_AFM_BASE_URL": server.url})
        chat_db.message("help", sender=ANA)
        wait_for(lambda: texts_to(two_sender_daemon, ANA), 30, "the answer to help")
        request, guid = plan_of(two_sender_daemon, chat_db, "task: add hello.txt")
        sent = len(texts_to(two_sender_daemon, ANA))

        tapback(chat_db, LIKE, guid, sender=BOB)  # someone else's
        tapback(chat_db, LIKE, sent_guid(chat_db, "Commands:"))  # the asker's, on another message
        tapback(chat_db, REMOVED_LIKE, guid)  # a removal
        assert quiet(two_sender_daemon, chat_db, sent) == []  # none of them said or did anything
        assert approval_state(two_sender_daemon, request) == "pending" and len(server.requests()) == 1

        sent = len(texts_to(two_sender_daemon, ANA))
        tapback(chat_db, LIKE, guid)
        wait_for(lambda: (workspace / "hello.txt").exists(), 30, "the approved task to run")
        done = wait_for(
            lambda: [t for t in texts_to(two_sender_daemon, ANA, sent) if t.startswith("Done (")], 30, "its answer"
        )
    assert texts_to(two_sender_daemon, ANA, sent)[0] == f"Approved {request}: working on it in {workspace}."
    assert done[0].startswith(f"Done ({request}, run_") and approval_state(two_sender_daemon, request) == "approved"

    sent = len(texts_to(two_sender_daemon, ANA))
    tapback(chat_db, LOVE, guid, prefix="bp:")  # on a plan already decided: one line
    wait_for(lambda: texts_to(two_sender_daemon, ANA, sent), 30, "the answer to the late love")
    assert texts_to(two_sender_daemon, ANA, sent) == [f"{request} was already approved."]


def test_a_dislike_denies_and_the_plan_message_is_known_after_a_restart(
    two_sender_daemon: DaemonProcess, chat_db: ChatDbWriter
) -> None:
    with ScriptedServer([answer("1. Delete the logs."), answer("1. Rotate the logs.")]) as server:
        two_sender_daemon.start({"APPLE_FLOW_AFM_BASE_URL": server.url})
        first, first_guid = plan_of(two_sender_daemon, chat_db, "task: delete the logs")
        second, _ = plan_of(two_sender_daemon, chat_db, "task: rotate the logs")
        two_sender_daemon.kill9()
        two_sender_daemon.start({"APPLE_FLOW_AFM_BASE_URL": server.url})
        sent = len(texts_to(two_sender_daemon, ANA))
        tapback(chat_db, DISLIKE, first_guid)
        wait_for(lambda: texts_to(two_sender_daemon, ANA, sent), 30, "the answer to the dislike")
        assert texts_to(two_sender_daemon, ANA, sent) == [f"Denied {first}; nothing was changed."]
        assert approval_state(two_sender_daemon, first) == "denied"
        assert approval_state(two_sender_daemon, second) == "pending"


def test_an_expired_plan_says_so_in_one_line(two_sender_daemon: DaemonProcess, chat_db: ChatDbWriter) -> None:
    with ScriptedServer([answer("1. Create hello.txt.")]) as server:
        two_sender_daemon.start({"APPLE_FLOW_AFM_BASE_URL": server.url})
        request, guid = plan_of(two_sender_daemon, chat_db, "task: add hello.txt")
        with sqlite3.connect(two_sender_daemon.db_path) as db:
            db.execute("UPDATE approvals SET expires_at = 0 WHERE id = ?", (request,))
        sent = len(texts_to(two_sender_daemon, ANA))
        tapback(chat_db, LIKE, guid)
        wait_for(lambda: texts_to(two_sender_daemon, ANA, sent), 30, "the answer to the like")
        reply = texts_to(two_sender_daemon, ANA, sent)
        assert reply == [f"{request} expired (requests last 20 minutes). Send the task again."]
        assert len(server.requests()) == 1


# --- messages from while the Mac slept ------------------------------------------------------------------------


def test_a_backlog_of_200_late_rows_gets_one_reply_and_no_run(
    two_sender_daemon: DaemonProcess, chat_db: ChatDbWriter
) -> None:
    with ScriptedServer([answer("Done: hello.")]) as server:
        two_sender_daemon.start({"APPLE_FLOW_AFM_BASE_URL": server.url})
        chat_db.message("help", sender=ANA)
        wait_for(lambda: texts_to(two_sender_daemon, ANA), 30, "the answer to help")
        assert two_sender_daemon.terminate() == 0  # the Mac sleeps; the phone goes on
        asleep = datetime.now(UTC) - timedelta(hours=3)
        chat_db.message("from the night before", sender=ANA, when=asleep - timedelta(hours=10))  # too old: silent
        for index in range(200):
            chat_db.message(f"request {index}", sender=ANA, when=asleep + timedelta(seconds=30 * index))
        sent = len(texts_to(two_sender_daemon, ANA))
        two_sender_daemon.start({"APPLE_FLOW_AFM_BASE_URL": server.url})  # it wakes

        listing = wait_for(lambda: texts_to(two_sender_daemon, ANA, sent), 30, "the listing")
        assert listing[0].startswith("While this Mac was asleep or offline you sent 200 messages; none was run. "
                                     "The last 5:\n196. ")
        assert "\n200. " in listing[0] and listing[0].endswith(
            "Reply `run` to run the last one now, or `run <n>` for another (1 to 200).")
        assert "from the night before" not in listing[0]
        assert quiet(two_sender_daemon, chat_db, sent) == listing[:1]  # one reply, nothing else
        assert server.requests() == []  # and no agent run

        sent = len(texts_to(two_sender_daemon, ANA))
        chat_db.message("run", sender=ANA)
        wait_for(lambda: server.requests(), 30, "`run` to run the last one")
        assert "request 199" in str(server.requests()[0]["messages"])
        wait_for(lambda: "Done: hello." in texts_to(two_sender_daemon, ANA, sent), 30, "its answer")


def test_a_30_minute_old_message_is_listed_and_run_on_run_n(
    two_sender_daemon: DaemonProcess, chat_db: ChatDbWriter
) -> None:
    two_sender_daemon.start()
    chat_db.message("help", sender=ANA)
    wait_for(lambda: texts_to(two_sender_daemon, ANA), 30, "the answer to help")
    two_sender_daemon.terminate()
    chat_db.message("status", sender=ANA, when=datetime.now(UTC) - timedelta(minutes=40))
    chat_db.message("usage", sender=ANA, when=datetime.now(UTC) - timedelta(minutes=30))
    sent = len(texts_to(two_sender_daemon, ANA))
    two_sender_daemon.start()
    listing = wait_for(lambda: texts_to(two_sender_daemon, ANA, sent), 30, "the listing")[0]
    assert listing.startswith("While this Mac was asleep or offline you sent 2 messages; none was run:\n1. ")
    assert " status\n2. " in listing and listing.split("\n")[2].endswith(" usage")

    sent = len(texts_to(two_sender_daemon, ANA))
    chat_db.message("run 1", sender=ANA)  # the first of them: `status`, answered as if it came now
    wait_for(lambda: texts_to(two_sender_daemon, ANA, sent), 30, "the answer to run 1")
    assert texts_to(two_sender_daemon, ANA, sent)[0].startswith(STATUS_STARTS)
    sent = len(texts_to(two_sender_daemon, ANA))
    chat_db.message("run 3", sender=ANA)
    wait_for(lambda: texts_to(two_sender_daemon, ANA, sent), 30, "the answer to run 3")
    assert texts_to(two_sender_daemon, ANA, sent) == ["There is no 3: `run 1` to `run 2`, or `run` for the last one."]


# --- every send confirmed -------------------------------------------------------------------------------------


def test_a_file_whose_send_exits_0_without_a_row_is_named_after_the_reply_and_in_status(
    two_sender_daemon: DaemonProcess, chat_db: ChatDbWriter, tmp_path: Path
) -> None:
    attachments = tmp_path / "Messages" / "Attachments"
    attachments.mkdir(parents=True)
    script = [tool_call("writeFile", {"path": "report.csv", "content": "day,sales\n"}),
              answer("Here is the report.\nATTACH: report.csv")]
    with ScriptedServer(script) as server:
        two_sender_daemon.start({"APPLE_FLOW_AFM_BASE_URL": server.url,
                                 "APPLE_FLOW_MESSAGES_ATTACHMENTS_PATH": str(attachments),
                                 "FAKE_OSASCRIPT_ROW": "none-for-files", "APPLE_FLOW_SEND_CONFIRM_SECONDS": "1"})
        chat_db.message("write a sales report and send me the file", sender=ANA)
        said = wait_for(lambda: [t for t in texts_to(two_sender_daemon, ANA) if t.startswith("Could not send")], 30,
                        "the line saying the file did not go")
    assert texts_to(two_sender_daemon, ANA)[0] == "Here is the report.\n\nSending: report.csv (10 bytes)."
    assert len(two_sender_daemon.file_sends()) == 1  # tried once: an exit 0 is not sent again
    assert said == [f"Could not send report.csv: osascript said it sent report.csv to {ANA}, but there is no trace "
                    f"of it in {chat_db.path} after 1 s: Messages did not send it. Open Messages and check it is "
                    f"signed in and can reach {ANA}"]
    # The line is said before the file is marked (a crash in between says it again rather than keep silent); a
    # `status` read within milliseconds of it could come between the two.
    wait_for(lambda: files_not_sent(two_sender_daemon), 30, "the file to be recorded as not sent")
    chat_db.message("status", sender=ANA)
    status = wait_for(
        lambda: [t for t in texts_to(two_sender_daemon, ANA) if "File not sent at " in t], 30, "status"
    )[0]
    assert re.search(r"File not sent at \d\d:\d\d: report\.csv \(osascript said it sent report\.csv", status)


def files_not_sent(two_sender_daemon: DaemonProcess) -> list[tuple[str]]:
    with sqlite3.connect(two_sender_daemon.db_path) as db:
        return db.execute("SELECT shown FROM reply_files WHERE state = 'not_sent'").fetchall()
