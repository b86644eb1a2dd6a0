"""The real apple-code against the scripted server: a model that loops gets its earlier results instead of the
calls running again and then one request for its answer in plain words, which carries no words of ours for it to
echo; a huge reply (a 10,000-character tool name, 40 calls at once) does not end the run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from support.apple_code_run import request_tokens, run_scripted
from support.scripted_server import answer, tool_call, tool_calls

TASK = "what is in this folder?"

pytestmark = pytest.mark.usefixtures("notes")  # notes.txt in the workspace


def user_texts(body: dict[str, Any]) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "user"]


def test_a_repeated_call_gets_its_earlier_result_and_does_not_run_again(
    apple_code_bin: Path, workspace: Path
) -> None:
    count = {"command": "echo ran >> count.txt && wc -l < count.txt"}
    script = [tool_call("runCommand", count), tool_call("listDirectory", {}), tool_call("runCommand", count),
              answer("It ran once.")]
    done, lines, requests = run_scripted(apple_code_bin, workspace, script, "run it")
    assert done.returncode == 0, done.stderr
    assert (workspace / "count.txt").read_text() == "ran\n"
    assert lines[-1]["commands_run"] == 1
    results = [line for line in lines if line["type"] == "tool_result"]
    assert [r["name"] for r in results] == ["runCommand", "listDirectory", "runCommand"]
    assert "earlier result" in results[2]["summary"]
    # The model gets the earlier output again, with a short note, and the run goes on to the answer.
    last_result = requests[3]["messages"][-1]["content"]
    assert last_result.startswith("exit code 0\n1\n") and "earlier result, not run again" in last_result
    assert "tools" in requests[3]
    assert lines[-1]["result"] == "It ran once."


def test_a_change_in_between_runs_the_call_again(apple_code_bin: Path, workspace: Path) -> None:
    read = tool_call("readFile", {"path": "notes.txt"})
    script = [read, tool_call("writeFile", {"path": "notes.txt", "content": "buy bread\n"}), read, answer("ok")]
    done, lines, requests = run_scripted(apple_code_bin, workspace, script, "update the notes")
    assert done.returncode == 0, done.stderr
    assert "buy bread" in json.dumps(requests[3]["messages"][-1])
    assert not any("earlier result" in line.get("summary", "") for line in lines)


def test_the_same_call_a_third_time_asks_for_the_answer_without_our_words(
    apple_code_bin: Path, workspace: Path
) -> None:
    listing = tool_call("listDirectory", {})
    script = [listing, listing, listing, answer("The folder holds notes.txt.")]
    done, lines, requests = run_scripted(apple_code_bin, workspace, script, TASK)
    assert done.returncode == 0, done.stderr
    assert lines[-1]["result"] == "The folder holds notes.txt."
    assert len(requests) == 4 and lines[-1]["num_turns"] == 4
    assert [line["name"] for line in lines if line["type"] == "tool_call"] == ["listDirectory", "listDirectory"]
    assert any(line["type"] == "notice" and "third time" in line["message"] for line in lines)
    asking = requests[3]
    assert "tools" not in asking and "tool_choice" not in asking
    # Every user message is the task itself or a tool result: nothing of ours for the model to echo.
    texts = user_texts(asking)
    assert texts[-1] == TASK
    # Results are headed by what they hold (".: 1 entry"), not by a "Result of" the model would repeat.
    assert all(text == TASK or text.startswith(".: 1 entry") for text in texts), texts


def test_an_empty_answer_is_asked_again_with_the_users_own_message(apple_code_bin: Path, workspace: Path) -> None:
    done, lines, requests = run_scripted(apple_code_bin, workspace, [answer(""), answer("Hello!")], "hi")
    assert done.returncode == 0, done.stderr
    assert lines[-1]["result"] == "Hello!"
    assert "tools" not in requests[1]
    assert [m["role"] for m in requests[1]["messages"]] == ["system", "user"]
    assert user_texts(requests[1]) == ["hi"]


def test_the_last_turn_of_max_turns_asks_for_the_answer(apple_code_bin: Path, workspace: Path) -> None:
    script = [tool_call("listDirectory", {}), tool_call("readFile", {"path": "notes.txt"}),
              answer("It says buy milk.")]
    done, lines, requests = run_scripted(apple_code_bin, workspace, script, TASK, "--max-turns", "3")
    assert done.returncode == 0, done.stderr
    assert lines[-1]["result"] == "It says buy milk."
    assert ["tools" in body for body in requests] == [True, True, False]
    assert user_texts(requests[2])[-1] == TASK


def test_a_huge_tool_name_does_not_end_the_run(apple_code_bin: Path, workspace: Path) -> None:
    """The error result echoed a 10,000-character unknown name whole, and the history kept
    it: every later request was over the budget (exit 4)."""
    name = "x" * 10_000
    script = [tool_call(name, {}), tool_call("listDirectory", {}), answer("notes.txt")]
    done, lines, requests = run_scripted(apple_code_bin, workspace, script, TASK)
    assert done.returncode == 0, done.stderr
    assert lines[-1]["result"] == "notes.txt"
    error = next(line for line in lines if line["type"] == "tool_result")
    assert not error["ok"] and "unknown tool" in error["summary"] and len(error["summary"]) < 300
    assert all(request_tokens(body) <= 4096 for body in requests)
    assert all(len(json.dumps(body)) < 20_000 for body in requests)


def test_forty_calls_in_one_reply_run_the_first_eight_and_the_loop_goes_on(
    apple_code_bin: Path, workspace: Path
) -> None:
    """40 calls in one reply (each with a path of 150 digits) no longer end the run with exit
    4: the first 8 run, the 9th gets one error result for the rest, the others are left out."""
    many = tool_calls(*[tool_call("readFile", {"path": f"{i:03d}" + "7" * 147}) for i in range(40)])
    done, lines, requests = run_scripted(apple_code_bin, workspace, [many, answer("none of them exist")], TASK)
    assert done.returncode == 0, done.stderr
    assert lines[-1]["result"] == "none of them exist"
    results = [line for line in lines if line["type"] == "tool_result"]
    assert len(results) == 9 and len([line for line in lines if line["type"] == "tool_call"]) == 9
    assert "made 40 tool calls; only the first 8 were run" in results[8]["summary"]
    assert all(request_tokens(body) <= 4096 for body in requests)
    sent_calls = next(m for m in requests[1]["messages"] if m["role"] == "assistant")["tool_calls"]
    assert len(sent_calls) == 9


def test_results_folded_for_the_model_carry_no_call_ids(apple_code_bin: Path, workspace: Path) -> None:
    """A folded result's heading names the tool, not the call id: llama-cpp-python's ids
    (`call__0_writeFile_cmpl-f9...`) look like file names, and SmolLM2 echoed one as part of its answer (bench_demo);
    in an answer request the calls are not shown, so an id pairs the result with nothing anyway."""
    llama_id = "call__0_listDirectory_cmpl-4c5c3a86-86c0-447f-a9dc-729996611ca3"
    script = [tool_call("listDirectory", {}, id=llama_id), answer(""), answer("It holds notes.txt.")]
    done, lines, requests = run_scripted(apple_code_bin, workspace, script, TASK)
    assert done.returncode == 0, done.stderr
    assert lines[-1]["result"] == "It holds notes.txt."
    asking = requests[2]
    assert "tools" not in asking
    results = [text for text in user_texts(asking) if text != TASK]
    assert len(results) == 1 and results[0].startswith(".: 1 entry:\nnotes.txt"), results
    assert "cmpl-4c5c3a86" not in json.dumps(asking["messages"])
