"""The real apple-code against the scripted OpenAI-compatible server: replies that are not usable answers as they
stand (a tool call written as text, an empty answer) are recovered, as small local models need."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from support.apple_code_run import events, request_tokens, run_apple_code
from support.scripted_server import ScriptedServer, Step, answer, tool_call


def openai_args(url: str, workspace: Path, *extra: str) -> list[str]:
    return ["--backend", "openai", "--base-url", url, "--model", "scripted", "--cwd", str(workspace),
            "--output-format", "stream-json", "--verbose", *extra]


def run_script(
    binary: Path, workspace: Path, steps: list[Step], prompt: str, *extra: str
) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]:
    """One apple-code run against a scripted server: the finished process and the requests the server received."""
    with ScriptedServer(steps) as server:
        done = run_apple_code(binary, *openai_args(server.url, workspace, *extra), prompt)
        return done, server.requests()


@pytest.fixture(autouse=True)
def greet_script(workspace: Path) -> None:
    (workspace / "greet.py").write_text("print('hi')\n")


@pytest.mark.parametrize("written", [
    "functions.listDirectory:\n{ }\n",  # llama.cpp's chatml-function-calling format
    '```json\n{"name": "listDirectory", "arguments": {"path": "."}}\n```',
])
def test_a_tool_call_written_as_text_is_run(apple_code_bin: Path, workspace: Path, written: str) -> None:
    steps = [answer(written), answer("There is greet.py.")]
    done, requests = run_script(apple_code_bin, workspace, steps, "list the files in this folder")
    assert done.returncode == 0, done.stderr
    lines = events(done.stdout)
    assert lines[-1]["result"] == "There is greet.py."
    assert not [e for e in lines if e["type"] == "text" and "listDirectory" in e["delta"]]
    calls = [e for e in lines if e["type"] == "tool_call"]
    results = [e for e in lines if e["type"] == "tool_result"]
    assert [(c["id"], c["name"]) for c in calls] == [("c1", "listDirectory")]
    assert results[0]["ok"] and results[0]["id"] == "c1"
    assert "wrote a listDirectory call as text" in done.stderr
    # The second request carries it as a structured call and its result, which lists the real file.
    assistant, tool = requests[1]["messages"][-2:]
    sent_call = assistant["tool_calls"][0]
    assert sent_call["id"] == "c1" and sent_call["function"]["name"] == "listDirectory"
    assert tool["tool_call_id"] == "c1" and "greet.py" in tool["content"]


def test_text_naming_no_offered_tool_stays_the_answer(apple_code_bin: Path, workspace: Path) -> None:
    text = "functions.formatDisk:\n{}"
    done, requests = run_script(apple_code_bin, workspace, [answer(text)], "go", "--read-only")
    assert done.returncode == 0
    assert events(done.stdout)[-1]["result"] == text
    assert len(requests) == 1


def test_an_empty_answer_gets_one_plain_words_request(apple_code_bin: Path, workspace: Path) -> None:
    done, requests = run_script(
        apple_code_bin, workspace, [answer(""), answer("I am apple-code, a coding agent.")], "hi, who are you?"
    )
    assert done.returncode == 0, done.stderr
    lines = events(done.stdout)
    assert lines[-1]["result"] == "I am apple-code, a coding agent."
    assert lines[-1]["num_turns"] == 2
    assert any(e["type"] == "notice" and "empty answer" in e["message"] for e in lines)
    assert "tools" in requests[0] and "tools" not in requests[1] and "tool_choice" not in requests[1]
    last = requests[1]["messages"][-1]
    assert last["role"] == "user" and last["content"].endswith("hi, who are you?")
    # The follow-up is a request like any other: counted, and within the budget.
    reported = [int(size) for size in re.findall(r"request \d+: (\d+) of 4096", done.stderr)]
    assert reported == [request_tokens(body) for body in requests]


def test_empty_twice_ends_with_an_empty_success(apple_code_bin: Path, workspace: Path) -> None:
    done, requests = run_script(apple_code_bin, workspace, [answer(""), answer(""), answer("never asked")], "hi")
    assert done.returncode == 0
    result = events(done.stdout)[-1]
    assert (result["subtype"], result["result"], result["num_turns"]) == ("success", "", 2)
    assert len(requests) == 2


def test_max_turns_bounds_the_follow_up(apple_code_bin: Path, workspace: Path) -> None:
    done, requests = run_script(
        apple_code_bin, workspace, [answer(""), answer("never asked")], "hi", "--max-turns", "1"
    )
    assert done.returncode == 0
    assert events(done.stdout)[-1]["result"] == ""
    assert len(requests) == 1


def test_a_call_as_text_after_the_answer_request_ends_the_run(apple_code_bin: Path, workspace: Path) -> None:
    # The demo's failure: the same call three times, then the call again as text when no tools are offered.
    script = [tool_call("listDirectory", {}), tool_call("listDirectory", {}), tool_call("listDirectory", {}),
              answer("functions.listDirectory:\n{ }"), answer("never asked")]
    done, requests = run_script(apple_code_bin, workspace, script, "list the files in this folder")
    assert done.returncode == 1, done.stderr
    lines = events(done.stdout)
    assert lines[-1]["subtype"] == "error_backend" and "kept calling tools" in lines[-1]["result"]
    assert lines[-1]["num_turns"] == 4 and len(requests) == 4
    asking = requests[3]
    assert "tools" not in asking
    assert asking["messages"][-1]["content"] == "list the files in this folder"
    # Requests without tools carry no tool-call structure to imitate, only the results, folded.
    assert any("tool_calls" in m for m in requests[2]["messages"])
    assert {m["role"] for m in asking["messages"]} == {"system", "user"}
    assert any(m["content"].startswith(".: ") and "greet.py" in m["content"] for m in asking["messages"])
