"""The whole path with real parts: a real `apple-flow run` process, its SQLite store, the real `apple-code` binary
against the scripted OpenAI-compatible server, a chat.db built from the real Messages schema, and a fake
`osascript` on PATH recording what would be sent."""

from __future__ import annotations

import contextlib
import re
import sqlite3
import time
from pathlib import Path

import psutil
import pytest

from support.chatdb import ChatDbWriter
from support.daemon_process import DaemonProcess, MakeDaemon, scripted_agent, wait_for
from support.scripted_server import ScriptedServer, answer, hang, tool_call

ANA = "+15551234567"
STRANGER = "+15550001111"


@pytest.fixture(autouse=True)
def demo_readme(workspace: Path) -> None:
    """The workspace these tests' agent looks at holds a README."""
    (workspace / "README.md").write_text("# demo\n")


@pytest.fixture
def formatted_number_daemon(new_daemon: MakeDaemon, workspace: Path,
                            apple_code_bin: Path) -> DaemonProcess:
    """The scripted agent's daemon with Ana allowed as people write her number, not as chat.db stores it."""
    return new_daemon({"APPLE_FLOW_ALLOWED_SENDERS": "(555) 123-4567", **scripted_agent(apple_code_bin, workspace)})


def served(server: ScriptedServer) -> dict[str, str]:
    return {"APPLE_FLOW_AFM_BASE_URL": server.url}


def final_replies(formatted_number_daemon: DaemonProcess, recipient: str) -> list[str]:
    """What the recipient got, without progress lines and approval acknowledgements."""
    return [t for t in formatted_number_daemon.sends_to(recipient) if not t.startswith(("… ", "Approved req_"))]


def agent_processes(formatted_number_daemon: DaemonProcess) -> list[psutil.Process]:
    """The daemon's live apple-code processes. One that exits meanwhile, or has exited and is not yet waited for (a
    zombie, whose command line cannot be read), is not one."""
    assert formatted_number_daemon.process is not None
    found = []
    for child in psutil.Process(formatted_number_daemon.process.pid).children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if child.status() != psutil.STATUS_ZOMBIE and "apple-code" in " ".join(child.cmdline()):
                found.append(child)
    return found



def test_a_chat_message_is_answered_and_a_stranger_gets_nothing(
    formatted_number_daemon: DaemonProcess, chat_db: ChatDbWriter
) -> None:
    with ScriptedServer([answer("Hello from the agent")]) as server:
        formatted_number_daemon.start(served(server))
        chat_db.message("let me in", sender=STRANGER)
        chat_db.message("hi there", sender="15551234567")
        wait_for(lambda: final_replies(formatted_number_daemon, ANA), 20, "the reply")
        formatted_number_daemon.wait_passed(chat_db.latest_rowid())
        assert final_replies(formatted_number_daemon, ANA) == ["Hello from the agent"]
        assert formatted_number_daemon.sends_to(STRANGER) == []
        [request] = server.requests()
        assert "hi there" in str(request["messages"])
        assert "let me in" not in str(request["messages"])
    assert formatted_number_daemon.terminate() == 0


