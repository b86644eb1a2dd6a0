"""ClaudeConnector: ``claude -p --output-format stream-json`` once per turn, the prompt on stdin."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from apple_flow.connectors.base import ProgressCallback, TurnOptions
from apple_flow.connectors.cli import NO_RESPONSE, CliConnector, Invocation, Outcome
from apple_flow.connectors.events import EventStream, claude_tool_calls
from apple_flow.connectors.runner import RunResult


class ClaudeConnector(CliConnector):
    display_name: ClassVar[str] = "Claude"
    command_setting: ClassVar[str] = "claude_command"

    def _context_window(self) -> int:
        return self.settings.claude_context_window

    def invocation(self, prompt: str, cwd: Path, options: TurnOptions) -> Invocation:
        # claude needs --verbose for stream-json in print mode; "plan" mode makes a turn read-only for real.
        mode = "plan" if options.get("allow_tools") is False else "acceptEdits"
        argv = [self.executable(), "-p", "--output-format", "stream-json", "--verbose", "--permission-mode", mode]
        if self.settings.claude_model:
            argv += ["--model", self.settings.claude_model]
        if self.soul_prompt:
            argv += ["--append-system-prompt", self.soul_prompt]
        return Invocation(argv, prompt, cwd, self.settings.turn_timeout_seconds)

    def new_stream(self, on_progress: ProgressCallback | None) -> EventStream:
        return EventStream(claude_tool_calls, on_progress)

    def interpret(self, result: RunResult, invocation: Invocation, stream: EventStream | None) -> Outcome:
        assert stream is not None
        if result.timed_out:
            return Outcome(self.timeout_text(invocation.timeout), ok=False)
        if result.exit_code != 0:
            detail = result.last_stderr_line or stream.result_text
            return Outcome(self.failure_text(result.exit_code, detail), ok=False)
        if stream.result is None:
            detail = f"The output ended without a result event. {result.last_stderr_line}"
            return Outcome(self.failure_text(result.exit_code, detail), ok=False)
        if stream.is_error:  # claude reports max-turn stops and failures with exit 0: check is_error
            subtype = stream.result.get("subtype", "error")
            return Outcome(self.failure_text(result.exit_code, f"{subtype}: {stream.result_text}"), ok=False)
        answer = stream.result_text
        return Outcome(answer, ok=True) if answer else Outcome(NO_RESPONSE, ok=False)
