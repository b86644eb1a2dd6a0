"""A server that refuses a request for its context length does not end the run: apple-code shrinks the request
and sends it again, then asks for a plain answer without tools. Each server's own error shape, answered by the
scripted server to the real binary."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from support.apple_code_run import request_tokens, run_scripted
from support.scripted_server import answer, http_error, tool_call

# The bodies as each server sends them (HTTP 400).
LLAMA_CPP_PYTHON = {"error": {
    "message": "This model's maximum context length is 4096 tokens. However, you requested 4608 tokens (4096 in the "
               "messages, 512 in the completion). Please reduce the length of the messages or completion.",
    "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}
LLAMA_CPP = {"error": {
    "code": 400, "message": "request (4706 tokens) exceeds the available context size (4096 tokens), try increasing it",
    "type": "exceed_context_size_error", "n_prompt_tokens": 4706, "n_ctx": 4096}}
OLLAMA = {"error": {"message": "the input length exceeds the context length", "type": "invalid_request_error",
                    "param": None, "code": None}}
OPENAI = {"error": {
    "message": "This model's maximum context length is 4096 tokens. However, your messages resulted in 4702 tokens "
               "(4420 in the messages, 282 in the functions). Please reduce the length of the messages or functions.",
    "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}
SHAPES: dict[str, dict[str, Any]] = {
    "llama-cpp-python": LLAMA_CPP_PYTHON, "llama.cpp": LLAMA_CPP, "ollama": OLLAMA, "openai": OPENAI,
}


def refused(shape: dict[str, Any]) -> dict[str, Any]:
    return http_error(400, json.dumps(shape))


@pytest.fixture
def big_file(workspace: Path) -> Path:
    path = workspace / "big.txt"
    path.write_text("".join(f"line {i}: some words to fill the window, and then some more words\n" for i in range(400)))
    return path


def notices(lines: list[dict[str, Any]]) -> list[str]:
    return [e["message"] for e in lines if e["type"] == "notice"]


@pytest.mark.parametrize("server", SHAPES)
def test_a_refused_request_is_shrunk_and_sent_again(apple_code_bin: Path, workspace: Path, big_file: Path,
                                                    server: str) -> None:
    script = [tool_call("readFile", {"path": "big.txt"}), refused(SHAPES[server]), answer("It has 400 lines.")]
    done, lines, requests = run_scripted(apple_code_bin, workspace, script, "How long is big.txt?")
    assert done.returncode == 0, done.stderr
    assert lines[-1]["subtype"] == "success" and lines[-1]["result"] == "It has 400 lines."
    assert len(requests) == 3
    refused_size, retried_size = request_tokens(requests[1]), request_tokens(requests[2])
    # Fitted to three quarters of the refused request, tools still offered.
    assert retried_size <= refused_size * 3 // 4
    assert requests[2]["tools"]
    said = [n for n in notices(lines) if "refused a request for its context length" in n]
    assert len(said) == 1 and "sent again" in said[0]
    assert SHAPES[server]["error"]["message"][:40] in said[0]


def test_refused_twice_asks_for_a_plain_answer_without_tools(apple_code_bin: Path, workspace: Path,
                                                             big_file: Path) -> None:
    script = [tool_call("readFile", {"path": "big.txt"}), refused(LLAMA_CPP_PYTHON), refused(LLAMA_CPP_PYTHON),
              answer("Four hundred lines.")]
    done, lines, requests = run_scripted(apple_code_bin, workspace, script, "How long is big.txt?")
    assert done.returncode == 0, done.stderr
    assert lines[-1]["result"] == "Four hundred lines."
    assert len(requests) == 4
    assert "tools" not in requests[3] and "tool_choice" not in requests[3]
    assert request_tokens(requests[3]) <= request_tokens(requests[2]) * 3 // 4
    assert any("asking for a plain-words answer without tools" in n for n in notices(lines))


def test_a_run_that_changed_files_ends_with_success_when_even_the_answer_is_refused(
        apple_code_bin: Path, workspace: Path, big_file: Path) -> None:
    script = [tool_call("writeFile", {"path": "notes.md", "content": "# notes\n"}),
              tool_call("readFile", {"path": "big.txt"})] + [refused(OLLAMA)] * 5
    done, lines, requests = run_scripted(apple_code_bin, workspace, script, "Write notes.md, then read big.txt.")
    assert done.returncode == 0, done.stderr
    assert (workspace / "notes.md").read_text() == "# notes\n"
    result = lines[-1]
    assert result["subtype"] == "success" and result["result"] == ""
    assert result["files_changed"] == ["notes.md"]
    assert len(requests) == 7
    assert any("even a plain answer request, shrunk, was refused" in n for n in notices(lines))


def test_a_run_that_did_nothing_ends_with_a_backend_error_that_says_what_to_do(apple_code_bin: Path,
                                                                               workspace: Path) -> None:
    done, lines, requests = run_scripted(apple_code_bin, workspace, [refused(LLAMA_CPP)] * 5, "Hello?")
    assert done.returncode == 1
    assert lines[-1]["subtype"] == "error_backend"
    assert "Start the server with a larger context" in lines[-1]["result"]
    assert len(requests) == 5


def test_another_http_400_is_still_an_error(apple_code_bin: Path, workspace: Path) -> None:
    body = json.dumps({"error": {"message": "unknown model", "type": "invalid_request_error"}})
    done, lines, requests = run_scripted(apple_code_bin, workspace, [http_error(400, body)], "Hello?")
    assert done.returncode == 1
    assert len(requests) == 1
    assert "HTTP 400" in lines[-1]["result"]
