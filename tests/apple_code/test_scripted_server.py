"""The scripted OpenAI-compatible server itself: wire format, replay order, recording, failure steps."""

from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request
from typing import Any

import pytest

from support.local_model import require_local_model
from support.scripted_server import (
    EXHAUSTED,
    ScriptedServer,
    answer,
    count_tokens,
    empty_stream,
    hang,
    http_error,
    prompt_tokens,
    raw_body,
    tool_call,
    tool_calls,
)
from support.waiting import wait_for


def post(url: str, body: dict[str, Any], timeout: float = 5.0) -> tuple[int, str]:
    request = urllib.request.Request(
        f"{url}/chat/completions", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def test_replays_tool_calls_then_answer_and_records_requests() -> None:
    script = [tool_call("readFile", {"path": "a.py"}, id="c7"), answer("done")]
    with ScriptedServer(script) as server:
        status, text = post(server.url, {"model": "m", "messages": [{"role": "user", "content": "hi"}]})
        assert status == 200
        message = json.loads(text)["choices"][0]["message"]
        assert message["content"] is None
        assert message["tool_calls"][0]["id"] == "c7"
        assert message["tool_calls"][0]["type"] == "function"
        assert json.loads(message["tool_calls"][0]["function"]["arguments"]) == {"path": "a.py"}
        assert json.loads(text)["choices"][0]["finish_reason"] == "tool_calls"

        _, text = post(server.url, {"model": "m", "messages": [], "n": 2})
        assert json.loads(text)["choices"][0]["message"] == {"role": "assistant", "content": "done"}
        _, text = post(server.url, {"model": "m", "messages": []})
        assert json.loads(text)["choices"][0]["message"]["content"] == EXHAUSTED

        bodies = server.requests()
        assert [b.get("n") for b in bodies] == [None, 2, None]
        assert bodies[0]["messages"] == [{"role": "user", "content": "hi"}]


def test_several_calls_in_one_message_and_malformed_arguments() -> None:
    step = tool_calls(tool_call("listDirectory", {"path": "."}), tool_call("readFile", '{"path": '))
    with ScriptedServer([step]) as server:
        _, text = post(server.url, {"messages": []})
        calls = json.loads(text)["choices"][0]["message"]["tool_calls"]
        assert [c["function"]["name"] for c in calls] == ["listDirectory", "readFile"]
        assert calls[1]["function"]["arguments"] == '{"path": '
        assert calls[0]["id"] != calls[1]["id"]


def test_models_endpoint_and_error_steps() -> None:
    with ScriptedServer([http_error(503, "overloaded"), raw_body("<html>not json</html>")]) as server:
        with urllib.request.urlopen(f"{server.url}/models", timeout=5) as response:
            assert json.load(response)["data"][0]["id"] == "scripted"
        assert post(server.url, {}) == (503, "overloaded")
        assert post(server.url, {}) == (200, "<html>not json</html>")
        assert [e["method"] for e in server.request_log()] == ["GET", "POST", "POST"]


def test_hang_accepts_and_never_answers() -> None:
    with ScriptedServer([hang()]) as server, pytest.raises((TimeoutError, socket.timeout, urllib.error.URLError)):
        post(server.url, {}, timeout=0.5)


def stream(url: str, body: dict[str, Any], timeout: float = 5.0) -> tuple[str, list[Any]]:
    """A streamed chat request: the content type and the ``data:`` payloads (JSON, or "[DONE]"), in order."""
    request = urllib.request.Request(
        f"{url}/chat/completions", data=json.dumps({**body, "stream": True}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=timeout) as response:
        kind = response.headers.get("Content-Type", "")
        text = response.read().decode()
    payloads = [line.removeprefix("data: ") for line in text.split("\n\n") if line.startswith("data: ")]
    return kind, [p if p == "[DONE]" else json.loads(p) for p in payloads]


def test_a_stream_request_gets_text_pieces_tool_call_deltas_usage_and_done() -> None:
    script = [answer("Hello there, friend.", usage={"prompt_tokens": 12, "completion_tokens": 5}),
              tool_calls(tool_call("readFile", {"path": "a.py"}, id="r1"), tool_call("listDirectory", {}))]
    with ScriptedServer(script) as server:
        kind, events = stream(server.url, {"messages": [], "stream_options": {"include_usage": True}})
        assert kind.startswith("text/event-stream")
        assert events[-1] == "[DONE]"
        chunks = events[:-1]
        assert all(c["object"] == "chat.completion.chunk" for c in chunks)
        text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
        assert text == "Hello there, friend."
        assert sum(1 for c in chunks if c["choices"] and c["choices"][0]["delta"].get("content")) > 1
        assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]][-1] == "stop"
        assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["prompt_tokens"] == 12

        _, events = stream(server.url, {"messages": []})  # no usage asked for: none sent
        deltas = [c["choices"][0]["delta"] for c in events[:-1]]
        calls: dict[int, dict[str, str]] = {}
        for delta in deltas:
            for piece in delta.get("tool_calls") or []:
                call = calls.setdefault(piece["index"], {"id": "", "name": "", "arguments": ""})
                call["id"] += piece.get("id", "")
                call["name"] += piece.get("function", {}).get("name", "")
                call["arguments"] += piece.get("function", {}).get("arguments", "")
        assert calls[0]["id"] == "r1" and calls[0]["name"] == "readFile"
        assert json.loads(calls[0]["arguments"]) == {"path": "a.py"}
        assert calls[1]["name"] == "listDirectory" and calls[1]["id"] != "r1"
        assert sum(1 for d in deltas if d.get("tool_calls")) > 3  # the arguments arrive in pieces
        assert not any("usage" in c for c in events[:-1])


