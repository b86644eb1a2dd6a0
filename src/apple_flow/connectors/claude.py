"""ClaudeConnector: ``claude -p --output-format stream-json`` once per turn, the prompt on stdin."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from apple_flow.connectors.base import TurnOutcome, TurnRequest
from apple_flow.connectors.cli import CliConnector, Invocation
from apple_flow.connectors.events import EventStream, claude_tool_calls
from apple_flow.connectors.runner import RunResult


class ClaudeConnector(CliConnector):
    display_name: ClassVar[str] = "Claude"
    section: ClassVar[str] = "claude"
    # Its key or token, a gateway, its own config folder.
    environment_variables: ClassVar[tuple[str, ...]] = (
        "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "CLAUDE_CONFIG_DIR",
    )

    def _context_window(self) -> int:
        return self.options.context_window

    def invocation(self, executable: str, prompt: str, cwd: Path, request: TurnRequest) -> Invocation:
        # claude needs --verbose for stream-json in print mode; "plan" mode makes a turn read-only for real.
        mode = "plan" if request.read_only else "acceptEdits"
        argv = [executable, "-p", "--output-format", "stream-json", "--verbose", "--permission-mode", mode]
        if self.options.model:
            argv += ["--model", self.options.model]
        if self.soul_prompt:
            argv += ["--append-system-prompt", self.soul_prompt]
        return Invocation(argv, prompt, cwd, self.settings.turn_timeout_seconds, EventStream(claude_tool_calls))

    def interpret(self, result: RunResult, invocation: Invocation) -> TurnOutcome:
        stream = invocation.stream
        assert stream is not None
        report = stream.result
        if result.timed_out:
            return self.timed_out(invocation.timeout, exit_code=result.exit_code, report=report)
        if result.exit_code != 0:
            detail = result.last_stderr_line or (report.answer if report is not None else "")
            return self.failed(result.exit_code, detail, report=report)
        if report is None:
            detail = f"The output ended without a result event. {result.last_stderr_line}"
            return self.failed(result.exit_code, detail)
        if report.failed:  # claude reports max-turn stops and failures with exit 0: check is_error
            return self.failed(result.exit_code, f"{report.subtype or 'error'}: {report.answer}", report=report)
        return self.answer(report.answer, result.exit_code, report=report)
