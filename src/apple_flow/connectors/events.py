"""Reading the JSON-lines event streams of agent CLIs (apple-code and claude ``stream-json``).

Both end with a ``result`` event (``subtype``, ``is_error``, ``result``); tool calls along the way become short
progress lines for the chat ("reading src/app.py", "running: make test"), and so does apple-code's answer as it
streams in (``text`` events: "writing the answer (120 characters so far)"). Each parsed line comes back as an
``AgentEvent``, so the caller can pass progress on and keep the events.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from apple_flow.connectors.base import AgentEvent
from apple_flow.connectors.prompt import cut_end
from apple_flow.connectors.stream_events import Other, Result, StreamEvent, Text, ToolCall, Verify, parse_line

PROGRESS_MAX_CHARS = 80

# Tool name -> (verb, the argument that names what it works on). apple-code's tools (see the CLI contract),
# claude's and Gemini CLI's (docs/tools/file-system.md, shell.md), so one table serves every stream.
_TOOL_VERBS: dict[str, tuple[str, str]] = {
    "readFile": ("reading", "path"),
    "writeFile": ("writing", "path"),
    "editFile": ("editing", "path"),
    "listDirectory": ("listing", "path"),
    "searchFiles": ("finding files", "pattern"),
    "searchContent": ("searching for", "pattern"),
    "runCommand": ("running:", "command"),
    "Read": ("reading", "file_path"),
    "Write": ("writing", "file_path"),
    "Edit": ("editing", "file_path"),
    "MultiEdit": ("editing", "file_path"),
    "LS": ("listing", "path"),
    "Glob": ("finding files", "pattern"),
    "Grep": ("searching for", "pattern"),
    "Bash": ("running:", "command"),
    "read_file": ("reading", "path"),
    "write_file": ("writing", "file_path"),
    "replace": ("editing", "file_path"),
    "list_directory": ("listing", "path"),
    "glob": ("finding files", "pattern"),
    "search_file_content": ("searching for", "pattern"),
    "run_shell_command": ("running:", "command"),
}


# A CLI's own tool name -> (the name ``_TOOL_VERBS`` knows, the argument it names there, the CLI's argument).
ToolNames = Mapping[str, tuple[str, str, str]]


def renamed_tool_call(names: ToolNames, tool: str, arguments: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """One tool call of a CLI whose tools ``names`` renames: the name and the argument the progress line shows.
    A tool it does not know keeps its name, with no argument."""
    name, key, source = names.get(tool, (tool, "", ""))
    return [(name, {key: arguments.get(source, "")} if key else {})]


def describe_tool_call(name: str, arguments: Mapping[str, Any] | None) -> str:
    """A short progress line for one tool call, e.g. ``reading src/app.py`` or ``running: make test``."""
    verb, key = _TOOL_VERBS.get(name, (f"using {name}", ""))
    target = str((arguments or {}).get(key, "") or "").strip() if key else ""
    if name in ("listDirectory", "LS", "list_directory") and not target:
        target = "."
    target = " ".join(target.split())  # one line, however the command was written
    return cut_end(f"{verb} {target}" if target else verb, PROGRESS_MAX_CHARS)


def describe_check(event: Verify) -> str:
    """A progress line for apple-code's ``verify`` event (each run of the ``--verify`` check): passed, or failed and
    gone back to the model for repair round N."""
    command = " ".join((event.command or "the check").split())
    if event.passed:
        return cut_end(f"check passed: {command}", PROGRESS_MAX_CHARS)
    repair = f" (repair round {event.rounds})" if event.rounds > 0 else ""
    return cut_end(f"check failed{repair}: {command}", PROGRESS_MAX_CHARS)


class EventStream:
    """Reads one run's JSON-lines stream: parses each line once (``stream_events``), keeps the ``result`` event,
    and turns each line into the event it carries, with the progress line of its tool calls.

    ``tool_calls`` picks the tool calls out of one event as ``(name, arguments)`` pairs; each stream format has
    its own.
    """

    def __init__(self, tool_calls: Callable[[StreamEvent], list[tuple[str, Mapping[str, Any]]]]) -> None:
        self._tool_calls = tool_calls
        self.result: Result | None = None
        self.unparsed_lines = 0
        self._answer_chars = 0

    def feed(self, line: str) -> list[AgentEvent]:
        """The event on ``line``: one, or none for a blank or unreadable line."""
        if not line.strip():
            return []
        event = parse_line(line)
        if event is None:
            self.unparsed_lines += 1
            return []
        if isinstance(event, Result):
            self.result = event
        progress = []
        for name, arguments in self._tool_calls(event):
            line_text = describe_tool_call(name, arguments)
            if event.subtask is not None:
                line_text = f"[{event.subtask}] {line_text}"
            progress.append(line_text)
        if isinstance(event, Verify):
            progress.append(describe_check(event))
        if isinstance(event, Text) and event.subtask is None and isinstance(event.raw.get("delta"), str):
            self._answer_chars += len(event.delta)
            progress.append(f"writing the answer ({self._answer_chars} characters so far)")
        self._note(event.raw)
        return [AgentEvent(event, tuple(progress))]

    def _note(self, event: Mapping[str, Any]) -> None:
        """Each parsed event's JSON object, for the streams that keep more of the run than its ``result`` event."""

    @property
    def result_text(self) -> str:
        return self.result.answer if self.result is not None else ""

    @property
    def is_error(self) -> bool:
        return self.result is not None and self.result.failed


def apple_code_tool_calls(event: StreamEvent) -> list[tuple[str, Mapping[str, Any]]]:
    """apple-code: ``{"type":"tool_call","name":..,"arguments":{..}}``."""
    return [(event.name, event.arguments)] if isinstance(event, ToolCall) and event.name else []


def claude_tool_calls(event: StreamEvent) -> list[tuple[str, Mapping[str, Any]]]:
    """claude: ``{"type":"assistant","message":{"content":[{"type":"tool_use","name":..,"input":{..}}]}}``."""
    message = event.raw.get("message")
    if not isinstance(event, Other) or event.type != "assistant" or not isinstance(message, dict):
        return []
    calls: list[tuple[str, Mapping[str, Any]]] = []
    for block in message.get("content") or []:
        if isinstance(block, dict) and block.get("type") == "tool_use" and isinstance(block.get("name"), str):
            tool_input = block.get("input")
            calls.append((block["name"], tool_input if isinstance(tool_input, dict) else {}))
    return calls
