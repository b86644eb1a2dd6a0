"""The real apple-code against the scripted server's streamed answers: requests stream, text
reaches stream-json as it is generated, tool calls arrive as deltas, the server's usage is used; a timeout or a
signal closes the stream (a streaming server stops generating then); servers that do not stream, or that answer a
streamed request with an empty stream (llama-cpp-python and an automatic tool choice), still work."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from support.apple_code_run import clean_env, events, run_scripted, scripted_args
from support.scripted_server import ScriptedServer, answer, empty_stream, tool_call, tool_calls
from support.waiting import wait_for

pytestmark = pytest.mark.usefixtures("notes")  # notes.txt in the workspace


def texts(lines: list[dict[str, Any]]) -> list[str]:
    return [line["delta"] for line in lines if line["type"] == "text"]


def test_requests_stream_and_text_events_grow_with_the_answer(apple_code_bin: Path, workspace: Path) -> None:
    answer_text = "The workspace holds notes.txt, a shopping list that says to buy milk."
    script = [tool_call("listDirectory", {"path": "."}), answer(answer_text)]
    done, lines, requests = run_scripted(apple_code_bin, workspace, script, "what is in the workspace?")
    assert done.returncode == 0, done.stderr
    assert all(body["stream"] is True for body in requests)
    assert all(body["stream_options"] == {"include_usage": True} for body in requests)
    # The answer arrived in the server's small pieces, each its own text event, before the result.
    pieces = texts(lines)
    assert len(pieces) > 5 and "".join(pieces) == answer_text
    assert lines[-1]["result"] == answer_text
    # The tool call arrived as deltas (head, then argument pieces) and ran.
    calls = [line for line in lines if line["type"] == "tool_call"]
    assert [(c["name"], c["arguments"]) for c in calls] == [("listDirectory", {"path": "."})]
    assert [line["ok"] for line in lines if line["type"] == "tool_result"] == [True]
    assert "notes.txt" in json.dumps(requests[1]["messages"][-1])


def test_several_streamed_calls_with_text_and_the_servers_usage(apple_code_bin: Path, workspace: Path) -> None:
    calls = tool_calls(tool_call("readFile", {"path": "notes.txt"}, id="r1"), tool_call("listDirectory", {}, id="l1"),
                       content="Looking.")
    calls["usage"] = {"prompt_tokens": 650, "completion_tokens": 30}
    script = [calls, answer("It says buy milk.", usage={"prompt_tokens": 700, "completion_tokens": 6})]
    done, lines, _ = run_scripted(apple_code_bin, workspace, script, "read notes.txt")
    assert done.returncode == 0, done.stderr
    results = [(line["id"], line["name"], line["ok"]) for line in lines if line["type"] == "tool_result"]
    assert results == [("r1", "readFile", True), ("l1", "listDirectory", True)]
    assert "".join(texts(lines)) == "Looking.\nIt says buy milk."
    assert lines[-1]["result"] == "It says buy milk."
    # The token counts are the server's, sent in the stream's last chunk; the fixed overhead (instructions and tool
    # definitions) is estimated, as this server has no tokenizer, so the usage says estimated.
    assert lines[-1]["usage"] == {"input_tokens": 1350, "output_tokens": 36, "estimated": True, "fixed_tokens": 599}


def test_a_server_that_does_not_stream_still_works(apple_code_bin: Path, workspace: Path) -> None:
    script = [tool_call("readFile", {"path": "notes.txt"}), answer("It says buy milk.")]
    done, lines, requests = run_scripted(apple_code_bin, workspace, script, "read notes.txt", streaming=False)
    assert done.returncode == 0, done.stderr
    assert lines[-1]["result"] == "It says buy milk."
    assert texts(lines) == ["It says buy milk."]
    assert all(body["stream"] is True for body in requests)


def test_an_empty_stream_is_asked_again_without_streaming(apple_code_bin: Path, workspace: Path) -> None:
    """llama-cpp-python answers a streamed request with tools, where the model picks a tool, with an empty
    stream: that request goes again unstreamed, as do later requests with tools; requests without tools stream."""
    script = [empty_stream(), tool_call("readFile", {"path": "notes.txt"}), tool_call("readFile", {"path": "x"}),
              answer(""), answer("It says buy milk.")]
    done, lines, requests = run_scripted(apple_code_bin, workspace, script, "read notes.txt")
    assert done.returncode == 0, done.stderr
    assert lines[-1]["result"] == "It says buy milk."
    assert [("tools" in body, body["stream"]) for body in requests] == [
        (True, True), (True, False), (True, False), (True, False), (False, True),
    ]
    assert "empty stream" in done.stderr
    assert lines[-1]["num_turns"] == 4


@pytest.mark.parametrize("how", ["timeout", "sigterm"])
def test_stopping_a_run_closes_its_stream(apple_code_bin: Path, workspace: Path, how: str) -> None:
    """A slow stream (a long generation): at --timeout or SIGTERM apple-code closes the connection, which is what
    makes a streaming server stop generating; the text so far is the partial answer."""
    slow = answer("word " * 200, chunk_delay=0.25)  # 250 chunks, about a minute
    extra = ("--timeout", "3") if how == "timeout" else ()
    with ScriptedServer([slow]) as server:
        process = subprocess.Popen(
            [str(apple_code_bin), *scripted_args(server.url, workspace, *extra), "say words"],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=clean_env(),
        )
        assert process.stdout is not None
        assert json.loads(process.stdout.readline())["type"] == "start"
        # Text events arrive while the answer is being generated.
        for _ in range(4):
            assert json.loads(process.stdout.readline())["type"] == "text"
        if how == "sigterm":
            process.send_signal(signal.SIGTERM)
        stopped = time.time()
        rest, _ = process.communicate(timeout=20)
        gone = wait_for(server.disconnects, 5, "the server to see apple-code go")
    lines = events(rest)
    assert process.returncode == (124 if how == "timeout" else 130)
    assert len(gone) == 1 and gone[0]["chunks"] < gone[0]["total"] / 2
    assert gone[0]["time"] - stopped < 6  # noticed at the server's next chunk after the close
    assert "word word" in str(lines[-1]["result"])


def test_waiting_for_a_slow_server_costs_apple_code_no_cpu(apple_code_bin: Path, workspace: Path) -> None:
    """apple-code waits for the model in poll(2). swift-corelibs-foundation's URLSession, which it used on Linux
    before, kept a core busy while waiting (6.6 s of CPU in an 8 s wait), and that core is the model server's on a
    two-core machine: each local-model reply took several times longer than the server needed."""
    wait = 2.0
    with ScriptedServer([answer("done", delay=wait)]) as server:
        process = subprocess.Popen([str(apple_code_bin), *scripted_args(server.url, workspace), "hi"],
                                   env=clean_env(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
    assert process.returncode == 0
    # Starting up, the request and the answer take a few hundredths of a second; a spinning wait takes most of 2 s.
    assert usage.ru_utime + usage.ru_stime < wait / 4
