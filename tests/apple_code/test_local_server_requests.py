"""What apple-code asks of apple-flow's local model server (its /models says owned_by "apple-flow"), played by the
scripted server: the first request requires a call to a tool that looks, later ones leave the choice to the model,
and a model that repeats a call keeps getting its results as tool messages (that server does not drop them)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from support.scripted_server import ScriptedServer, answer, tool_call

LOOKING = ["readFile", "listDirectory", "searchFiles", "searchContent", "runCommand"]


def run(apple_code_bin: Path, workspace: Path, server: ScriptedServer,
        task: str = "What do my notes say?") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(apple_code_bin), "--backend", "openai", "--base-url", server.url, "--cwd", str(workspace),
         "--max-turns", "6", "--timeout", "60", "--output-format", "json", "--verbose", task],
        capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)


def test_the_first_request_must_look_and_tool_messages_stay(apple_code_bin: Path, tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("milk\n")
    read = tool_call("readFile", {"path": "notes.txt"})
    with ScriptedServer([read, read, answer("It says milk.")], owned_by="apple-flow") as server:
        done = run(apple_code_bin, tmp_path, server)
        requests = server.requests()
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["result"] == "It says milk."
    first = requests[0]["tool_choice"]
    assert first["type"] == "allowed_tools" and first["allowed_tools"]["mode"] == "required"
    assert [tool["function"]["name"] for tool in first["allowed_tools"]["tools"]] == LOOKING
    assert len(requests[0]["tools"]) == 7  # the prompt still shows every tool
    assert {request["tool_choice"] for request in requests[1:] if "tools" in request} == {"auto"}
    # The repeated read got its earlier result as a tool message: no switch to folded user messages.
    assert "seems to drop" not in done.stderr
    assert any(m["role"] == "tool" for m in requests[-1]["messages"])


def test_a_task_shown_with_the_file_it_names_is_not_made_to_look(apple_code_bin: Path, tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("milk\n")
    with ScriptedServer([answer("It says milk.")], owned_by="apple-flow") as server:
        done = run(apple_code_bin, tmp_path, server, "What is in notes.txt?")
        requests = server.requests()
    assert done.returncode == 0, done.stderr
    assert requests[0]["tool_choice"] == "auto"
    assert requests[0]["messages"][-1]["content"] == "What is in notes.txt?\n\nnotes.txt:\n```\nmilk\n```"


def test_elsewhere_the_model_chooses_from_the_first_request(apple_code_bin: Path, tmp_path: Path) -> None:
    with ScriptedServer([answer("Nothing.")]) as server:
        done = run(apple_code_bin, tmp_path, server)
        requests = server.requests()
    assert done.returncode == 0, done.stderr
    assert requests[0]["tool_choice"] == "auto"
