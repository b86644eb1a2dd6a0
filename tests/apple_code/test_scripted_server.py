"""The scripted OpenAI-compatible server itself: wire format, replay order, recording, failure steps."""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request
from typing import Any

import pytest

from support.scripted_server import (
    EXHAUSTED,
    ScriptedServer,
    answer,
    hang,
    http_error,
    raw_body,
    tool_call,
    tool_calls,
)


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
