"""The real apple-code binary's tools against escape attempts, driven by the scripted server: every attempt comes
back to the model as an ``Error:`` tool result, the run goes on to its answer, and nothing outside the workspace is
read or written. Escape targets are this test's own folder, never a system file."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from support.apple_code_run import clean_env, events, run_apple_code
from support.scripted_server import ScriptedServer, answer, tool_call


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    workspace = tmp_path / "ws"
    outside = tmp_path / "outside"
    workspace.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text("secret\n")
    (workspace / "link.txt").symlink_to(outside / "secret.txt")
    (workspace / "escape").symlink_to(outside)
    return workspace, outside


def run(binary: Path, workspace: Path, steps: list[Any], *extra: str) -> tuple[list[dict[str, Any]], list[str], str]:
    """Runs apple-code with the scripted steps; the events, the tool messages the model was sent, and stderr."""
    with ScriptedServer(steps) as server:
        done = run_apple_code(binary, "--backend", "openai", "--base-url", server.url, "--model", "scripted",
                              "--cwd", str(workspace), "--output-format", "stream-json", *extra, "Try the tools.")
        sent = [str(m.get("content")) for r in server.requests()[1:] for m in r["messages"][-1:]]
    assert done.returncode == 0, done.stderr
    return events(done.stdout), sent, done.stderr


def test_escape_attempts_are_errors_and_the_run_goes_on(apple_code_bin: Path, layout: tuple[Path, Path]) -> None:
    workspace, outside = layout
    attempts = [
        tool_call("readFile", {"path": str(outside / "secret.txt")}),
        tool_call("readFile", {"path": "../outside/secret.txt"}),
        tool_call("readFile", {"path": "link.txt"}),
        tool_call("writeFile", {"path": "link.txt", "content": "pwned"}),
        tool_call("writeFile", {"path": "escape/new.txt", "content": "pwned"}),
        tool_call("editFile", {"path": "escape/secret.txt", "oldText": "secret", "newText": "pwned"}),
        tool_call("listDirectory", {"path": "escape"}),
        tool_call("writeFile", {"path": "a\nb.txt", "content": "x"}),
        tool_call("readFile", {"path": "x/" * 5000}),
    ]
    # The 10,000-character path is cut from the history once its call has run: the default window holds the run.
    lines, sent, _ = run(apple_code_bin, workspace, [*attempts, answer("done")], "--max-turns", "20")
    results = [line for line in lines if line["type"] == "tool_result"]
    assert len(results) == len(attempts)
    assert all(not result["ok"] and str(result["summary"]).startswith("Error:") for result in results), results
    assert all(text.startswith("Error:") and "secret\n" not in text for text in sent[: len(attempts)]), sent
    assert lines[-1]["subtype"] == "success" and lines[-1]["result"] == "done"
    assert lines[-1]["files_changed"] == []
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == "secret\n"


def test_run_command_is_sandboxed_and_says_so(apple_code_bin: Path, layout: tuple[Path, Path]) -> None:
    if shutil.which("bwrap") is None:
        pytest.skip("bwrap is not installed: runCommand runs unsandboxed here (install the bubblewrap package)")
    workspace, outside = layout
    command = f"echo in > inside.txt; echo out > {outside}/escaped.txt; echo done"
    lines, sent, stderr = run(apple_code_bin, workspace, [tool_call("runCommand", {"command": command}),
                                                        answer("ok")], "--verbose")
    assert "runCommand sandbox: bwrap" in stderr
    assert (workspace / "inside.txt").read_text() == "in\n"
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert sent[0].startswith("exit code 0\n") and sent[0].rstrip().endswith("done")
    assert lines[-1]["commands_run"] == 1


def test_commands_do_not_see_the_api_key(apple_code_bin: Path, tmp_path: Path) -> None:
    with ScriptedServer([tool_call("runCommand", {"command": "env"}), answer("ok")]) as server:
        done = run_apple_code(apple_code_bin, "--backend", "openai", "--base-url", server.url, "--model", "scripted",
                              "--cwd", str(tmp_path), "--output-format", "json", "Show the environment.",
                              env=clean_env(APPLE_CODE_API_KEY="sk-must-not-leak"))
        sent = str(server.requests()[1]["messages"][-1]["content"])
        headers = [str(entry.get("headers")) for entry in server.request_log()]
    assert done.returncode == 0, done.stderr
    assert "PATH=" in sent
    assert "sk-must-not-leak" not in sent
    # apple-code itself had the key (it sent it to the server); only the command did not get it.
    assert any("sk-must-not-leak" in text for text in headers)


def test_tool_results_carry_output_exit_code_and_diff(apple_code_bin: Path, tmp_path: Path) -> None:
    """Contract (stream-json tool_result): ``output`` is what the model was given (bounded), ``exit_code`` is a
    command's exit status, ``diff`` is the unified diff of what writeFile/editFile changed."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "app.py").write_text("def greet():\n    return 'hello'\n")
    steps = [
        tool_call("readFile", {"path": "app.py", "startLine": 1}),  # an edit needs a read first (SeenFiles)
        tool_call("editFile", {"path": "app.py", "oldText": "'hello'", "newText": "'hi'"}),
        tool_call("writeFile", {"path": "notes/todo.txt", "content": "one\n"}),
        tool_call("runCommand", {"command": "echo failing; exit 3"}),
        tool_call("readFile", {"path": "app.py"}),
        answer("done"),
    ]
    lines, sent, _ = run(apple_code_bin, workspace, steps, "--max-turns", "8")
    sent = sent[1:]  # the first read's result
    results = {line["name"]: line for line in lines if line["type"] == "tool_result"}
    assert results["editFile"]["diff"] == (
        "--- a/app.py\n+++ b/app.py\n@@ -1,2 +1,2 @@\n def greet():\n-    return 'hello'\n+    return 'hi'\n"
    )
    assert results["writeFile"]["diff"] == "--- /dev/null\n+++ b/notes/todo.txt\n@@ -0,0 +1 @@\n+one\n"
    assert results["runCommand"]["exit_code"] == 3 and "exit_code" not in results["readFile"]
    assert "diff" not in results["readFile"] and "diff" not in results["runCommand"]
    # `output` is the very text the model got back for each call.
    assert [results[name]["output"] for name in ("editFile", "writeFile", "runCommand", "readFile")] == sent[:4]
    assert "return 'hi'" in results["readFile"]["output"]
