"""Reading the JSON-lines event streams of agent CLIs (apple-code and claude ``stream-json``).

Both end with a ``result`` event (``subtype``, ``is_error``, ``result``); tool calls along the way become short
progress lines for the chat ("reading src/app.py", "running: make test"), and so does apple-code's answer as it
streams in (``text`` events: "writing the answer (120 characters so far)"). Each line is parsed here, into its
typed record (``stream_events``), and comes back as an ``AgentEvent``, so the caller can pass progress on and keep
the events (``EventStream.events`` reads a child's lines as its caller reads the events). The run log's events
read back from the store are parsed here too.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Generator, Iterable, Mapping
from typing import Any

from apple_flow.connectors.base import AgentEvent
from apple_flow.connectors.prompt import cut_end
from apple_flow.connectors.stream_events import (
    Notice,
    Other,
    Result,
    ResultUsage,
    Start,
    StreamEvent,
    Text,
    ToolCall,
    ToolResult,
    Verify,
    VerifyReport,
)

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
    """A progress line for apple-code's ``verify`` event (each run of the ``--verify`` check): how it stands before
    the work, then passed, or failed and gone back to the model for repair round N."""
    command = " ".join((event.command or "the check").split())
    if event.before:
        state = "passes" if event.passed else "fails"
        return cut_end(f"check {state} before the work: {command}", PROGRESS_MAX_CHARS)
    if event.passed:
        return cut_end(f"check passed: {command}", PROGRESS_MAX_CHARS)
    repair = f" (repair round {event.rounds})" if event.rounds > 0 else ""
    return cut_end(f"check failed{repair}: {command}", PROGRESS_MAX_CHARS)


def parse_line(line: str) -> StreamEvent | None:
    """One line of the stream; None for a blank line or one that is not a JSON object."""
    line = line.strip()
    if not line:
        return None
    try:
        data = json.loads(line)
    except ValueError:
        return None
    return parse_event(data) if isinstance(data, dict) else None


def parse_event(data: Mapping[str, Any]) -> StreamEvent:
    """The record for one decoded event object."""
    kind = data.get("type")
    subtask = _int(data.get("subtask"))
    if kind == "start":
        tools = data.get("tools")
        return Start(
            _str(data.get("version")), _str(data.get("backend")), _str(data.get("model")), _str(data.get("cwd")),
            _int(data.get("context_tokens")),
            tuple(str(t) for t in tools) if isinstance(tools, list) else (), subtask, data,
        )
    if kind == "tool_call":
        arguments = data.get("arguments")
        return ToolCall(_str(data.get("id")), _str(data.get("name")),
                        arguments if isinstance(arguments, dict) else {}, subtask, data)
    if kind == "tool_result":
        ok = data.get("ok")
        return ToolResult(
            _str(data.get("id")), _str(data.get("name")), ok if isinstance(ok, bool) else True,
            _str(data.get("summary")), data.get("truncated") is True, _str_or_none(data.get("output")),
            _int(data.get("exit_code")), _str_or_none(data.get("diff")), subtask, data,
        )
    if kind == "text":
        return Text(_str(data.get("delta")), subtask, data)
    if kind == "notice":
        return Notice(_str(data.get("message")), subtask, data)
    if kind == "verify":
        return Verify(**vars(_verify(data)), subtask=subtask, before=True if data.get("before") is True else None,
                      raw=data)
    if kind == "result":
        return _result(data, subtask)
    return Other(kind if isinstance(kind, str) and kind else "unknown", subtask, data)


def _result(data: Mapping[str, Any], subtask: int | None) -> Result:
    usage = data.get("usage")
    files = data.get("files_changed")
    return Result(
        _str_or_none(data.get("subtype")), data.get("is_error") is True, _str_or_none(data.get("result")),
        _int(data.get("num_turns")), _int(data.get("duration_ms")),
        ResultUsage(
            _int(usage.get("input_tokens")), _int(usage.get("output_tokens")), usage.get("estimated") is True,
            _int(usage.get("fixed_tokens")),
        ) if isinstance(usage, dict) else None,
        tuple(str(f) for f in files) if isinstance(files, list) else None,
        _int(data.get("commands_run")), _str_or_none(data.get("backend")), _str_or_none(data.get("model")),
        _verify(verify) if isinstance(verify := data.get("verify"), dict) else None, subtask, data,
    )


def _verify(data: Mapping[str, Any]) -> VerifyReport:
    return VerifyReport(
        _str(data.get("command")), _bool(data.get("passed")), _int(data.get("rounds")) or 0,
        _int(data.get("runs")), _int(data.get("exit_code")), _str(data.get("output_tail")),
    )


def _bool(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


class EventStream:
    """Reads one run's JSON-lines stream: parses each line once (``parse_line``), keeps the ``result`` event,
    and turns each line into the event it carries, with the progress line of its tool calls.

    ``tool_calls`` picks the tool calls out of one event as ``(name, arguments)`` pairs; each stream format has
    its own.
    """

    def __init__(self, tool_calls: Callable[[StreamEvent], list[tuple[str, Mapping[str, Any]]]]) -> None:
        self._tool_calls = tool_calls
        self.result: Result | None = None
        self.unparsed_lines = 0
        self._answer_chars = 0

    def events(self, lines: Iterable[str]) -> Generator[AgentEvent, None, None]:
        """The events on ``lines`` (a child's stdout), each line read as the caller asks for the next event."""
        for line in lines:
            yield from self.feed(line)

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