def test_a_task_is_planned_read_only_approved_and_changes_files(
    formatted_number_daemon: DaemonProcess, chat_db: ChatDbWriter, workspace: Path
) -> None:
    script = [
        tool_call("listDirectory", {"path": "."}),
        answer("1. Create hello.txt with a greeting."),
        tool_call("writeFile", {"path": "hello.txt", "content": "hello, world\n"}),
        answer("Created hello.txt."),
    ]
    with ScriptedServer(script) as server:
        formatted_number_daemon.start(served(server))
        chat_db.message("task: add a hello.txt", sender=ANA)
        plan = wait_for(lambda: final_replies(formatted_number_daemon, ANA), 20, "the plan")[0]
        assert "1. Create hello.txt" in plan
        assert not (workspace / "hello.txt").exists()
        planning_tools = {t["function"]["name"] for t in server.requests()[0].get("tools", [])}
        assert "writeFile" not in planning_tools and "readFile" in planning_tools  # --read-only
        request_id = re.search(r"approve (req_[0-9a-f]{8})", plan)
        assert request_id, plan
        chat_db.message(f"approve {request_id.group(1)}", sender=ANA)
        done = wait_for(lambda: final_replies(formatted_number_daemon, ANA)[1:], 20, "the task's reply")[0]
        assert done.startswith(f"Done ({request_id.group(1)}") and "Created hello.txt." in done
        assert (workspace / "hello.txt").read_text() == "hello, world\n"
        execution_tools = {t["function"]["name"] for t in server.requests()[2].get("tools", [])}
        assert "writeFile" in execution_tools
        assert f"Approved {request_id.group(1)}" in " ".join(formatted_number_daemon.sends_to(ANA))
        progress = [t for t in formatted_number_daemon.sends_to(ANA) if t.startswith("… ")]
        assert any("hello.txt" in line for line in progress), progress  # the agent's tool activity


@pytest.mark.slow
def test_kill_9_at_several_points_loses_nothing_and_repeats_nothing(
    formatted_number_daemon: DaemonProcess, chat_db: ChatDbWriter
) -> None:
    # 1. One message answered, a second in the middle of its turn (the model has not answered): kill -9.
    with ScriptedServer([answer("answer one"), hang()]) as first:
        formatted_number_daemon.start(served(first))
        one = chat_db.message("one", sender=ANA)
        wait_for(lambda: final_replies(formatted_number_daemon, ANA) == ["answer one"], 20, "the first answer")
        two = chat_db.message("two", sender=ANA)  # (the rows between are the replies, as Messages stores them)
        wait_for(lambda: len(first.requests()) == 2, 20, "the second turn to start")
        agents = agent_processes(formatted_number_daemon)
        formatted_number_daemon.kill9()
        assert agents and all(a.is_running() for a in agents)  # orphaned: kill -9 gave no chance to stop them
    assert formatted_number_daemon.message_states() == {one: "sent", two: "taken"}

    # 2. Restart: "two" is handled again (once); "three" arrives and the daemon is killed at once.
    with ScriptedServer([answer("answer two"), answer("answer three (second daemon)", delay=5)]) as second:
        formatted_number_daemon.start(served(second))
        _gone, alive = psutil.wait_procs(agents, timeout=5)
        assert alive == []  # the restart killed the previous daemon's agent before redoing its message
        wait_for(lambda: "answer two" in final_replies(formatted_number_daemon, ANA), 20, "the redone answer")
        # Recorded as sent only once Messages' row of it is seen: the kill below is for "three", not this send.
        wait_for(lambda: formatted_number_daemon.message_states().get(two) == "sent", 20,
                 "the redone answer to be recorded")
        three = chat_db.message("three", sender=ANA)
        time.sleep(0.05)  # not a wait for anything: the kill lands wherever the daemon is with "three" by then
        formatted_number_daemon.kill9()

    # 3. Restart: "three" is answered once; "four" is killed mid-turn (the model takes 5 s).
    with ScriptedServer([answer("answer three"), answer("answer four (slow)", delay=5)]) as third:
        formatted_number_daemon.start(served(third))
        wait_for(lambda: "answer three" in final_replies(formatted_number_daemon, ANA), 20, "the third answer")
        four = chat_db.message("four", sender=ANA)
        wait_for(lambda: len(third.requests()) == 2, 20, "the fourth turn to start")
        formatted_number_daemon.kill9()

    # 4. Restart: "four" answered; everything answered exactly once, in order.
    with ScriptedServer([answer("answer four")]) as fourth:
        formatted_number_daemon.start(served(fourth))
        wait_for(lambda: "answer four" in final_replies(formatted_number_daemon, ANA), 20, "the fourth answer")
        formatted_number_daemon.wait_passed(four)
        assert formatted_number_daemon.terminate() == 0
    assert final_replies(formatted_number_daemon, ANA) == ["answer one", "answer two", "answer three", "answer four"]
    assert formatted_number_daemon.message_states() == {one: "sent", two: "sent", three: "sent", four: "sent"}


