"""AfmConnector driving the real apple-code binary, which talks to the scripted OpenAI-compatible server (a real
HTTP server process). Nothing here is mocked: argv, stdin, the event stream and the requests are all real."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from apple_flow.config import Settings, load_settings
from apple_flow.connectors import AfmConnector, ConnectorError, Exchange, Status
from apple_flow.connectors.runner import ProcessRunner
from support.ports import closed_port_url
from support.scripted_server import ScriptedServer, answer, hang, http_error, tool_call
from support.turns import outcome, reply, with_progress

GREET = 'def greet(name):\n    return f"Hello, {name}!"\n'


@pytest.fixture(autouse=True)
def no_apple_code_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """A developer's APPLE_CODE_* settings must not change what the binary does here."""
    import os

    for name in list(os.environ):
        if name.startswith("APPLE_CODE_"):
            monkeypatch.delenv(name)


@pytest.fixture
def greet_project(workspace: Path) -> Path:
    (workspace / "greet.py").write_text(GREET, encoding="utf-8")
    return workspace


@pytest.fixture
def settings_for(apple_code_bin: Path, greet_project: Path) -> Callable[..., Settings]:
    def make(server: ScriptedServer | None = None, **overrides: Any) -> Settings:
        values: dict[str, Any] = {
            "afm_command": str(apple_code_bin),
            "default_workspace": greet_project,
            "afm_backend": "openai",
            "afm_model": "scripted",
            "afm_timeout_seconds": 30,
        }
        if server is not None:
            values["afm_base_url"] = server.url
        values.update(overrides)
        return load_settings(env_file=None, **values)

    return make


def system_and_user(request: dict[str, Any]) -> tuple[str, str]:
    messages = request["messages"]
    system = "\n".join(str(m.get("content") or "") for m in messages if m["role"] == "system")
    user = next(str(m["content"]) for m in messages if m["role"] == "user")
    return system, user


def offered_tools(request: dict[str, Any]) -> set[str]:
    return {tool["function"]["name"] for tool in request.get("tools") or []}


def test_second_turn_carries_the_first_exchange(settings_for: Callable[..., Settings]) -> None:
    with ScriptedServer([answer("It greets."), answer("Yes, by name.")]) as server:
        connector = AfmConnector(settings_for(server))
        first = outcome(connector, "What does greet.py do?")
        assert first.text == "It greets."
        exchanges = (Exchange("What does greet.py do?", first.text),)  # what the daemon keeps and hands back
        assert reply(connector, "Does it use the name?", exchanges=exchanges) == "Yes, by name."
        _, second = system_and_user(server.requests()[1])
    assert "User: What does greet.py do?\nAssistant: It greets." in second
    # The new message last, then the file the conversation names (apple-code shows it with the task).
    assert second.split("\n\n")[-2].endswith("New message:\nDoes it use the name?")
    assert second.endswith("greet.py:\n```\n" + GREET.rstrip("\n") + "\n```")


def test_backend_failure_is_an_execution_error(settings_for: Callable[..., Settings]) -> None:
    with ScriptedServer([http_error(400, '{"error":{"message":"bad request from script"}}')] * 5) as server:
        result = outcome(AfmConnector(settings_for(server)), "hi")
    assert (result.status, result.exit_code, result.subtype) == (Status.FAILED, 1, "error_backend")
    assert result.as_text().startswith("Error: apple-code execution failed (exit code 1).")


def test_timeout_gives_the_timeout_reply(settings_for: Callable[..., Settings]) -> None:
    with ScriptedServer([hang()]) as server:
        connector = AfmConnector(settings_for(server, afm_timeout_seconds=2), runner=ProcessRunner(0.5, 0.5))
        result = outcome(connector, "hi")
    assert (result.status, result.exit_code, result.subtype) == (Status.TIMED_OUT, 124, "error_timeout")
    assert result.as_text().startswith("Error: Request timed out after 2s.")


def test_unreachable_server_says_no_model_is_available(settings_for: Callable[..., Settings]) -> None:
    connector = AfmConnector(settings_for(None, afm_base_url=closed_port_url()))
    result = outcome(connector, "hi")
    assert result.status is Status.NO_MODEL
    text = result.as_text()
    assert text.startswith("Error: apple-code execution failed (exit code 3). No model available: ")
    assert ".." not in text  # apple-code's reason ends with a full stop; the hint follows as a new sentence
    # The backend is already openai with a base URL: the advice is to start that server, not to set them.
    assert "Start that server" in text and "set APPLE_FLOW_AFM_BACKEND=openai" not in text
    with pytest.raises(ConnectorError, match="no model available") as raised:
        connector.ensure_started()
    assert ".." not in str(raised.value)


