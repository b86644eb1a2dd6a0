"""KiloConnector: Kilo CLI's non-interactive ``kilo run`` once per turn (``kilo run --auto --format json [--model
MODEL]``, the prompt on stdin).

From Kilo's own documentation (kilo.ai/docs/cli, "kilo run [message..]: run with a message (non-interactive mode)";
the README's "Autonomous Mode (CI/CD)": ``--auto`` approves every permission without asking) and ``kilo run
--help``: ``--format json`` prints raw JSON events, one a line: ``text`` (``part.text``, a finished piece of the
answer), ``tool_use`` (``part.tool``, ``part.state.input``), ``step_start``, ``step_finish`` (``part.tokens``
with ``input`` and ``output``) and ``error`` (``error.data.message``); ``--model`` is ``provider/model``;
``--agent plan`` is the read-only agent (it denies edits; without ``--auto`` every other permission it asks for
is refused). Standard input that is not a terminal is read as the message, so the prompt has no length limit.
Kilo runs in its working directory.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from apple_flow.connectors.base import TurnOutcome, TurnRequest, Usage
from apple_flow.connectors.cli import CliConnector, Invocation
from apple_flow.connectors.events import EventStream, ToolNames, renamed_tool_call
from apple_flow.connectors.runner import RunResult
from apple_flow.connectors.stream_events import StreamEvent

# Kilo's tool names (its opencode heritage) as the names the progress table knows, with the argument it names.
_TOOLS: ToolNames = {
    "read": ("readFile", "path", "filePath"),
    "write": ("writeFile", "path", "filePath"),
    "edit": ("editFile", "path", "filePath"),
    "list": ("listDirectory", "path", "path"),
    "glob": ("searchFiles", "pattern", "pattern"),
    "grep": ("searchContent", "pattern", "pattern"),
    "bash": ("runCommand", "command", "command"),
}
_WRITES = frozenset({"write", "edit"})


def _part(event: Mapping[str, Any]) -> Mapping[str, Any]:
    part = event.get("part")
    return part if isinstance(part, dict) else {}


def _tool_input(part: Mapping[str, Any]) -> Mapping[str, Any]:
    state = part.get("state")
    tool_input = state.get("input") if isinstance(state, dict) else None
    return tool_input if isinstance(tool_input, dict) else {}


def kilo_tool_calls(event: StreamEvent) -> list[tuple[str, Mapping[str, Any]]]:
    return _tool_uses(event.raw)  # Kilo's own stream format


def _tool_uses(event: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    part = _part(event)
    if event.get("type") != "tool_use" or not isinstance(part.get("tool"), str):
        return []
    return renamed_tool_call(_TOOLS, part["tool"], _tool_input(part))


class KiloStream(EventStream):
    """Kilo's stream has no result event: the answer is the text after the last tool call (text before one is the
    model saying what it will do next); the tokens are the sum of the steps'."""

    def __init__(self) -> None:
        super().__init__(kilo_tool_calls)
        self.errors: list[str] = []
        self.files_changed: list[str] = []
        self.commands_run = 0
        self.input_tokens = 0
        self.output_tokens = 0
        self.steps = 0
        self._since_tool: list[str] = []

    def _note(self, event: Mapping[str, Any]) -> None:
        kind, part = event.get("type"), _part(event)
        if kind == "text" and isinstance(part.get("text"), str) and part["text"].strip():
            self._since_tool.append(part["text"].strip())
        elif kind == "tool_use":
            self._since_tool = []
            path = _tool_input(part).get("filePath")
            if part.get("tool") in _WRITES and isinstance(path, str) and path not in self.files_changed:
                self.files_changed.append(path)
            self.commands_run += 1 if part.get("tool") == "bash" else 0
        elif kind == "step_finish":
            self.steps += 1
            tokens = part.get("tokens")
            if isinstance(tokens, dict):
                self.input_tokens += tokens["input"] if isinstance(tokens.get("input"), int) else 0
                self.output_tokens += tokens["output"] if isinstance(tokens.get("output"), int) else 0
        elif kind == "error":
            self.errors.append(_error_message(event.get("error")))

    @property
    def answer(self) -> str:
        return "\n\n".join(self._since_tool)


def _error_message(error: Any) -> str:
    """``{"name": .., "data": {"message": ..}}``: the message, else the name."""
    if not isinstance(error, dict):
        return "unknown error"
    data = error.get("data")
    message = data.get("message") if isinstance(data, dict) else None
    return str(message or error.get("name") or "unknown error")


class KiloConnector(CliConnector):
    display_name: ClassVar[str] = "Kilo"
    section: ClassVar[str] = "kilo"
    # Kilo CLI has no flag that adds to its system prompt.
    soul_leads_prompt: ClassVar[bool] = True

    def _context_window(self) -> int:
        return self.options.context_window

    def invocation(self, executable: str, prompt: str, cwd: Path, request: TurnRequest) -> Invocation:
        # Read-only: the plan agent, and no --auto, so whatever it would ask for (a command) is refused.
        argv = [executable, "run", "--format", "json"]
        argv += ["--agent", "plan"] if request.read_only else ["--auto"]
        if self.options.model:
            argv += ["--model", self.options.model]
        return Invocation(argv, prompt, cwd, self.settings.turn_timeout_seconds, KiloStream())

    def interpret(self, result: RunResult, invocation: Invocation) -> TurnOutcome:
        stream = invocation.stream
        assert isinstance(stream, KiloStream)
        fields: dict[str, Any] = {"files_changed": tuple(stream.files_changed), "commands_run": stream.commands_run}
        if stream.steps:
            fields["usage"] = Usage(input_tokens=stream.input_tokens, output_tokens=stream.output_tokens)
        if result.timed_out:
            return self.timed_out(invocation.timeout, stream.answer, exit_code=result.exit_code, **fields)
        if result.exit_code != 0:
            return self.failed(result.exit_code, "; ".join(stream.errors) or result.last_stderr_line, **fields)
        if stream.errors:  # a session error can end the run with exit 0
            return self.failed(result.exit_code, "; ".join(stream.errors), **fields)
        return self.answer(stream.answer, result.exit_code, **fields)