def test_a_server_that_does_not_stream_and_an_empty_stream() -> None:
    with ScriptedServer([answer("whole")], streaming=False) as server:
        status, text = post(server.url, {"messages": [], "stream": True})
        assert status == 200 and json.loads(text)["choices"][0]["message"]["content"] == "whole"
    with ScriptedServer([empty_stream(), answer("after")]) as server:
        kind, events = stream(server.url, {"messages": []})
        assert kind.startswith("text/event-stream") and events == []
        _, text = post(server.url, {"messages": []})
        assert json.loads(text)["choices"][0]["message"]["content"] == "after"


def test_a_client_closing_a_slow_stream_is_recorded_and_stops_it() -> None:
    with ScriptedServer([answer("x" * 400, chunk_delay=0.2)]) as server:
        request = urllib.request.Request(
            f"{server.url}/chat/completions", data=json.dumps({"stream": True}).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=5) as response:
            response.readline()
        gone = wait_for(server.disconnects, 10, "the server to see the client go")
        assert len(gone) == 1 and gone[0]["chunks"] < gone[0]["total"]


def test_a_busy_models_endpoint() -> None:
    with ScriptedServer([], models_delay=1.5) as server:
        started = time.monotonic()
        with urllib.request.urlopen(f"{server.url}/models", timeout=10) as response:
            assert json.load(response)["data"][0]["id"] == "scripted"
        assert time.monotonic() - started >= 1.5


def post_path(root: str, path: str, body: Any) -> tuple[int, Any]:
    request = urllib.request.Request(f"{root}{path}", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_the_deterministic_tokenizer() -> None:
    assert count_tokens("") == 0
    assert count_tokens("abcd") == 1 and count_tokens("abcde") == 2
    assert count_tokens("12") == 1 and count_tokens("第") == 3
    assert count_tokens("<|im_start|>user") == 2


@pytest.mark.parametrize("kind", ["llama-cpp-python", "llama.cpp"])
def test_a_counting_server_tokenizes_and_reports_the_prompt_it_renders(kind: str) -> None:
    with ScriptedServer([answer("hello there")], tokenizer=kind, count_usage=True) as server:
        root = server.url.removesuffix("/v1")
        if kind == "llama-cpp-python":
            assert post_path(root, "/extras/tokenize/count", {"input": "abcdefgh"}) == (200, {"count": 2})
            assert post_path(root, "/extras/tokenize", {"input": "abcd"}) == (200, {"tokens": [0]})
            assert post_path(root, "/tokenize", {"content": "abcd"})[0] == 404
        else:
            assert post_path(root, "/tokenize", {"content": "abcdefgh"}) == (200, {"tokens": [0, 1]})
            assert post_path(root, "/extras/tokenize/count", {"input": "abcd"})[0] == 404
        assert post_path(root, "/tokenize" if kind == "llama.cpp" else "/extras/tokenize", {})[0] == 422
        body = {"model": "scripted", "messages": [{"role": "system", "content": "Be brief."},
                                                  {"role": "user", "content": "hi"}],
                "tools": [{"type": "function", "function": {"name": "readFile", "parameters": {"type": "object"}}}]}
        status, text = post(server.url, body)
        assert status == 200
        usage = json.loads(text)["usage"]
        assert usage["prompt_tokens"] == prompt_tokens(body) > count_tokens("Be brief.hi")
        assert usage["completion_tokens"] == count_tokens("hello there")
        assert [path for path, _ in server.tokenize_requests()][:1] in (["/extras/tokenize/count"], ["/tokenize"])


def test_a_server_counting_with_the_model_without_count_usage_counts_but_reports_no_usage() -> None:
    require_local_model()
    from apple_flow.localmodel import model_file

    with ScriptedServer([answer("hi"), answer("again")], count_model=str(model_file("smollm2-135m")),
                        count_context=64) as server:
        status, text = post(server.url, {"model": "scripted", "messages": [{"role": "user", "content": "hi"}]})
        assert status == 200 and "usage" not in json.loads(text), text
        # Still counted, and an overflow of its window refused as that server would.
        long = {"model": "scripted", "messages": [{"role": "user", "content": "word " * 200}]}
        assert post(server.url, long)[0] == 400
        first, refused = server.counted()
        assert first["prompt_tokens"] > 0 and refused["prompt_tokens"] is None and refused["error"]


def test_a_plain_server_has_no_tokenizer_and_reports_no_usage() -> None:
    with ScriptedServer([answer("hi")]) as server:
        assert post_path(server.url.removesuffix("/v1"), "/extras/tokenize/count", {"input": "x"})[0] == 404
        assert "usage" not in json.loads(post(server.url, {"messages": []})[1])