def test_a_hung_agent_is_killed_at_the_timeout_and_the_sender_told(
    formatted_number_daemon: DaemonProcess, chat_db: ChatDbWriter
) -> None:
    with ScriptedServer([hang()]) as server:
        formatted_number_daemon.start({**served(server), "APPLE_FLOW_AFM_TIMEOUT_SECONDS": "2"})
        chat_db.message("do something slow", sender=ANA)
        reply = wait_for(lambda: final_replies(formatted_number_daemon, ANA), 30, "the timeout reply")[0]
        assert "took too long and was stopped after 2 s" in reply
        # Killed by then; given time to be reaped on a loaded machine (a zombie is not running).
        wait_for(lambda: not agent_processes(formatted_number_daemon), 20, "the hung agent to be gone")


def test_sigterm_stops_a_running_turn_within_the_bound_and_kills_its_process(
    formatted_number_daemon: DaemonProcess, chat_db: ChatDbWriter
) -> None:
    with ScriptedServer([hang()]) as server:
        formatted_number_daemon.start(served(server))
        chat_db.message("long job", sender=ANA)
        wait_for(lambda: server.requests(), 20, "the turn to start")
        agents = agent_processes(formatted_number_daemon)
        assert agents
        began = time.monotonic()
        assert formatted_number_daemon.terminate() == 0
        assert time.monotonic() - began < 10  # grace 1 s + killing the agent
        _gone, alive = psutil.wait_procs(agents, timeout=5)
        assert alive == []
    assert formatted_number_daemon.message_states() == {1: "taken"}  # redone at the next start
    assert final_replies(formatted_number_daemon, ANA) == []


def test_a_second_daemon_on_the_same_database_refuses_to_start(
    formatted_number_daemon: DaemonProcess, chat_db: ChatDbWriter
) -> None:
    with ScriptedServer([]) as server:
        formatted_number_daemon.start(served(server))
        first = formatted_number_daemon.process
        with pytest.raises(AssertionError, match="Another apple-flow daemon"):
            formatted_number_daemon.start(served(server))
        assert first is not None and first.poll() is None
        formatted_number_daemon.process = first


def test_no_model_and_a_missing_binary_get_short_replies_that_say_what_to_do(
    formatted_number_daemon: DaemonProcess, chat_db: ChatDbWriter, tmp_path: Path
) -> None:
    # Nothing listens on the configured server: apple-code exits 3 (no model available).
    formatted_number_daemon.start({"APPLE_FLOW_AFM_BASE_URL": "http://127.0.0.1:9/v1"})
    chat_db.message("hi", sender=ANA)
    reply = wait_for(lambda: final_replies(formatted_number_daemon, ANA), 30, "the no-model reply")[0]
    assert reply.startswith("Sorry, no model is available:") and "APPLE_FLOW_AFM_BASE_URL" in reply
    assert "Traceback" not in reply and len(reply) < 600
    formatted_number_daemon.terminate()

    formatted_number_daemon.start({"APPLE_FLOW_AFM_COMMAND": str(tmp_path / "nowhere" / "apple-code")})
    chat_db.message("hi again", sender=ANA)
    wait_for(lambda: len(final_replies(formatted_number_daemon, ANA)) == 2, 30, "the missing-binary reply")
    missing = final_replies(formatted_number_daemon, ANA)[1]
    assert missing.startswith("Sorry, the agent cannot start:") and "apple_flow_afm_command" in missing


