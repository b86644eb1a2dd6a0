"""Running the real `apple-code --plan` against the scripted server, and reading what each request carried.
Shared by the plan integration tests and scripts/bench_plan.py."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from support import apple_code_run

READ_ONLY_TOOLS = {"readFile", "listDirectory", "searchFiles", "searchContent"}


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str

    def events(self) -> list[dict[str, Any]]:
        """stream-json lines as objects (each checked against the 16 KiB line limit)."""
        return apple_code_run.events(self.stdout)

    def result(self) -> dict[str, Any]:
        """The `result` object: the only line in json mode, the last in stream-json."""
        lines = [line for line in self.stdout.splitlines() if line.strip()]
        assert lines, f"no output; stderr: {self.stderr}"
        result: dict[str, Any] = json.loads(lines[-1])
        assert result["type"] == "result", result
        return result


def run_apple_code(binary: Path, url: str, workspace: Path, prompt: str, *options: str,
                   output_format: str = "stream-json", timeout: float = 60) -> Run:
    done = apple_code_run.run_apple_code(
        binary, "--backend", "openai", "--base-url", url, "--model", "scripted", "--cwd", str(workspace),
        "--output-format", output_format, *options, "--", prompt, timeout=timeout)
    return Run(done.returncode, done.stdout, done.stderr)


def text_of(message: dict[str, Any]) -> str:
    """A message's text, whether content is a string or a list of parts."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


def user_text(request: dict[str, Any]) -> str:
    return "\n".join(text_of(m) for m in request.get("messages", []) if m.get("role") == "user")


def tool_results(request: dict[str, Any]) -> str:
    """What tools returned in this request: role "tool" messages, or results folded into user messages (for servers
    that drop tool messages, such as llama-cpp-python's)."""
    return "\n".join(text_of(m) for m in request.get("messages", [])
                     if m.get("role") == "tool" or (m.get("role") == "user" and text_of(m).startswith("Result of ")))


def tool_names(request: dict[str, Any]) -> set[str]:
    return {tool["function"]["name"] for tool in request.get("tools") or []}


def lines_seen(path_lines: Sequence[str], requests: Sequence[dict[str, Any]]) -> int:
    """How many of a file's lines were shown to the model by a tool in some request."""
    shown = "\n".join(tool_results(request) for request in requests)
    return sum(1 for line in path_lines if line in shown)
