"""ClineConnector: Cline CLI in headless mode once per turn (``cline -y --json --act|--plan [-m MODEL] -c CWD PROMPT``).

From Cline's own documentation (docs.cline.bot/cline-cli/three-core-flows "Headless Mode" and cline-cli/cli-reference):
``-y``/``--yolo`` approves every action and runs headless, exiting when the task is done; ``--json`` prints one
ClineMessage per line (``type`` "say" or "ask", ``text``, ``ts``; ``say``/``ask`` name the kind; ``partial``
marks a streaming update that a later line repeats whole); ``-a``/``--act`` acts (the default), ``-p``/``--plan``
only plans; ``-m``/``--model`` overrides the model for this run; ``-c``/``--cwd`` sets the working directory. The
answer is the ``completion_result`` message; tool messages carry a JSON text (``{"tool": "readFile", "path": ..}``,
Cline's ClineSayTool), commands a ``command`` message whose text is the command line.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from apple_flow.connectors.base import TurnOutcome, TurnRequest
from apple_flow.connectors.cli import CliConnector, Invocation
from apple_flow.connectors.events import EventStream, ToolNames, renamed_tool_call
from apple_flow.connectors.runner import RunResult
from apple_flow.connectors.stream_events import StreamEvent

# Cline's tool names (ClineSayTool.tool) as the names the progress table knows, with the argument it names.
_TOOLS: ToolNames = {
    "readFile": ("readFile", "path", "path"),
    "editedExistingFile": ("editFile", "path", "path"),
    "newFileCreated": ("writeFile", "path", "path"),
    "listFilesTopLevel": ("listDirectory", "path", "path"),
    "listFilesRecursive": ("listDirectory", "path", "path"),
    "searchFiles": ("searchContent", "pattern", "regex"),
}
_WRITES = frozenset({"editedExistingFile", "newFileCreated"})


def _settled_say(event: Mapping[str, Any]) -> str | None:
    """The kind of a whole ``say`` message (None for asks and for partial updates, which come again whole)."""
    if event.get("type") != "say" or event.get("partial"):
        return None
    kind = event.get("say")
    return kind if isinstance(kind, str) else None


def _tool(event: Mapping[str, Any]) -> dict[str, Any]:
    """The ClineSayTool a ``say: tool`` message carries as JSON text, or {}."""
    try:
        tool = json.loads(str(event.get("text") or ""))
    except ValueError:
        return {}
    return tool if isinstance(tool, dict) and isinstance(tool.get("tool"), str) else {}


def cline_tool_calls(event: StreamEvent) -> list[tuple[str, Mapping[str, Any]]]:
    return _tool_uses(event.raw)  # Cline's own stream format


def _tool_uses(event: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    kind = _settled_say(event)
    if kind == "command" and isinstance(event.get("text"), str):
        return [("runCommand", {"command": event["text"]})]
    if kind != "tool":
        return []
    tool = _tool(event)
    if not tool:
        return []
    return renamed_tool_call(_TOOLS, tool["tool"], tool)


class ClineStream(EventStream):
    """Keeps the answer (the last ``completion_result``, else the last plain ``text`` after the last tool call: one
    before it is the model saying what it does next), the last ``error`` and the files the run wrote."""

    def __init__(self) -> None:
        super().__init__(cline_tool_calls)
        self.completion = ""
        self.last_text = ""
        self.last_error = ""
        self.files_changed: list[str] = []
        self.commands_run = 0

    def _note(self, event: Mapping[str, Any]) -> None:
        kind = _settled_say(event)
        said = event.get("text")
        text = said if isinstance(said, str) else ""
        if kind == "completion_result":
            self.completion = text.strip()
        elif kind == "text" and text.strip():
            self.last_text = text.strip()
        elif kind == "error" and text.strip():
            self.last_error = text.strip()
        elif kind == "command":
            self.commands_run += 1
            self.last_text = ""
        elif kind == "tool":
            self.last_text = ""
            tool = _tool(event)
            path = tool.get("path")
            if tool.get("tool") in _WRITES and isinstance(path, str) and path not in self.files_changed:
                self.files_changed.append(path)

    @property
    def answer(self) -> str:
        return self.completion or self.last_text


class ClineConnector(CliConnector):
    display_name: ClassVar[str] = "Cline"
    section: ClassVar[str] = "cline"
    # Cline CLI has no flag that adds to its system prompt. The task travels as one argument (piped stdin would
    # only be prepended to it as context), maybe with a leading space (below).
    soul_leads_prompt: ClassVar[bool] = True
    prompt_argument_extra: ClassVar[int | None] = 1

    def _context_window(self) -> int:
        return self.options.context_window

    def invocation(self, executable: str, prompt: str, cwd: Path, request: TurnRequest) -> Invocation:
        # Plan mode has no tools that edit files: a read-only turn plans; any other acts.
        argv = [executable, "-y", "--json", "--plan" if request.read_only else "--act"]
        if self.options.model:
            argv += ["-m", self.options.model]
        argv += ["-c", str(cwd)]
        # A task starting with "-" would be read as an option: a leading space keeps it the task.
        argv.append(f" {prompt}" if prompt.startswith("-") else prompt)
        return Invocation(argv, "", cwd, self.settings.turn_timeout_seconds, ClineStream())

    def interpret(self, result: RunResult, invocation: Invocation) -> TurnOutcome:
        stream = invocation.stream
        assert isinstance(stream, ClineStream)
        fields: dict[str, Any] = {"files_changed": tuple(stream.files_changed), "commands_run": stream.commands_run}
        if result.timed_out:
            return self.timed_out(invocation.timeout, stream.answer, exit_code=result.exit_code, **fields)
        if result.exit_code != 0:
            return self.failed(result.exit_code, stream.last_error or result.last_stderr_line, **fields)
        if not stream.completion and stream.last_error:  # an API error can end the task with exit 0
            return self.failed(result.exit_code, stream.last_error, **fields)
        return self.answer(stream.answer, result.exit_code, **fields)
