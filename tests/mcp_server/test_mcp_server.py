"""``apple-flow mcp`` driven by the MCP SDK's own client over stdio, with the real apple-code binary answering from
the scripted OpenAI-compatible server (a real HTTP server process). Nothing is mocked."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.to_thread
import pytest
from mcp import ClientSession

from support.daemon_process import wait_for
from support.mcp_client import call, structured, text_of, tools, with_session
from support.ports import closed_port_url
from support.scripted_server import MODEL_ID, ScriptedServer, answer, tool_call

T = TypeVar("T")
GREET = 'def greet(name):\n    return f"Hello, {name}!"\n'
READ_ONLY_TOOLS = {"readFile", "listDirectory", "searchFiles", "searchContent"}


@pytest.fixture
def folders(tmp_path: Path) -> dict[str, Path]:
    """The default workspace (with greet.py), an allowed root with a project in it, and a folder not allowed."""
    made = {name: tmp_path / name for name in ("workspace", "allowed", "elsewhere")}
    for path in made.values():
        path.mkdir()
    (made["workspace"] / "greet.py").write_text(GREET)
    (made["allowed"] / "project").mkdir()
    return made


@pytest.fixture
def serve(apple_code_bin: Path, tmp_path: Path, folders: dict[str, Path]) -> Callable[..., Any]:
    """Runs ``body(session)`` against ``apple-flow mcp`` whose model is the server at ``url``."""

    def run(url: str, body: Callable[[ClientSession], Awaitable[T]], env_file: Path | None = None,
            **settings: str) -> T:
        env = {
            "APPLE_FLOW_AFM_COMMAND": str(apple_code_bin),
            "APPLE_FLOW_AFM_BACKEND": "openai",
            "APPLE_FLOW_AFM_BASE_URL": url,
            "APPLE_FLOW_AFM_MODEL": MODEL_ID,
            "APPLE_FLOW_AFM_TIMEOUT_SECONDS": "30",
            "APPLE_FLOW_DEFAULT_WORKSPACE": str(folders["workspace"]),
            "APPLE_FLOW_ALLOWED_WORKSPACES": str(folders["allowed"]),
            "APPLE_FLOW_DB_PATH": str(tmp_path / "state" / "relay.db"),
            "APPLE_FLOW_WEB_ENABLED": "false",
            **settings,
        }
        return with_session(env, tmp_path, body, env_file)

    return run


def user_text(request: dict[str, Any]) -> str:
    return "\n".join(str(m.get("content") or "") for m in request["messages"] if m["role"] == "user")


def system_text(request: dict[str, Any]) -> str:
    return "\n".join(str(m.get("content") or "") for m in request["messages"] if m["role"] == "system")


# --- listing ----------------------------------------------------------------------------------------------------

def test_the_tools_are_listed_with_their_schemas(serve: Callable[..., Any]) -> None:
    listed = serve(closed_port_url(), tools)
    by_name = {tool.name: tool for tool in listed}
    assert set(by_name) == {"apple_foundation_models", "run_task", "notify_owner", "ask_owner", "send_file_to_owner"}
    action = by_name["apple_foundation_models"].input_schema["properties"]["action"]
    assert action["enum"] == ["status", "hardware", "models", "generate", "respond", "summarize", "classify"]
    task = by_name["run_task"].input_schema
    assert task["required"] == ["prompt"]
    assert task["properties"]["read_only"]["default"] is True
    assert {"cwd", "verify", "timeout_seconds"} <= set(task["properties"])
    assert by_name["apple_foundation_models"].annotations.read_only_hint is True


# --- apple_foundation_models --------------------------------------------------------------------------------------

def test_status_hardware_and_models(serve: Callable[..., Any]) -> None:
    async def body(session: ClientSession) -> list[dict[str, Any]]:
        found = []
        for action in ("status", "hardware", "models"):
            result, _ = await call(session, "apple_foundation_models", {"action": action})
            found.append(structured(result))
        return found

    with ScriptedServer([]) as server:
        status, hardware, models = serve(server.url, body)
    assert status["backend"] == "openai" and status["available"] is True
    assert server.url in status["reason"]
    assert status["apple_intelligence"]["available"] is False  # no FoundationModels on this machine
    assert status["apple_intelligence"]["reason"]
    assert status["context_tokens"] == 4096
    assert hardware["memory_bytes"] > 0 and hardware["os"] and hardware["chip"]
    assert models["models"] == [{"backend": "openai", "id": MODEL_ID}]
    assert models["server"]["base_url"] == server.url


def test_generate_respond_summarize_run_without_tools(serve: Callable[..., Any]) -> None:
    async def body(session: ClientSession) -> list[dict[str, Any]]:
        calls = [
            {"action": "generate", "prompt": "Write a haiku about tea.", "max_tokens": 30, "temperature": 0.5},
            {"action": "respond", "prompt": "Hi", "system": "Answer like a pirate."},
            {"action": "summarize", "text": "A long story about a cat who sat on a mat all day."},
        ]
        return [structured((await call(session, "apple_foundation_models", c))[0]) for c in calls]

    with ScriptedServer([answer("Steam rises."), answer("Ahoy!"), answer("A cat sat.")]) as server:
        generated, responded, summary = serve(server.url, body)
        requests = server.requests()
    assert generated == {"text": "Steam rises.", "backend": "openai", "model": MODEL_ID}
    assert responded["text"] == "Ahoy!" and summary["text"] == "A cat sat."
    assert len(requests) == 3
    assert all("tools" not in request for request in requests)  # apple-code --no-tools
    assert requests[0]["max_tokens"] == 30 and requests[0]["temperature"] == 0.5
    assert requests[1]["temperature"] == 0  # not given: apple-code's deterministic default
    assert "Write a haiku about tea." in user_text(requests[0])
    assert "Answer like a pirate." in system_text(requests[1])
    assert "Summarize" in user_text(requests[2]) and "a cat who sat on a mat" in user_text(requests[2])


def test_classify_returns_one_of_the_labels_or_says_it_did_not(serve: Callable[..., Any]) -> None:
    async def body(session: ClientSession) -> list[Any]:
        args = {"action": "classify", "text": "I love it", "labels": ["positive", "negative"]}
        first, _ = await call(session, "apple_foundation_models", args)
        second, _ = await call(session, "apple_foundation_models", args)
        return [structured(first), second]

    with ScriptedServer([answer("Positive."), answer("I cannot tell.")]) as server:
        label, refused = serve(server.url, body)
        prompt = user_text(server.requests()[0])
    assert label["text"] == "positive"
    assert "positive, negative" in prompt and "I love it" in prompt
    assert refused.is_error
    assert "not one of the labels" in text_of(refused)


def test_an_unavailable_model_is_an_error_that_says_why(serve: Callable[..., Any]) -> None:
    async def body(session: ClientSession) -> Any:
        return (await call(session, "apple_foundation_models", {"action": "generate", "prompt": "hi"}))[0]

    url = closed_port_url()
    result = serve(url, body)
    assert result.is_error
    message = text_of(result)
    assert "no model available" in message and url in message
    assert "apple-flow model start" in message  # the fix


def test_bad_arguments_are_errors(serve: Callable[..., Any]) -> None:
    async def body(session: ClientSession) -> list[Any]:
        return [(await call(session, "apple_foundation_models", args))[0] for args in (
            {"action": "generate"}, {"action": "classify", "text": "x", "labels": ["only"]}, {"action": "dance"},
            {"action": "generate", "prompt": "hi", "temperature": 5},
        )]

    results = serve(closed_port_url(), body)
    assert all(result.is_error for result in results)
    assert "prompt must not be empty" in text_of(results[0])
    assert "at least two labels" in text_of(results[1])
    assert "temperature must be from 0 to 2" in text_of(results[3])


# --- run_task -----------------------------------------------------------------------------------------------------

def test_run_task_reads_in_the_default_workspace_and_reports_progress(serve: Callable[..., Any]) -> None:
    async def body(session: ClientSession) -> tuple[Any, list[str]]:
        return await call(session, "run_task", {"prompt": "What does greet.py do?"})

    with ScriptedServer([tool_call("readFile", {"path": "greet.py"}), answer("It greets by name.")]) as server:
        result, progress = serve(server.url, body)
        requests = server.requests()
    done = structured(result)
    assert done["status"] == "answered" and done["answer"] == "It greets by name."
    assert done["files_changed"] == [] and done["check"] is None
    assert "reading greet.py" in progress
    assert {tool["function"]["name"] for tool in requests[0]["tools"]} == READ_ONLY_TOOLS  # read_only by default
    assert 'return f"Hello, {name}!"' in str(requests[1]["messages"])  # the file was really read


def test_run_task_changes_files_and_reports_the_check(serve: Callable[..., Any], folders: dict[str, Path]) -> None:
    project = folders["allowed"] / "project"

    async def body(session: ClientSession) -> tuple[Any, list[str]]:
        return await call(session, "run_task", {
            "prompt": "Create done.txt", "cwd": str(project), "read_only": False, "verify": "test -f done.txt",
            "timeout_seconds": 30,
        })

    with ScriptedServer([tool_call("writeFile", {"path": "done.txt", "content": "yes\n"}), answer("Created.")]) as s:
        result, progress = serve(s.url, body)
    done = structured(result)
    assert (project / "done.txt").read_text() == "yes\n"
    assert done["files_changed"] == ["done.txt"] and done["answer"] == "Created."
    assert done["check"]["command"] == "test -f done.txt" and done["check"]["passed"] is True
    assert "writing done.txt" in progress and "check passed: test -f done.txt" in progress


def test_run_task_refuses_a_workspace_the_owner_did_not_allow(
    serve: Callable[..., Any], folders: dict[str, Path]
) -> None:
    async def body(session: ClientSession) -> list[Any]:
        outside = {"prompt": "list files", "cwd": str(folders["elsewhere"])}
        escape = {"prompt": "list files", "cwd": str(folders["allowed"] / "project" / ".." / ".." / "elsewhere")}
        relative = {"prompt": "list files", "cwd": "elsewhere"}
        verify_read_only = {"prompt": "fix it", "verify": "true"}
        return [(await call(session, "run_task", args))[0] for args in (outside, escape, relative, verify_read_only)]

    with ScriptedServer([]) as server:
        results = serve(server.url, body)
        assert server.requests() == []  # nothing ran
    assert all(result.is_error for result in results)
    assert "outside the folders the owner allowed" in text_of(results[0])
    assert str(folders["allowed"]) in text_of(results[0])
    assert "outside the folders the owner allowed" in text_of(results[1])
    assert "absolute path" in text_of(results[2])
    assert "verify needs read_only false" in text_of(results[3])


def test_run_task_cannot_read_the_settings_file_it_was_given(
    serve: Callable[..., Any], folders: dict[str, Path]
) -> None:
    settings = folders["workspace"] / "apple-flow.env"  # inside the workspace, under another name than .env
    settings.write_text("APPLE_FLOW_WEB_TOKEN=not-for-the-agent-0123456789abcdef\n")

    async def body(session: ClientSession) -> Any:
        return (await call(session, "run_task", {"prompt": "Read apple-flow.env"}))[0]

    with ScriptedServer([tool_call("readFile", {"path": "apple-flow.env"}), answer("I could not.")]) as server:
        result = serve(server.url, body, env_file=settings)
        requests = server.requests()
    assert structured(result)["answer"] == "I could not."
    sent = str(requests[1]["messages"])
    assert "is hidden" in sent and "not-for-the-agent" not in sent


def test_a_cancelled_run_task_stops_apple_code(serve: Callable[..., Any]) -> None:
    slow = answer("word " * 200, chunk_delay=0.2)  # streamed slowly: a stopped client shows as a disconnect

    with ScriptedServer([slow]) as server:
        async def body(session: ClientSession) -> None:
            async with anyio.create_task_group() as group:
                group.start_soon(call, session, "run_task", {"prompt": "Say many words."})
                await anyio.to_thread.run_sync(lambda: wait_for(server.requests, 30, "the model's request"))
                group.cancel_scope.cancel()  # the MCP client gives up: it sends notifications/cancelled
            await anyio.to_thread.run_sync(lambda: wait_for(server.disconnects, 30, "apple-code to be stopped"))

        serve(server.url, body)
        stopped = server.disconnects()[0]
    assert stopped["chunks"] < stopped["total"]  # cut off, not finished


def test_run_task_without_a_model_is_an_error(serve: Callable[..., Any]) -> None:
    async def body(session: ClientSession) -> Any:
        return (await call(session, "run_task", {"prompt": "hi"}))[0]

    result = serve(closed_port_url(), body)
    assert result.is_error and "No model available" in text_of(result)
