"""CodexConnector: ``codex exec`` once per turn, the prompt on stdin, the final message on stdout."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from apple_flow.connectors.base import TurnOutcome, TurnRequest
from apple_flow.connectors.cli import CliConnector, Invocation
from apple_flow.connectors.runner import RunResult


class CodexConnector(CliConnector):
    display_name: ClassVar[str] = "Codex"
    section: ClassVar[str] = "codex"
    environment_variables: ClassVar[tuple[str, ...]] = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "CODEX_HOME")
    # codex has no system-prompt flag.
    soul_leads_prompt: ClassVar[bool] = True

    def _context_window(self) -> int:
        return self.options.context_window

    def invocation(self, executable: str, prompt: str, cwd: Path, request: TurnRequest) -> Invocation:
        sandbox = "read-only" if request.read_only else "workspace-write"
        argv = [executable, "exec", "--skip-git-repo-check", "--sandbox", sandbox, "--cd", str(cwd)]
        if self.options.model:
            argv += ["--model", self.options.model]
        argv.append("-")
        return Invocation(argv, prompt, cwd, self.settings.turn_timeout_seconds)

    def interpret(self, result: RunResult, invocation: Invocation) -> TurnOutcome:
        if result.timed_out:
            return self.timed_out(invocation.timeout, exit_code=result.exit_code)
        if result.exit_code != 0:
            return self.failed(result.exit_code, result.last_stderr_line)
        return self.answer(result.stdout.strip())