def test_the_console_channel_answers_piped_lines_and_exits_0_after_the_last_turn(
    tmp_path: Path, workspace: Path, apple_code_bin: Path
) -> None:
    import os
    import subprocess
    import sys

    from apple_flow.paths import PROJECT_ROOT

    with ScriptedServer([answer("first answer", delay=1), answer("second answer")]) as server:
        env = {
            **os.environ,
            "PYTHONPATH": str(PROJECT_ROOT / "src"),
            "APPLE_FLOW_DB_PATH": str(tmp_path / "console.db"),
            "APPLE_FLOW_DEFAULT_WORKSPACE": str(workspace),
            "APPLE_FLOW_ALLOWED_SENDERS": "",
            "APPLE_FLOW_AFM_COMMAND": str(apple_code_bin),
            "APPLE_FLOW_AFM_BACKEND": "openai",
            "APPLE_FLOW_AFM_MODEL": "scripted",
            "APPLE_FLOW_AFM_BASE_URL": server.url,
        }
        done = subprocess.run(
            [sys.executable, "-m", "apple_flow", "run", "--channel", "console"],
            input="hello\nstatus\nand again\n", capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60,
        )
        assert len(server.requests()) == 2
    assert done.returncode == 0, done.stderr
    replies = done.stdout.split("\n\n")
    assert replies[0].startswith("Running for") or replies[0].startswith("Queued")  # answered at once
    assert replies[1:3] == ["first answer", "second answer"]


def test_an_approved_task_runs_plan_and_execute_by_default(
    formatted_number_daemon: DaemonProcess, chat_db: ChatDbWriter, workspace: Path
) -> None:
    script = [
        answer("1. Create hello.txt\n2. Create bye.txt"),  # the daemon's read-only planning turn
        answer('["Create hello.txt", "Create bye.txt"]'),  # apple-code --plan: the planner
        tool_call("writeFile", {"path": "hello.txt", "content": "hello\n"}),
        answer("Created hello.txt."),
        tool_call("writeFile", {"path": "bye.txt", "content": "bye\n"}),
        answer("Created bye.txt."),
        answer("Both files exist."),  # the summary
    ]
    with ScriptedServer(script) as server:
        formatted_number_daemon.start({**served(server), "APPLE_FLOW_AFM_PLAN_TASKS": "true"})
        chat_db.message("task: add hello.txt and bye.txt", sender=ANA)
        plan = wait_for(lambda: final_replies(formatted_number_daemon, ANA), 20, "the plan")[0]
        request_id = re.search(r"approve (req_[0-9a-f]{8})", plan)
        assert request_id, plan
        chat_db.message(f"approve {request_id.group(1)}", sender=ANA)
        done = wait_for(lambda: final_replies(formatted_number_daemon, ANA)[1:], 30, "the task's reply")[0]
        assert len(server.requests()) == len(script)
    assert "Created hello.txt." in done and "Created bye.txt." in done and "Both files exist." in done
    assert (workspace / "hello.txt").read_text() == "hello\n"
    assert (workspace / "bye.txt").read_text() == "bye\n"


def test_the_echo_of_a_reply_sent_before_a_kill_9_is_not_taken_for_a_request(
    formatted_number_daemon: DaemonProcess, chat_db: ChatDbWriter
) -> None:
    # A person texting themselves (the usual smoke test) gets each reply back as an incoming row from their own
    # handle. If the daemon dies between sending and that row landing, the restart must still know it as an echo.
    with ScriptedServer([answer("the only answer"), answer("an answer to its own reply")]) as server:
        formatted_number_daemon.start(served(server))
        hi = chat_db.message("hi", sender=ANA)
        wait_for(lambda: formatted_number_daemon.message_states() == {hi: "sent"}, 20, "the reply")
        formatted_number_daemon.kill9()
        chat_db.message("the only answer", sender=ANA)  # the echo, written by Messages while the daemon was down
        later = chat_db.message("thanks", sender=STRANGER)  # once the cursor passed this row, the echo was read
        formatted_number_daemon.start(served(server))
        wait_for(lambda: cursor(formatted_number_daemon) == later, 20, "the cursor to pass the echo")
        assert len(server.requests()) == 1
    assert final_replies(formatted_number_daemon, ANA) == ["the only answer"]


def cursor(formatted_number_daemon: DaemonProcess) -> int | None:
    with sqlite3.connect(formatted_number_daemon.db_path) as db:
        row = db.execute("SELECT last_rowid FROM cursor WHERE channel = 'imessage'").fetchone()
    return int(row[0]) if row else None
