"""apple-code as an MCP client (`--mcp-config`): the real binary starts a stdio server written with the MCP SDK in
this test, offers its tools to the scripted model as `mcp__<server>__<tool>` and passes the calls through."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from support.apple_code_run import clean_env, events, run_apple_code, scripted_args
from support.scripted_server import ScriptedServer, Step, answer, tool_call

SERVER = '''
import os
import sys

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("notes")
if os.environ.get("PID_FILE"):
    with open(os.environ["PID_FILE"], "w") as handle:
        handle.write(str(os.getpid()))
READ_ONLY = ToolAnnotations(read_only_hint=True)


@server.tool(annotations=READ_ONLY)
def lookup(word: str) -> str:
    """Look a word up."""
    return f"{word}: a test word (key={os.environ.get('APPLE_CODE_API_KEY', 'none')}, given={os.environ.get('GIVEN')})"


@server.tool()
def save(note: str, times: int = 1) -> str:
    """Save a note."""
    with open(os.environ["NOTES_FILE"], "a") as handle:
        handle.write(note * times + "\\n")
    return "saved"


@server.tool(annotations=READ_ONLY)
def tags(items: list[str]) -> str:
    """Join tags."""
    return ",".join(items)


@server.tool(annotations=READ_ONLY)
def crash() -> str:
    """Exits at once."""
    os._exit(3)


@server.tool(annotations=READ_ONLY)
def hang() -> str:
    """Never answers."""
    import threading
    threading.Event().wait()
    return "never"


if os.environ.get("BIG"):
    @server.tool(annotations=READ_ONLY, description="A manual. " + "It explains everything in detail. " * 200)
    def manual() -> str:
        return "read it"

server.run()
'''


@pytest.fixture
def config(tmp_path: Path) -> Path:
    script = tmp_path / "notes_server.py"
    script.write_text(SERVER)
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"notes": {
        "command": sys.executable, "args": [str(script)],
        "env": {"NOTES_FILE": str(tmp_path / "notes.txt"), "GIVEN": "yes"},
    }}}))
    return path


def with_config(path: Path, **changes: Any) -> Path:
    """The config at ``path`` with ``changes`` to its server (``allowedTools`` at the top)."""
    data = json.loads(path.read_text())
    allowed = changes.pop("allowedTools", None)
    data["mcpServers"]["notes"]["env"].update(changes.pop("env", {}))
    if allowed is not None:
        data["allowedTools"] = allowed
    path.write_text(json.dumps(data))
    return path


def run(binary: Path, workspace: Path, steps: list[Step], *extra: str,
        ) -> tuple[int, list[dict[str, Any]], list[dict[str, Any]], str]:
    with ScriptedServer(steps) as server:
        done = run_apple_code(binary, *scripted_args(server.url, workspace, *extra), "task", timeout=60,
                              env=clean_env(APPLE_CODE_API_KEY="sekrit"))
        return done.returncode, events(done.stdout), server.requests(), done.stderr


def offered(request: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {tool["function"]["name"]: tool["function"] for tool in request.get("tools") or []}


def results(lines: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {line["name"]: line for line in lines if line["type"] == "tool_result"}


def test_a_call_goes_through_with_its_schema_and_only_the_configured_environment(
    apple_code_bin: Path, workspace: Path, config: Path, tmp_path: Path
) -> None:
    steps = [tool_call("mcp__notes__lookup", {"word": "tea"}),
             tool_call("mcp__notes__save", {"note": "ab", "times": 2}), answer("done")]
    code, lines, requests, stderr = run(apple_code_bin, workspace, steps, "--mcp-config", str(config))
    assert code == 0, stderr
    tools = offered(requests[0])
    assert {"mcp__notes__lookup", "mcp__notes__save", "mcp__notes__tags", "mcp__notes__crash"} <= set(tools)
    assert tools["mcp__notes__lookup"]["parameters"] == {
        "type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]}
    assert tools["mcp__notes__lookup"]["description"] == "Look a word up."
    looked = results(lines)["mcp__notes__lookup"]
    # apple-code's own APPLE_CODE_API_KEY did not reach the server; the config's GIVEN did.
    assert looked["ok"] is True and looked["output"] == "tea: a test word (key=none, given=yes)"
    assert "tea: a test word" in json.dumps(requests[1]["messages"])
    assert (tmp_path / "notes.txt").read_text() == "abab\n"
    assert lines[0]["type"] == "start" and "mcp__notes__save" in lines[0]["tools"]


def test_a_schema_beyond_flat_parameters_goes_as_it_is_and_its_json_string_stand_in_works_too(
    apple_code_bin: Path, workspace: Path, config: Path
) -> None:
    steps = [tool_call("mcp__notes__tags", {"items": ["a", "b"]}),
             # What Apple's model sends: its runtime schema has one JSON-string argument (the universal JSON proxy).
             tool_call("mcp__notes__tags", {"arguments": json.dumps({"items": ["c"]})}), answer("done")]
    code, lines, requests, stderr = run(apple_code_bin, workspace, steps, "--mcp-config", str(config))
    assert code == 0, stderr
    schema = offered(requests[0])["mcp__notes__tags"]["parameters"]
    assert schema["properties"]["items"]["type"] == "array" and schema["required"] == ["items"]  # the server's own
    outputs = [line["output"] for line in lines if line["type"] == "tool_result"]
    assert outputs == ["a,b", "c"]


def test_read_only_offers_only_the_tools_annotated_read_only(
    apple_code_bin: Path, workspace: Path, config: Path
) -> None:
    code, _, requests, stderr = run(apple_code_bin, workspace, [answer("ok")], "--read-only",
                                    "--mcp-config", str(config))
    assert code == 0, stderr
    names = {name for name in offered(requests[0]) if name.startswith("mcp__")}
    assert names == {"mcp__notes__lookup", "mcp__notes__tags", "mcp__notes__crash", "mcp__notes__hang"}


def test_a_server_that_crashes_ends_its_tools_not_the_run(
    apple_code_bin: Path, workspace: Path, config: Path
) -> None:
    steps = [tool_call("mcp__notes__crash", {}), tool_call("mcp__notes__lookup", {"word": "x"}),
             tool_call("listDirectory", {"path": "."}), answer("finished anyway")]
    code, lines, _, stderr = run(apple_code_bin, workspace, steps, "--mcp-config", str(config))
    assert code == 0, stderr
    found = results(lines)
    crashed, after = found["mcp__notes__crash"], found["mcp__notes__lookup"]
    assert crashed["ok"] is False and "MCP server 'notes'" in crashed["output"]
    assert "its tools cannot be used in this run" in after["output"] and after["ok"] is False
    assert found["listDirectory"]["ok"] is True
    assert lines[-1]["result"] == "finished anyway"


def test_a_server_that_hangs_is_stopped_after_its_timeout_and_ends_only_its_tools(
    apple_code_bin: Path, workspace: Path, config: Path
) -> None:
    data = json.loads(config.read_text())
    data["mcpServers"]["notes"]["timeout"] = 1  # seconds a request may take
    pid_file = config.parent / "server.pid"
    data["mcpServers"]["notes"]["env"]["PID_FILE"] = str(pid_file)
    config.write_text(json.dumps(data))
    steps = [tool_call("mcp__notes__hang", {}), tool_call("mcp__notes__lookup", {"word": "x"}), answer("went on")]
    code, lines, _, stderr = run(apple_code_bin, workspace, steps, "--mcp-config", str(config))
    assert code == 0, stderr
    found = results(lines)
    assert found["mcp__notes__hang"]["ok"] is False
    assert "did not answer within 1 s" in found["mcp__notes__hang"]["output"]
    assert "its tools cannot be used in this run" in found["mcp__notes__lookup"]["output"]
    assert lines[-1]["result"] == "went on"
    # Stopped means gone: it inherited a mask with SIGTERM blocked, and once outlived the run (found after CI).
    server = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while alive(server):
        assert time.monotonic() < deadline, f"the hung MCP server (pid {server}) outlived apple-code"
        time.sleep(0.05)


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.mark.slow
def test_a_catalog_over_a_third_of_the_window_is_cut_to_the_allowlist_or_refused(
    apple_code_bin: Path, workspace: Path, config: Path
) -> None:
    with_config(config, env={"BIG": "1"})
    code, lines, requests, _ = run(apple_code_bin, workspace, [answer("ok")], "--mcp-config", str(config))
    assert code == 4 and requests == []
    assert "allowedTools" in lines[-1]["result"] and "a third of the 4096-token window" in lines[-1]["result"]

    with_config(config, allowedTools=["mcp__notes__lookup"])
    code, _, requests, stderr = run(apple_code_bin, workspace, [answer("ok")], "--mcp-config", str(config))
    assert code == 0, stderr
    assert [name for name in offered(requests[0]) if name.startswith("mcp__")] == ["mcp__notes__lookup"]


def test_a_server_that_cannot_start_is_a_notice_and_a_bad_config_a_usage_error(
    apple_code_bin: Path, workspace: Path, tmp_path: Path
) -> None:
    missing = tmp_path / "missing.json"
    missing.write_text(json.dumps({"mcpServers": {"gone": {"command": str(tmp_path / "no-such-server")}}}))
    code, lines, requests, stderr = run(apple_code_bin, workspace, [answer("ok")], "--mcp-config", str(missing))
    assert code == 0, stderr
    notices = [line["message"] for line in lines if line["type"] == "notice"]
    assert any("MCP server 'gone' could not start" in notice for notice in notices)
    assert not [name for name in offered(requests[0]) if name.startswith("mcp__")]

    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"mcpServers": {"web": {"url": "https://example.com/mcp"}}}))
    code, lines, _, _ = run(apple_code_bin, workspace, [answer("ok")], "--mcp-config", str(bad))
    assert code == 2 and "only stdio servers are supported" in lines[-1]["result"]
