"""The whole path of a checked task: a real `apple-flow run` process, the real apple-code on the scripted
model with the workspace's check (`apple-code --verify`), and escalation to a fake claude CLI. The model first
claims a fix it did not make: apple-code runs the check, shows it the failure, and it fixes the code; another model
never fixes it, and the owner escalates."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from support.chatdb import ChatDbWriter
from support.daemon_process import DaemonProcess, MakeDaemon, scripted_agent, wait_for
from support.scripted_server import ScriptedServer, answer, tool_call

ANA = "+15551234567"
CALC = "def add(a, b):\n    return a - b\n"
TEST = ("import unittest\n\nfrom calc import add\n\n\nclass CalcTest(unittest.TestCase):\n"
        "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n")
CHECK = "python3 -m unittest -q"  # the sandbox has python3; make and pytest may be missing


@pytest.fixture
def buggy_calc(workspace: Path) -> Path:
    (workspace / "calc.py").write_text(CALC)
    (workspace / "test_calc.py").write_text(TEST)
    return workspace


@pytest.fixture
def verifying_daemon(new_daemon: MakeDaemon, tmp_path: Path, buggy_calc: Path, apple_code_bin: Path,
                     fake_cli_bin: Path) -> DaemonProcess:
    """The scripted agent's daemon with the workspace's check, escalating to the fake claude."""
    return new_daemon({
        "APPLE_FLOW_ALLOWED_SENDERS": ANA, **scripted_agent(apple_code_bin, buggy_calc),
        "APPLE_FLOW_VERIFY_COMMAND": CHECK, "APPLE_FLOW_ESCALATE_CONNECTOR": "claude-cli",
        "APPLE_FLOW_CLAUDE_COMMAND": str(fake_cli_bin / "claude"),
        "FAKE_CLI_RECORD": str(tmp_path / "claude.jsonl"),
    })


def claude_runs(folder: Path) -> list[dict[str, Any]]:
    """The fake claude's runs, without the start-up check's `claude --version`."""
    log = folder / "claude.jsonl"
    runs = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return [run for run in runs if "--version" not in run["argv"]]


def replies(verifying_daemon: DaemonProcess) -> list[str]:
    return [t for t in verifying_daemon.sends_to(ANA) if not t.startswith(("… ", "Approved req_", "Escalating run_"))]


def approve_task(verifying_daemon: DaemonProcess, chat_db: ChatDbWriter) -> str:
    chat_db.message("task: fix add in calc.py", sender=ANA)
    plan = wait_for(lambda: replies(verifying_daemon), 30, "the plan")[0]
    request = re.search(r"approve (req_[0-9a-f]{8})", plan)
    assert request, plan
    chat_db.message(f"approve {request.group(1)}", sender=ANA)
    return str(wait_for(lambda: replies(verifying_daemon)[1:], 60, "the task's reply")[0])


def test_a_claimed_fix_is_checked_shown_to_the_model_and_repaired(
    verifying_daemon: DaemonProcess, chat_db: ChatDbWriter, buggy_calc: Path
) -> None:
    script = [
        answer("1. Change add in calc.py to add."),  # the read-only planning turn
        answer("Fixed add."),  # a claim: nothing was changed, so the check fails
        tool_call("writeFile", {"path": "calc.py", "content": "def add(a, b):\n    return a + b\n"}),
        answer("Now add really adds."),
    ]
    with ScriptedServer(script) as server:
        verifying_daemon.start({"APPLE_FLOW_AFM_BASE_URL": server.url})
        reply = approve_task(verifying_daemon, chat_db)
        requests = server.requests()
    assert reply.startswith("Done (req_") and "Now add really adds." in reply
    assert reply.endswith(f"\n\nCheck passed: `{CHECK}` (after 1 repair round).")
    assert "escalate" not in reply
    assert (buggy_calc / "calc.py").read_text().endswith("a + b\n")
    # The model was shown the failing check before it fixed the code.
    assert "AssertionError: -1 != 5" in json.dumps(requests[2]["messages"])
    # ... and, with the task, before its first turn.
    assert "AssertionError: -1 != 5" in json.dumps(requests[1]["messages"])
    # The run page's events: the check's three runs (before the work, after each answer).
    with sqlite3.connect(verifying_daemon.db_path) as db:
        checks = [json.loads(body) for (body,) in db.execute("SELECT body FROM run_events WHERE type = 'verify'")]
    assert [(c["passed"], c.get("before", False)) for c in checks] == [(False, True), (False, False), (True, False)]


def test_a_check_that_never_passes_ends_not_done_and_escalation_runs_it_on_claude(
    verifying_daemon: DaemonProcess, chat_db: ChatDbWriter, buggy_calc: Path, tmp_path: Path
) -> None:
    script = [answer("1. Fix add."), answer("Fixed."), answer("Fixed, really."), answer("Fixed, I promise.")]
    with ScriptedServer(script) as server:
        verifying_daemon.start({"APPLE_FLOW_AFM_BASE_URL": server.url, "APPLE_FLOW_VERIFY_ROUNDS": "2"})
        reply = approve_task(verifying_daemon, chat_db)
        match = re.search(r"Not done \((req_[0-9a-f]{8}), (run_[0-9a-f]{6})\): the check still fails after 2 "
                          r"repair rounds\.\nFixed, I promise\.\n\n", reply)
        assert match, reply
        request, run = match.groups()
        assert f"\n\nCheck failed: `{CHECK}`: FAIL: test_add" in reply
        assert reply.endswith(f"\nReply `escalate {run}` to run it again on claude-cli.")
        assert claude_runs(tmp_path) == []  # nothing went to the cloud before the owner asked (--version only)

        chat_db.message(f"escalate {run}", sender=ANA)
        escalated = wait_for(lambda: replies(verifying_daemon)[2:], 30, "the escalated reply")[0]
    assert escalated.startswith(f"Escalated {run} on claude-cli ({request}, run_")
    assert "claude answer" in escalated
    assert escalated.endswith(f"Not checked by apple-flow: claude-cli was asked to run `{CHECK}` itself.")
    assert any(t.startswith(f"Escalating {run} ({request}) to claude-cli") for t in verifying_daemon.sends_to(ANA))
    [claude] = claude_runs(tmp_path)
    assert "fix add in calc.py" in claude["stdin"] and "1. Fix add." in claude["stdin"]
    assert f"run `{CHECK}` in the workspace" in claude["stdin"]
    assert claude["cwd"] == str(buggy_calc)


def test_a_task_plans_and_works_on_the_task_server_while_chat_stays_on_the_first(
    verifying_daemon: DaemonProcess, chat_db: ChatDbWriter, buggy_calc: Path
) -> None:
    """APPLE_FLOW_AFM_TASK_BASE_URL (run.sh's larger local model): the task's plan and its approved work go there,
    a chat message to the usual server; each server sees only its own turns."""
    chat_script = [answer("Hello from the quick model.")]
    task_script = [
        answer("1. Change add in calc.py to add."),  # the planning turn
        tool_call("writeFile", {"path": "calc.py", "content": "def add(a, b):\n    return a + b\n"}),
        answer("add adds now."),
    ]
    with ScriptedServer(chat_script) as chat, ScriptedServer(task_script) as tasks:
        verifying_daemon.start({"APPLE_FLOW_AFM_BASE_URL": chat.url, "APPLE_FLOW_AFM_TASK_BASE_URL": tasks.url})
        chat_db.message("hi", sender=ANA)
        hello = wait_for(lambda: replies(verifying_daemon), 30, "the chat reply")[0]
        chat_db.message("task: fix add in calc.py", sender=ANA)
        plan = wait_for(lambda: replies(verifying_daemon)[1:], 30, "the plan")[0]
        request = re.search(r"approve (req_[0-9a-f]{8})", plan)
        assert request, plan
        chat_db.message(f"approve {request.group(1)}", sender=ANA)
        done = wait_for(lambda: replies(verifying_daemon)[2:], 60, "the task's reply")[0]
        chat_requests, task_requests = chat.requests(), tasks.requests()
    assert "Hello from the quick model." in hello
    assert "1. Change add in calc.py to add." in plan
    assert done.startswith("Done (req_") and "add adds now." in done
    assert (buggy_calc / "calc.py").read_text().endswith("a + b\n")
    assert len(chat_requests) == 1 and "hi" in json.dumps(chat_requests[0]["messages"])
    assert len(task_requests) == 3 and "fix add in calc.py" in json.dumps(task_requests[0]["messages"])
