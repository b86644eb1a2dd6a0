"""The default local model as it is served (Qwen2.5-Coder-0.5B behind apple-flow's tool-call handler): its calls
come back as OpenAI ``tool_calls``, streamed or not, and through the real apple-code it reads the file it is asked
about and answers from it (deterministic: apple-code sends temperature 0)."""

from __future__ import annotations

import json
import subprocess
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from apple_flow.localmodel import DEFAULT_MODEL, LocalModelServer
from support.local_model import running_local_model

pytestmark = [pytest.mark.local_model, pytest.mark.slow]

READ_FILE = {"type": "function", "function": {
    "name": "readFile", "description": "Read a text file (numbered lines).",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}
LIST = {"type": "function", "function": {
    "name": "listDirectory", "description": "List a folder.",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}


@pytest.fixture(scope="module")
def default_model_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalModelServer]:
    with running_local_model(tmp_path_factory.mktemp("default-model"), context_tokens=8192,
                             model=DEFAULT_MODEL) as server:
        yield server


def post(url: str, body: dict[str, Any]) -> bytes:
    request = urllib.request.Request(f"{url}/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=180) as response:
        return bytes(response.read())


def request(prompt: str, stream: bool = False) -> dict[str, Any]:
    return {"model": DEFAULT_MODEL, "stream": stream, "temperature": 0, "max_tokens": 256, "tool_choice": "auto",
            "tools": [READ_FILE, LIST],
            "messages": [{"role": "system", "content": "You are a coding agent. Use the tools to look."},
                         {"role": "user", "content": prompt}]}


def test_the_server_says_what_it_serves(default_model_server: LocalModelServer) -> None:
    served = default_model_server.served()
    assert served is not None
    assert (served.name, served.file, served.context_tokens) == (
        DEFAULT_MODEL, "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", 8192)


def test_a_call_comes_back_as_structured_tool_calls(default_model_server: LocalModelServer) -> None:
    reply = json.loads(post(default_model_server.url, request("Read notes.txt and tell me its first word.")))
    choice = reply["choices"][0]
    calls = choice["message"].get("tool_calls")
    assert calls, choice
    assert calls[0]["function"]["name"] == "readFile"
    assert json.loads(calls[0]["function"]["arguments"]) == {"path": "notes.txt"}
    assert choice["finish_reason"] == "tool_calls"
    assert reply["usage"]["prompt_tokens"] > 100


def test_a_streamed_call_comes_back_as_a_tool_calls_delta(default_model_server: LocalModelServer) -> None:
    events = [line.removeprefix(b"data: ") for line in post(default_model_server.url, request(
        "Read todo.md and tell me its first word.", stream=True)).splitlines() if line.startswith(b"data: ")]
    chunks = [json.loads(event) for event in events if event != b"[DONE]"]
    deltas = [c["choices"][0]["delta"] for c in chunks]
    calls = [call for delta in deltas for call in delta.get("tool_calls", [])]
    assert [call["function"]["name"] for call in calls] == ["readFile"]
    assert json.loads(calls[0]["function"]["arguments"]) == {"path": "todo.md"}
    # The call's JSON was never shown as text.
    assert "tool_call" not in "".join(delta.get("content") or "" for delta in deltas)
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_a_streamed_answer_arrives_whole_while_another_request_waits(default_model_server: LocalModelServer) -> None:
    """A request that arrives while a reply streams waits its turn: llama-cpp-python's default (interrupt_requests)
    ended the streamed reply at once, so answers came back as their first word and calls without their finish."""
    body = request("Count from 1 to 10, separated by spaces, and nothing else.", stream=True)
    del body["tools"], body["tool_choice"]
    url = default_model_server.url
    http_request = urllib.request.Request(f"{url}/chat/completions", data=json.dumps(body).encode(),
                                          headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(http_request, timeout=180) as response:
        first = response.readline()  # the stream has begun: the model is busy with it
        waiting = threading.Thread(target=lambda: urllib.request.urlopen(f"{url}/models", timeout=180).read())
        waiting.start()
        rest = response.read()
    waiting.join(timeout=180)
    events = [line.removeprefix(b"data: ") for line in (first + rest).splitlines() if line.startswith(b"data: ")]
    chunks = [json.loads(event) for event in events if event != b"[DONE]"]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop", chunks[-3:]
    assert "usage" in chunks[-1]
    assert text.split()[:5] == ["1", "2", "3", "4", "5"], text  # more than its first word


def test_allowed_tools_requires_a_call_to_one_of_them(default_model_server: LocalModelServer) -> None:
    """OpenAI's allowed_tools shape, through the served process's middleware: the prompt shows both tools, the call
    must be to the one allowed, even for a request the model would answer in words."""
    body = request("In one word: what colour is the sky on a clear day?")
    body["tool_choice"] = {"type": "allowed_tools", "allowed_tools": {
        "mode": "required", "tools": [{"type": "function", "function": {"name": "listDirectory"}}]}}
    reply = json.loads(post(default_model_server.url, body))
    calls = reply["choices"][0]["message"].get("tool_calls")
    assert calls and calls[0]["function"]["name"] == "listDirectory", reply


def test_a_plain_question_is_answered_in_words(default_model_server: LocalModelServer) -> None:
    body = request("In one word: what colour is the sky on a clear day?")
    body["tools"] = [READ_FILE]
    reply = json.loads(post(default_model_server.url, body))
    message = reply["choices"][0]["message"]
    assert not message.get("tool_calls")
    assert "blue" in message["content"].lower()


def test_apple_code_on_the_default_model_reads_the_file_it_is_asked_about(
        default_model_server: LocalModelServer, apple_code_bin: Path, tmp_path: Path) -> None:
    """The whole path on the real model: apple-code's own request (instructions, seven tools, temperature 0, the
    first request required to look), a structured call, the file's text back, an answer from it."""
    (tmp_path / "notes.txt").write_text("Bananas are yellow when ripe.\n")
    (tmp_path / "main.py").write_text("print('hello')\n")
    done = subprocess.run(
        [str(apple_code_bin), "--backend", "openai", "--base-url", default_model_server.url, "--cwd", str(tmp_path),
         "--timeout", "240", "--max-turns", "4", "--output-format", "stream-json", "--verbose",
         "Read notes.txt and tell me its first word."],
        capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    events = [json.loads(line) for line in done.stdout.splitlines()]
    calls = [event for event in events if event["type"] == "tool_call"]
    assert done.returncode == 0, done.stderr[-2000:]
    assert calls and calls[0]["name"] == "readFile" and calls[0]["arguments"]["path"] == "notes.txt"
    assert "reply 1: the model wrote" not in done.stderr  # the first call came back structured
    assert "banana" in events[-1]["result"].lower()
