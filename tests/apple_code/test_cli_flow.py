"""Whole runs of the real apple-code binary with the real tools against the scripted server: the files on disk,
the events, the exit code, and the size of every request the server received."""

from __future__ import annotations

import json
import re
import secrets
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from support.apple_code_run import clean_env, events, request_tokens, run_apple_code
from support.daemon_process import wait_for
from support.scripted_server import ScriptedServer, answer, tool_call

TOOLS = ["readFile", "writeFile", "editFile", "listDirectory", "searchFiles", "searchContent", "runCommand"]


def openai_args(url: str, workspace: Path, *extra: str) -> list[str]:
    return ["--backend", "openai", "--base-url", url, "--model", "scripted", "--cwd", str(workspace),
            "--output-format", "stream-json", *extra]


@pytest.fixture(autouse=True)
def calc_project(workspace: Path) -> None:
    """A workspace with a small, buggy calculator."""
    (workspace / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (workspace / "README.md").write_text("# calc\n")


def test_list_read_edit_run_answer(apple_code_bin: Path, workspace: Path) -> None:
    script = [
        tool_call("listDirectory", {"path": "."}),
        tool_call("readFile", {"path": "calc.py"}),
        tool_call("editFile", {"path": "calc.py", "oldText": "return a - b", "newText": "return a + b"}),
        tool_call("runCommand", {"command": "python3 -c 'import calc; print(calc.add(2, 3))'"}),
        answer("Fixed add in calc.py; it now prints 5."),
    ]
    with ScriptedServer(script) as server:
        done = run_apple_code(
            apple_code_bin, *openai_args(server.url, workspace, "--context-tokens", "3000", "--verbose"),
            "Fix add in calc.py and check it.",
        )
        requests = server.requests()
    assert done.returncode == 0, done.stderr
    assert (workspace / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
    # --verbose diagnostics (the budget, each request's size, the tools' sandbox notice) go to stderr only.
    assert "budget: context 3000" in done.stderr
    assert "runCommand sandbox:" in done.stderr
    # The documented request rule, recomputed here from what the server received, is the figure apple-code used.
    reported = [int(size) for size in re.findall(r"request \d+: (\d+) of 3000", done.stderr)]
    assert reported == [request_tokens(body) for body in requests]

    lines = events(done.stdout)
    assert lines[0]["type"] == "start"
    assert lines[0]["tools"] == TOOLS
    assert lines[0]["context_tokens"] == 3000
    assert lines[0]["cwd"] == str(workspace)
    calls = [e for e in lines if e["type"] == "tool_call"]
    results = [e for e in lines if e["type"] == "tool_result"]
    assert [c["name"] for c in calls] == ["listDirectory", "readFile", "editFile", "runCommand"]
    assert calls[1]["arguments"] == {"path": "calc.py"}
    assert all(r["ok"] for r in results), results
    assert [c["id"] for c in calls] == [r["id"] for r in results]
    result = lines[-1]
    assert result["type"] == "result"
    assert result["subtype"] == "success" and result["is_error"] is False
    assert result["result"] == "Fixed add in calc.py; it now prints 5."
    assert result["files_changed"] == ["calc.py"]
    assert result["commands_run"] == 1
    assert result["num_turns"] == 5
    assert result["usage"]["estimated"] is True

    assert len(requests) == 5
    for body in requests:
        assert body["messages"][0]["role"] == "system"
        assert body["tool_choice"] == "auto"
        assert [t["function"]["name"] for t in body["tools"]] == TOOLS
        assert request_tokens(body) <= 3000
    # Each result went back as a tool message with the call's id; the listing and the command output are real.
    tool_messages = [m for m in requests[-1]["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_messages] == [c["id"] for c in calls]
    assert "calc.py" in tool_messages[0]["content"]
    assert "return a - b" in tool_messages[1]["content"]
    assert "5" in tool_messages[3]["content"]


def test_large_files_are_condensed_so_every_request_fits(apple_code_bin: Path, workspace: Path) -> None:
    for n in range(4):
        text = "".join(f"line {i}: value_{n} = compute({i}, 'some text to make it long')\n" for i in range(300))
        (workspace / f"big{n}.py").write_text(text)
    script = [tool_call("readFile", {"path": f"big{n}.py"}) for n in range(4)] + [answer("read them")]
    with ScriptedServer(script) as server:
        done = run_apple_code(apple_code_bin, *openai_args(server.url, workspace, "--context-tokens", "1800"), "read")
        requests = server.requests()
    assert done.returncode == 0, done.stderr
    assert len(requests) == 5
    for body in requests:
        assert request_tokens(body) <= 1800
    lines = events(done.stdout)
    assert any(e["type"] == "notice" and "condensed" in e["message"] for e in lines)
    last = requests[-1]["messages"]
    assert last[1] == {"role": "user", "content": "read"}
    contents = [m["content"] for m in last if m["role"] == "tool"]
    assert all(c.startswith("[condensed to save context]") for c in contents[:-1])
    assert "value_3" in contents[-1]


def test_a_huge_write_is_cut_from_the_history_so_every_request_fits(apple_code_bin: Path, workspace: Path) -> None:
    """A writeFile call's 20 KB content stays in the history as the call's arguments; once it has
    run the fitter cuts it to a placeholder, where it used to end the run with exit 4 (error_context)."""
    content = "".join(f"row {i:05d}: {'x' * 30}\n" for i in range(500))  # ~21 KB, over the 4096 default alone
    script = [tool_call("writeFile", {"path": "big.txt", "content": content}),
              tool_call("readFile", {"path": "big.txt", "startLine": 1, "endLine": 5}),
              answer("big.txt written and checked")]
    with ScriptedServer(script) as server:
        done = run_apple_code(apple_code_bin, *openai_args(server.url, workspace), "write big.txt")
        requests = server.requests()
    assert done.returncode == 0, done.stderr
    assert (workspace / "big.txt").read_text() == content
    lines = events(done.stdout)
    assert lines[-1]["subtype"] == "success" and lines[-1]["result"] == "big.txt written and checked"
    assert len(requests) == 3
    for body in requests:
        assert request_tokens(body) <= 4096
    # The call keeps its id and name, its result still follows it, and its arguments say what was there.
    history = requests[-1]["messages"]
    assert history[1] == {"role": "user", "content": "write big.txt"}
    write = next(m for m in history if m["role"] == "assistant")["tool_calls"][0]
    assert write["function"]["name"] == "writeFile"
    arguments = json.loads(write["function"]["arguments"])
    assert arguments["path"] == "big.txt"
    assert arguments["content"].startswith(f"[{len(content.encode()):,} bytes of text, starting \"row 00000")
    assert any(m["role"] == "tool" and m["tool_call_id"] == write["id"] for m in history)
    assert "row 00004" in history[-1]["content"]


def test_malformed_arguments_and_unknown_tools_do_not_end_the_run(apple_code_bin: Path, workspace: Path) -> None:
    script = [tool_call("readFile", '{"path": '), tool_call("formatDisk", {}), answer("recovered")]
    with ScriptedServer(script) as server:
        done = run_apple_code(apple_code_bin, *openai_args(server.url, workspace), "go")
        requests = server.requests()
    assert done.returncode == 0
    results = [e for e in events(done.stdout) if e["type"] == "tool_result"]
    assert [r["ok"] for r in results] == [False, False]
    tool_messages = [m["content"] for m in requests[-1]["messages"] if m["role"] == "tool"]
    assert tool_messages[0].startswith("Error: the arguments of readFile are not valid JSON")
    assert tool_messages[1].startswith("Error: unknown tool 'formatDisk'")


def test_tool_results_folded_into_user_messages_when_configured(apple_code_bin: Path, workspace: Path) -> None:
    with ScriptedServer([tool_call("readFile", {"path": "README.md"}), answer("a heading")]) as server:
        done = run_apple_code(apple_code_bin, *openai_args(server.url, workspace), "what is in README.md?",
                              env=clean_env(APPLE_CODE_TOOL_RESULTS="user"))
        second = server.requests()[1]
    assert done.returncode == 0
    roles = [m["role"] for m in second["messages"]]
    assert roles == ["system", "user", "assistant", "user"]
    assert second["messages"][3]["content"].startswith("Result of readFile:\n")
    assert "# calc" in second["messages"][3]["content"]
    assert json.loads(second["messages"][2]["tool_calls"][0]["function"]["arguments"]) == {"path": "README.md"}


def commands(marker: str) -> list[psutil.Process]:
    """The live processes whose command line holds ``marker`` (a zombie's cannot be read: it is not one)."""
    found = []
    for process in psutil.process_iter(["cmdline", "status"]):
        if process.info["status"] != psutil.STATUS_ZOMBIE and marker in " ".join(process.info["cmdline"] or []):
            found.append(process)
    return found


@pytest.mark.parametrize("how", ["sigint", "timeout"])
def test_stopping_a_run_kills_its_running_command(apple_code_bin: Path, workspace: Path, how: str) -> None:
    # A sleep length no other process uses, also not this test run by someone else at the same time.
    marker = f"31.{secrets.randbelow(10**9):09d}"
    command = f"sleep {marker} & sleep {marker}; echo never"
    script = [tool_call("runCommand", {"command": command, "timeout": 60}), answer("never reached")]
    # Long enough for the command to start first on a loaded machine (the suite runs in parallel).
    extra = ["--timeout", "5"] if how == "timeout" else []
    with ScriptedServer(script) as server:
        process = subprocess.Popen(
            [str(apple_code_bin), *openai_args(server.url, workspace, *extra), "run it"],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=clean_env(),
        )
        assert process.stdout is not None
        for line in process.stdout:
            if json.loads(line)["type"] == "tool_call":
                break
        wait_for(lambda: sum(p.info["cmdline"][-1:] == [marker] for p in commands(marker)) >= 2, 10,
                 "the command's two sleeps to run")
        started = time.monotonic()
        if how == "sigint":
            process.send_signal(signal.SIGINT)
        rest, _ = process.communicate(timeout=15)
        waited = time.monotonic() - started
    assert process.returncode == (130 if how == "sigint" else 124)
    result = json.loads(rest.splitlines()[-1])
    assert result["type"] == "result"
    assert result["subtype"] == ("error_interrupted" if how == "sigint" else "error_timeout")
    assert waited < (6 if how == "sigint" else 9)  # at once, or by the timeout
    wait_for(lambda: commands(marker) == [], 1, "the command's processes to be gone")
