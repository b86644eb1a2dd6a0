"""What every agent-CLI connector shares: threads and history, the soul prompt, running one turn on the
``ProcessRunner``, and the result strings the daemon classifies (field notes §1).

A concrete connector says how to build the command line (``invocation``) and how to read its output
(``interpret``); everything else is here, once.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from apple_flow.config import Settings
from apple_flow.connectors.base import (
    ConnectorError,
    EventCallback,
    Exchange,
    HistoryStore,
    MemoryHistory,
    ProgressCallback,
    TurnOptions,
)
from apple_flow.connectors.events import EventStream
from apple_flow.connectors.prompt import fit_prompt
from apple_flow.connectors.runner import ProcessRunner, RunResult, SpawnError

NO_RESPONSE = "No response generated."
VERSION_TIMEOUT_SECONDS = 15.0


@dataclass(frozen=True)
class Invocation:
    """One turn's child process: its argv, what goes on stdin, where it runs, and its wall-clock limit."""

    argv: list[str]
    stdin: str
    cwd: Path
    timeout: float


@dataclass(frozen=True)
class Outcome:
    """A turn's reply; ``ok`` replies are kept in the thread's history, errors are not."""

    text: str
    ok: bool


class CliConnector:
    """Base of the connectors that run an agent CLI once per turn."""

    #: How the daemon's messages name the agent ("apple-code execution failed ...").
    display_name: ClassVar[str]
    #: The Settings field holding the command, named in "CLI not found" errors.
    command_setting: ClassVar[str]

    def __init__(
        self,
        settings: Settings,
        history: HistoryStore | None = None,
        runner: ProcessRunner | None = None,
    ) -> None:
        self.settings = settings
        self.context_window = self._context_window()
        self.history: HistoryStore = history if history is not None else MemoryHistory(keep=max(1, self.context_window))
        self.runner = runner if runner is not None else ProcessRunner()
        self.soul_prompt = settings.soul_text()

    # --- per connector -----------------------------------------------------------------------------------

    def _context_window(self) -> int:
        raise NotImplementedError

    def invocation(self, prompt: str, cwd: Path, options: TurnOptions) -> Invocation:
        raise NotImplementedError

    def new_stream(self, on_progress: ProgressCallback | None) -> EventStream | None:
        """A parser fed each stdout line as it arrives (JSON-lines CLIs), or None to read stdout at the end."""
        return None

    def interpret(self, result: RunResult, invocation: Invocation, stream: EventStream | None) -> Outcome:
        raise NotImplementedError

    def max_prompt_chars(self) -> int:
        # Cloud CLIs have large windows; the cap only keeps a runaway history bounded.
        return 100_000

    # --- the Connector protocol ----------------------------------------------------------------------------

    @property
    def command(self) -> str:
        return str(getattr(self.settings, self.command_setting))

    def resolve_command(self) -> str | None:
        """The executable to run, or None when it cannot be found."""
        return shutil.which(self.command)

    def executable(self) -> str:
        """argv[0] for a turn: the resolved command as an absolute path (the child runs in the workspace, where a
        relative path would mean something else), or the command as configured so the spawn error names it."""
        found = self.resolve_command()
        return str(Path(found).absolute()) if found else self.command

    def ensure_started(self) -> None:
        self._require_version()

    def get_or_create_thread(self, sender: str) -> str:
        return sender

    def reset_thread(self, sender: str) -> str:
        self.history.clear(sender)
        return sender

    def set_soul_prompt(self, text: str) -> None:
        self.soul_prompt = text.strip()

    def shutdown(self) -> None:
        self.runner.shutdown()

    def cancel_active_processes(self, thread_id: str | None = None) -> int:
        return self.runner.cancel(thread_id)

    def run_turn(self, thread_id: str, prompt: str, options: TurnOptions | None = None) -> str:
        return self.run_turn_streaming(thread_id, prompt, None, options)

    def run_turn_streaming(
        self,
        thread_id: str,
        prompt: str,
        on_progress: ProgressCallback | None = None,
        options: TurnOptions | None = None,
    ) -> str:
        options = options or {}
        # Absolute: the child runs inside it, where a relative path given to it would mean something else.
        cwd = Path(options.get("cwd") or self.settings.default_workspace).expanduser().absolute()
        if not cwd.is_dir():
            fix = "Check the workspace you asked for." if options.get("cwd") else "Check APPLE_FLOW_DEFAULT_WORKSPACE."
            return f"Error: workspace '{cwd}' does not exist or is not a folder. {fix}"
        past = self.history.history(thread_id, self.context_window)
        fitted = fit_prompt(prompt, past, self.max_prompt_chars())
        invocation = self.invocation(fitted, cwd, options)
        outcome = self._run(invocation, thread_id, on_progress, options.get("on_event"))
        if outcome.ok and self.context_window > 0:
            self.history.append(thread_id, Exchange(user=prompt, assistant=outcome.text))
        return outcome.text

    # --- shared mechanics ------------------------------------------------------------------------------

    def _run(
        self, invocation: Invocation, thread_id: str, on_progress: ProgressCallback | None,
        on_event: EventCallback | None = None,
    ) -> Outcome:
        stream = self.new_stream(on_progress)
        if stream is not None:
            stream.on_event = on_event
        try:
            result = self.runner.run(
                invocation.argv,
                invocation.stdin,
                cwd=invocation.cwd,
                timeout=invocation.timeout,
                thread_id=thread_id,
                on_line=stream.feed if stream is not None else None,
            )
        except SpawnError as exc:
            return Outcome(self.spawn_error_text(exc), ok=False)
        if result.cancelled:
            return Outcome(f"Error: {self.display_name} run was cancelled.", ok=False)
        return self.interpret(result, invocation, stream)

    def spawn_error_text(self, exc: SpawnError) -> str:
        if exc.reason == "not_found":
            return (
                f"Error: {self.display_name} CLI not found at '{exc.command}'. "
                f"Check apple_flow_{self.command_setting} setting."
            )
        if exc.reason == "bad_cwd":
            return f"Error: {exc}. Check the workspace you asked for."
        return (
            f"Error: {self.display_name} CLI at '{exc.command}' cannot be run ({exc.strerror or exc}). "
            f"Check apple_flow_{self.command_setting} setting."
        )

    def timeout_text(self, seconds: float) -> str:
        return (
            f"Error: Request timed out after {format_seconds(seconds)}s. "
            "Try a smaller request, or raise the timeout setting."
        )

    def failure_text(self, exit_code: int | None, detail: str) -> str:
        code = "killed" if exit_code is None else str(exit_code)
        text = f"Error: {self.display_name} execution failed (exit code {code})."
        return f"{text} {detail}".rstrip() if detail else text

    def _require_version(self) -> str:
        """Runs ``<command> --version``; returns its output or raises ``ConnectorError`` saying what to do."""
        if self.resolve_command() is None:
            raise ConnectorError(
                f"{self.display_name} CLI not found at '{self.command}'. Install it or set "
                f"APPLE_FLOW_{self.command_setting.upper()} to its path."
            )
        executable = self.executable()
        result = self._probe([executable, "--version"])
        if result.exit_code != 0:
            raise ConnectorError(
                f"'{executable} --version' failed (exit code {result.exit_code}): "
                f"{result.last_stderr_line or 'no output'}. Check APPLE_FLOW_{self.command_setting.upper()}."
            )
        return result.stdout.strip()

    def _probe(self, argv: list[str]) -> RunResult:
        try:
            return self.runner.run(argv, "", timeout=VERSION_TIMEOUT_SECONDS)
        except SpawnError as exc:
            raise ConnectorError(self.spawn_error_text(exc).removeprefix("Error: ")) from exc


def format_seconds(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"
