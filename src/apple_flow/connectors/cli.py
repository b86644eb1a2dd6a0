"""What every agent-CLI connector shares: building one turn's request (the prompt fitted with the exchanges the
daemon chose, the soul prompt), running it on the ``ProcessRunner``, and the outcomes every CLI has in common
(cancelled, not found, cannot be run, timed out, failed).

A concrete connector says how to build the command line (``invocation``) and how to read its output
(``interpret``); everything else is here, once. A connector holds no conversation: only its settings.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Generator, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from apple_flow.config import Settings
from apple_flow.connectors.base import (
    AgentEvent,
    CheckReport,
    ConnectorError,
    EndedTurn,
    Status,
    TurnOutcome,
    TurnRequest,
    TurnRun,
    Usage,
)
from apple_flow.connectors.environment import agent_environment
from apple_flow.connectors.events import EventStream
from apple_flow.connectors.prompt import fit_prompt
from apple_flow.connectors.runner import ChildRun, ProcessRunner, RunResult, SpawnError
from apple_flow.connectors.stream_events import Result, VerifyReport
from apple_flow.filelimit import open_files_limit
from apple_flow.sections import AfmSettings, CliSettings

VERSION_TIMEOUT_SECONDS = 15.0
# For an agent that cannot be given the check to run itself (its CLI has no such option): the prompt names it.
CHECK_REQUEST = "When the work is done, run `{command}` in the workspace and fix what it reports until it passes."
# For the CLIs whose prompt travels as one argument: Linux refuses an argument over 128 KiB (MAX_ARG_STRLEN);
# 30,000 characters stay below it even at 4 bytes each.
ARGUMENT_MAX_CHARS = 30_000


@dataclass(frozen=True)
class Invocation:
    """One turn's child process: its argv, what goes on stdin, where it runs, its wall-clock limit, and the parser
    its stdout lines are fed to as they arrive (JSON-lines CLIs; None: stdout is read at the end)."""

    argv: list[str]
    stdin: str
    cwd: Path
    timeout: float
    stream: EventStream | None = None


class CliConnector:
    """Base of the connectors that run an agent CLI once per turn."""

    #: How the daemon's messages name the agent ("apple-code execution failed ...").
    display_name: ClassVar[str]
    #: The settings section of this connector's options (``settings.codex``): its command (named in "CLI not
    #: found" errors by its variable, APPLE_FLOW_CODEX_COMMAND), model and context window.
    section: ClassVar[str]
    #: The agent runs a turn's check itself and reports how it went (apple-code --verify); otherwise the prompt
    #: asks it to run the check, and nothing is reported.
    runs_checks: ClassVar[bool] = False
    #: The variables of the daemon's environment this agent needs besides the ones every process gets
    #: (``connectors.environment``): its API key, its config folder. Nothing else of the daemon's reaches it.
    environment_variables: ClassVar[tuple[str, ...]] = ()
    #: The CLI has no flag that adds to its system prompt: the soul prompt leads the prompt instead.
    soul_leads_prompt: ClassVar[bool] = False
    #: The prompt travels as one argument, with this many characters of its own around it; None: it goes on stdin.
    prompt_argument_extra: ClassVar[int | None] = None

    def __init__(self, settings: Settings, runner: ProcessRunner | None = None) -> None:
        self.settings = settings
        self.options: CliSettings | AfmSettings = getattr(settings, self.section)
        self.command: str = self.options.command  # as configured; found on PATH (``executable``) at each turn
        self.context_window = self._context_window()
        self.runner = runner if runner is not None else ProcessRunner()
        self.soul_prompt = settings.soul_text()
        # Fixed by the settings: worked out once here, not at every turn.
        self.prompt_max_chars = self._prompt_max_chars()

    # --- per connector -----------------------------------------------------------------------------------

    def _context_window(self) -> int:
        raise NotImplementedError

    def invocation(self, executable: str, prompt: str, cwd: Path, request: TurnRequest) -> Invocation:
        """The child process running ``executable`` (argv[0], found for this turn) on ``prompt`` (the whole prompt:
        ``with_soul`` has put the soul prompt first where it leads), and the parser of its output."""
        raise NotImplementedError

    def interpret(self, result: RunResult, invocation: Invocation) -> TurnOutcome:
        """How the child of ``invocation`` ended (``invocation.stream`` has read its output), as an outcome."""
        raise NotImplementedError

    def _prompt_max_chars(self) -> int:
        if self.prompt_argument_extra is not None:
            # One argument holds the soul prompt, the blank line after it and the prompt.
            return max(1000, ARGUMENT_MAX_CHARS - len(self.soul_prompt) - 2 - self.prompt_argument_extra)
        # Cloud CLIs have large windows; the cap only keeps a runaway history bounded.
        return 100_000

    def with_soul(self, prompt: str) -> str:
        """``prompt`` led by the soul prompt where the CLI cannot take it otherwise (``soul_leads_prompt``)."""
        return f"{self.soul_prompt}\n\n{prompt}" if self.soul_leads_prompt and self.soul_prompt else prompt

    # --- the Connector protocol ----------------------------------------------------------------------------

    def resolve_command(self) -> str | None:
        """The executable to run, or None when it cannot be found."""
        return shutil.which(self.command)

    def executable(self) -> str:
        """argv[0] for a turn: the resolved command as an absolute path (the child runs in the workspace, where a
        relative path would mean something else), or the command as configured so the spawn error names it."""
        found = self.resolve_command()
        return str(Path(found).absolute()) if found else self.command

    def environment(self) -> dict[str, str]:
        """The environment of this agent's process: the allowlist, from the daemon's own environment."""
        return agent_environment(os.environ, (*self.environment_variables, *self.settings.agent_environment))

    def ensure_started(self) -> None:
        self._require_version()

    def shutdown(self) -> None:
        self.runner.shutdown()

    def cancel(self, sender: str | None = None) -> int:
        return self.runner.cancel(sender)

    def run(self, request: TurnRequest) -> TurnRun:
        default = self.settings.workspaces.default.expanduser().absolute()
        # Absolute: the child runs inside it, where a relative path given to it would mean something else.
        cwd = (request.workspace or default).expanduser().absolute()
        if not cwd.is_dir():
            fix = "Check APPLE_FLOW_DEFAULT_WORKSPACE." if cwd == default else "Check the workspace you asked for."
            return EndedTurn(self.outcome(Status.FAILED, f"workspace '{cwd}' does not exist or is not a folder. {fix}"))
        message = request.message
        if request.verify and not self.runs_checks:
            message += "\n\n" + CHECK_REQUEST.format(command=request.verify)
        prompt = fit_prompt(message, request.exchanges, self.prompt_max_chars, request.files_note)
        invocation = self.invocation(self.executable(), self.with_soul(prompt), cwd, request)
        try:
            child = self.runner.start(
                invocation.argv, invocation.stdin, cwd=invocation.cwd, timeout=invocation.timeout, owner=request.sender,
                env=self.environment(),
            )
        except SpawnError as exc:
            return EndedTurn(self.spawn_outcome(exc))
        return CliTurn(self, child, invocation)

    # --- shared outcomes ------------------------------------------------------------------------------------

    def outcome(
        self, status: Status, detail: str = "", exit_code: int | None = None, text: str = "",
        report: Result | None = None, **fields: Any,
    ) -> TurnOutcome:
        """An outcome of this agent, with what its ``result`` event (``report``) says about the run."""
        return TurnOutcome(
            status, text=text, detail=detail, agent=self.display_name, exit_code=exit_code,
            **{**(reported(report) if report is not None else {}), **fields},
        )

    def spawn_outcome(self, exc: SpawnError) -> TurnOutcome:
        check = f"Check apple_flow_{self.section}_command setting."
        if exc.reason == "not_found":
            return self.outcome(Status.BINARY_MISSING, f"{self.display_name} CLI not found at '{exc.command}'. {check}")
        if exc.reason == "bad_cwd":
            return self.outcome(Status.FAILED, f"{exc}. Check the workspace you asked for.")
        if exc.reason == "no_files":
            limit = open_files_limit()
            return self.outcome(
                Status.FAILED,
                f"{self.display_name} could not start: apple-flow has too many files open (its limit is "
                f"{limit if limit is not None else 'unlimited'}). Try again in a minute; if it repeats, restart "
                "apple-flow and see its log for what holds them.",
            )
        return self.outcome(
            Status.FAILED, f"{self.display_name} CLI at '{exc.command}' cannot be run ({exc.strerror or exc}). {check}"
        )

    def timed_out(self, seconds: float, partial: str = "", **fields: Any) -> TurnOutcome:
        detail = (
            f"Request timed out after {format_seconds(seconds)}s. Try a smaller request, or raise the timeout setting."
        )
        return self.outcome(Status.TIMED_OUT, detail, text=partial, limit_seconds=seconds, **fields)

    def failed(self, exit_code: int | None, detail: str, **fields: Any) -> TurnOutcome:
        code = "killed" if exit_code is None else str(exit_code)
        text = f"{self.display_name} execution failed (exit code {code})."
        return self.outcome(Status.FAILED, f"{text} {detail}".rstrip() if detail else text, exit_code, **fields)

    def answer(self, text: str, exit_code: int | None = 0, **fields: Any) -> TurnOutcome:
        """ANSWERED with ``text``, or EMPTY when there is none."""
        status = Status.ANSWERED if text else Status.EMPTY
        return self.outcome(status, exit_code=exit_code, text=text, **fields)

    # --- start-up check ------------------------------------------------------------------------------------

    def _require_version(self) -> str:
        """Runs ``<command> --version``; returns its output or raises ``ConnectorError`` saying what to do."""
        if self.resolve_command() is None:
            raise ConnectorError(
                f"{self.display_name} CLI not found at '{self.command}'. Install it or set "
                f"APPLE_FLOW_{self.section.upper()}_COMMAND to its path.",
                Status.BINARY_MISSING,
            )
        executable = self.executable()
        result = self._probe([executable, "--version"])
        if result.exit_code != 0:
            raise ConnectorError(
                f"'{executable} --version' failed (exit code {result.exit_code}): "
                f"{result.last_stderr_line or 'no output'}. Check APPLE_FLOW_{self.section.upper()}_COMMAND."
            )
        return result.stdout.strip()

    def _probe(self, argv: list[str]) -> RunResult:
        try:
            return self.runner.run(argv, "", timeout=VERSION_TIMEOUT_SECONDS, env=self.environment())
        except SpawnError as exc:
            outcome = self.spawn_outcome(exc)
            raise ConnectorError(outcome.detail, outcome.status) from exc


def reported(report: Result) -> dict[str, Any]:
    """What a ``result`` event reports about the run (apple-code's contract; claude's uses the same names), as
    ``TurnOutcome`` fields. Fields it lacks are left at their defaults."""
    fields: dict[str, Any] = {}
    for name in ("subtype", "backend", "model", "files_changed", "commands_run", "num_turns", "duration_ms"):
        if getattr(report, name) is not None:
            fields[name] = getattr(report, name)
    usage = report.usage
    if usage is not None:
        tokens = {k: v for k, v in (("input_tokens", usage.input_tokens), ("output_tokens", usage.output_tokens))
                  if v is not None}
        fields["usage"] = Usage(**tokens, estimated=usage.estimated)
    check = check_report(report.verify)
    if check is not None:
        fields["check"] = check
    return fields


def check_report(value: VerifyReport | None) -> CheckReport | None:
    """apple-code's ``verify`` object as a ``CheckReport``, or None when it is missing or lacks its command or
    verdict."""
    if value is None or not value.command or value.passed is None:
        return None
    return CheckReport(value.command, value.passed, value.rounds, value.output_tail, runs=value.runs,
                       exit_code=value.exit_code)


def format_seconds(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


class CliTurn:
    """A CLI's turn, its child started: ``events`` are those its stream parses from the child's lines, as the
    caller reads them (none for a CLI read at the end); ``outcome`` is the connector's reading of how the child
    ended."""

    def __init__(self, connector: CliConnector, child: ChildRun, invocation: Invocation) -> None:
        self._connector = connector
        self._child = child
        self._invocation = invocation
        stream = invocation.stream
        self.events: Generator[AgentEvent, None, None] = (
            stream.events(child) if stream is not None else _read_to_end(child))

    def outcome(self) -> TurnOutcome:
        try:
            for _ in self.events:  # those the caller did not read: the child's output is read to its end
                pass
        except BaseException:
            self.close()  # a stream that failed to read must not leave its child running
            raise
        result = self._child.result
        assert result is not None  # set once its lines are read: the child is released
        connector = self._connector
        if result.cancelled:
            return connector.outcome(Status.CANCELLED, f"{connector.display_name} run was cancelled.", result.exit_code)
        return connector.interpret(result, self._invocation)

    def close(self) -> None:
        self.events.close()
        self._child.close()


def _read_to_end(lines: Iterable[str]) -> Generator[AgentEvent, None, None]:
    """The events of a CLI whose output is read at the end (``interpret``): none; its lines are read to the end, as
    the runner keeps them."""
    for _ in lines:
        pass
    yield from ()