def test_ensure_started_asks_the_server_for_its_models(settings_for: Callable[..., Settings]) -> None:
    with ScriptedServer([]) as server:
        AfmConnector(settings_for(server)).ensure_started()
        asked = [(entry["method"], entry["path"]) for entry in server.request_log()]
    assert asked == [("GET", "/v1/models")]  # the check reached the configured server, and ran no turn


def test_missing_workspace_option_is_refused_before_running(
    settings_for: Callable[..., Settings], tmp_path: Path
) -> None:
    with ScriptedServer([answer("never")]) as server:
        text = reply(AfmConnector(settings_for(server)), "hi", tmp_path / "missing")
        assert server.requests() == []
    assert text.startswith("Error: workspace ")


def test_turn_reads_a_file_and_answers_with_progress(settings_for: Callable[..., Settings]) -> None:
    script = [tool_call("readFile", {"path": "greet.py"}), answer("greet() returns a greeting.")]
    with ScriptedServer(script) as server:
        connector = AfmConnector(settings_for(server, soul_prompt="You are Flow, a terse assistant."))
        text, progress = with_progress(connector, "What does greet.py do?")
        requests = server.requests()
    assert text == "greet() returns a greeting."
    # Tool activity, then the streamed answer growing.
    assert [line for line in progress if not line.startswith("writing the answer")] == ["reading greet.py"]
    assert progress[-1] == f"writing the answer ({len(text)} characters so far)"
    assert len(requests) == 2
    system, user = system_and_user(requests[0])
    assert "You are Flow, a terse assistant." in system  # --system reached the model's instructions
    assert "You are Flow" not in user
    # No tools context, no history: the message, and the file it names as apple-code shows it.
    assert user.startswith("What does greet.py do?\n\ngreet.py:\n```\n")
    assert "Hello, {name}!" in str(requests[1]["messages"])  # the tool really read the workspace file


def test_planning_turn_is_read_only_for_real(settings_for: Callable[..., Settings], greet_project: Path) -> None:
    script = [tool_call("writeFile", {"path": "greet.py", "content": "broken"}), answer("Plan: edit greet.py.")]
    with ScriptedServer(script) as server:
        text = reply(AfmConnector(settings_for(server)), "plan: rename greet", read_only=True)
        tools = offered_tools(server.requests()[0])
    assert text == "Plan: edit greet.py."
    assert "writeFile" not in tools and "runCommand" not in tools and "readFile" in tools
    assert (greet_project / "greet.py").read_text(encoding="utf-8") == GREET  # the write was refused


def test_task_turn_edits_the_workspace(settings_for: Callable[..., Settings], greet_project: Path) -> None:
    script = [
        tool_call("readFile", {"path": "greet.py"}),  # a file is read before it is edited
        tool_call("editFile", {"path": "greet.py", "oldText": "Hello", "newText": "Hi"}),
        answer("Changed the greeting."),
    ]
    with ScriptedServer(script) as server:
        text, progress = with_progress(AfmConnector(settings_for(server)), "say Hi")
    assert text == "Changed the greeting."
    assert [line for line in progress if not line.startswith("writing the answer")] == ["reading greet.py",
                                                                                        "editing greet.py"]
    assert "Hi, {name}!" in (greet_project / "greet.py").read_text(encoding="utf-8")


def test_plan_option_runs_apple_code_plan_mode(settings_for: Callable[..., Settings]) -> None:
    script = [
        answer('["Read greet.py and say what it does"]'),  # the planner
        tool_call("readFile", {"path": "greet.py"}),  # the one worker
        answer("greet() returns Hello plus the name."),
        answer("Overall: greet.py greets by name."),  # the summary
    ]
    with ScriptedServer(script) as server:
        text, progress = with_progress(AfmConnector(settings_for(server)), "task: explain greet.py", plan=True)
        requests = server.requests()
    assert "greet() returns Hello plus the name." in text
    assert "Overall: greet.py greets by name." in text
    assert len(requests) == 4
    tool_lines = [line for line in progress if not line.startswith("writing the answer")]
    assert tool_lines == ["[1] reading greet.py"]  # tool calls of plan workers carry their subtask id
