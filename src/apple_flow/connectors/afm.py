"""AfmConnector: every turn runs ``apple-code`` (the CLI contract in apple_code/CONTRACT.md) once.

The prompt is fitted to ``settings.afm.max_prompt_chars`` (the on-device window is 4,096 tokens), the soul
prompt goes in ``--system`` cut to ``settings.afm.soul_max_chars``, no tools context is added (apple-code has
native tools), and the ``stream-json`` output gives the reply (the ``result`` event) and progress lines
(``tool_call`` events).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from apple_flow.config import ENV_FILE, Settings
from apple_flow.connectors.base import ConnectorError, Status, TurnOutcome, TurnRequest
from apple_flow.connectors.cli import CliConnector, Invocation, check_report, format_seconds
from apple_flow.connectors.events import EventStream, apple_code_tool_calls
from apple_flow.connectors.prompt import cut_end
from apple_flow.connectors.runner import ProcessRunner, RunResult
from apple_flow.paths import resolve_apple_code

EXIT_MODEL_UNAVAILABLE = 3
EXIT_CHECK_FAILED = 5  # --verify: the check still fails after the repair rounds (subtype error_verify)
EXIT_TIMEOUT = 124
EXIT_INTERRUPTED = 130
# apple-code enforces --timeout itself and reports a partial answer; the runner's own wall clock is this much
# later, for an apple-code that does not stop.
DEFAULT_KILL_MARGIN_SECONDS = 10.0
MODEL_UNAVAILABLE_HINT = (
    "Turn on Apple Intelligence (macOS 26), or set APPLE_FLOW_AFM_BACKEND=openai with "
    "APPLE_FLOW_AFM_BASE_URL pointing at a local server (`apple-flow model start`)."
)
# When the daemon is already set to a server, the fix is that server, not the setting.
SERVER_UNAVAILABLE_HINT = (
    "Start that server (`apple-flow model start` runs the local demo model, `apple-flow model start --tasks` the "
    "one for approved tasks), or correct APPLE_FLOW_AFM_BASE_URL and APPLE_FLOW_AFM_MODEL (for approved tasks: "
    "APPLE_FLOW_AFM_TASK_BASE_URL and APPLE_FLOW_AFM_TASK_MODEL)."
)


@dataclass(frozen=True)
class Backend:
    """Where apple-code's model runs: ``--backend`` and, for a server, its URL and model (None: apple-code's own
    defaults)."""

    name: str  # auto | fm | openai
    base_url: str | None = None
    model: str | None = None


class AfmConnector(CliConnector):
    display_name: ClassVar[str] = "apple-code"
    section: ClassVar[str] = "afm"
    runs_checks: ClassVar[bool] = True  # --verify
    # apple-code's own (CONTRACT.md): the server's key, endpoint and model when not given as options, how tool
    # results travel, and more paths its commands must not read.
    environment_variables: ClassVar[tuple[str, ...]] = (
        "APPLE_CODE_API_KEY", "APPLE_CODE_BASE_URL", "APPLE_CODE_MODEL", "APPLE_CODE_TOOL_RESULTS", "APPLE_CODE_HIDE",
    )

    def __init__(
        self,
        settings: Settings,
        runner: ProcessRunner | None = None,
        kill_margin_seconds: float = DEFAULT_KILL_MARGIN_SECONDS,
    ) -> None:
        super().__init__(settings, runner)
        self.kill_margin_seconds = kill_margin_seconds
        # What every turn's command line says that the settings fix: worked out once, here.
        self._hidden = self._hide_flags()
        self._turn_flags = self._fixed_flags(self.backend())
        task_backend = self.task_backend_of(settings)
        self._task_flags = self._fixed_flags(task_backend) if task_backend is not None else self._turn_flags

    def _context_window(self) -> int:
        return self.settings.afm.context_window

    def _prompt_max_chars(self) -> int:
        return self.settings.afm.max_prompt_chars

    def resolve_command(self) -> str | None:
        found = resolve_apple_code(self.command)
        return str(found) if found is not None else None

    # --- one turn ------------------------------------------------------------------------------------------

    def invocation(self, executable: str, prompt: str, cwd: Path, request: TurnRequest) -> Invocation:
        s = self.settings
        fixed = self._task_flags if request.task or request.plan else self._turn_flags
        argv = [executable, "--cwd", str(cwd), *fixed, *self._deny_port_flags()]
        if request.read_only:
            argv.append("--read-only")
        if request.plan and s.afm.plan_tasks:
            argv.append("--plan")
        if request.verify:
            argv += ["--verify", request.verify, "--verify-rounds", str(s.verify.rounds)]
        if s.afm.mcp_config is not None:  # the servers' own tools; with --read-only only those marked read-only
            argv += ["--mcp-config", str(s.afm.mcp_config.expanduser().absolute())]
        argv.append("-")
        return Invocation(argv, prompt, cwd, s.afm.timeout_seconds + self.kill_margin_seconds,
                          EventStream(apple_code_tool_calls))

    def _fixed_flags(self, backend: Backend) -> list[str]:
        """The flags of every turn on ``backend`` that only the settings decide: the soul prompt, the limits, the
        output format, the backend and the paths to hide."""
        afm = self.settings.afm
        soul = cut_end(self.soul_prompt, afm.soul_max_chars)
        flags = ["--system", soul] if soul else []
        flags += ["--timeout", format_seconds(afm.timeout_seconds), "--output-format", "stream-json"]
        if afm.max_turns is not None:
            flags += ["--max-turns", str(afm.max_turns)]
        return [*flags, *self._backend_flags(backend), *self._hidden]

    @classmethod
    def backend_of(cls, settings: Settings) -> Backend:
        """Where apple-code's model runs with these settings (the web page's health view shows it too)."""
        return Backend(settings.afm.backend, settings.afm.base_url, settings.afm.model)

    @classmethod
    def task_backend_of(cls, settings: Settings) -> Backend | None:
        """Where a task's turns (its plan and its approved work) run when the settings give them a server or model
        of their own (a larger model for the work, a quick one for chat); None: where every turn runs. A server of
        their own is an OpenAI-compatible one; without a model, apple-code takes the one it lists."""
        afm = settings.afm
        if afm.task_base_url:
            return Backend("openai", afm.task_base_url, afm.task_model)
        if afm.task_model:
            backend = cls.backend_of(settings)
            return Backend(backend.name, backend.base_url, afm.task_model)
        return None

    def backend(self) -> Backend:
        return self.backend_of(self.settings)

    def backend_flags(self) -> list[str]:
        """``--backend``, ``--model``, ``--base-url``, ``--context-tokens`` as the settings give them (the MCP
        server's plain-answer runs use the same chain as the daemon's turns)."""
        return self._backend_flags(self.backend())

    def _backend_flags(self, backend: Backend) -> list[str]:
        flags: list[str] = []
        if backend.name != "auto":
            flags += ["--backend", backend.name]
        if backend.model:
            flags += ["--model", backend.model]
        if backend.base_url:
            flags += ["--base-url", backend.base_url]
        if self.settings.afm.context_tokens:
            flags += ["--context-tokens", str(self.settings.afm.context_tokens)]
        return flags

    def reach_flags(self) -> list[str]:
        """What apple-code's commands and tools must not reach besides its own list (~/.ssh, ~/.apple-flow ...):
        the daemon's .env (the file the settings were read from, `run --env-file FILE` and the service's, and the
        one in the folder it runs in) and its state (the database, its folder), and the port the web page listens
        on (the one the system chose for APPLE_FLOW_WEB_PORT=0), whose token would let a command approve its own
        work."""
        return [*self._hidden, *self._deny_port_flags()]

    def _hide_flags(self) -> list[str]:
        s = self.settings
        database = s.db_path.expanduser().absolute()
        env_files = [path for path in (s.env_file_read, Path(ENV_FILE).absolute()) if path is not None]
        hidden = [*env_files, database.parent, database,
                  *(database.with_name(database.name + suffix) for suffix in ("-wal", "-shm"))]
        return [flag for path in dict.fromkeys(hidden) for flag in ("--hide", str(path))]

    def _deny_port_flags(self) -> list[str]:
        """Asked at each turn: the web page may have started listening (on a port the system chose) since."""
        s = self.settings
        port = s.web_port_listening or s.web.port
        return ["--deny-port", str(port)] if s.web.enabled and port else []

    def interpret(self, result: RunResult, invocation: Invocation) -> TurnOutcome:
        """apple-code's exit code (and ``result`` subtype, which the contract pairs with it) -> the outcome."""
        stream = invocation.stream
        assert stream is not None
        report = stream.result
        code = result.exit_code
        said = report.answer if report is not None else ""  # on an error, the message (after any partial answer)
        if result.timed_out or code == EXIT_TIMEOUT:
            return self.timed_out(self.settings.afm.timeout_seconds, said, exit_code=code, report=report)
        detail = result.last_stderr_line or said
        if code == EXIT_MODEL_UNAVAILABLE:
            reason = _sentence(said or result.last_stderr_line or "no reason given")
            return self.outcome(Status.NO_MODEL, f"{reason} {self._model_hint()}", code, report=report)
        if code == EXIT_CHECK_FAILED:  # the result: the last answer, then the message in parentheses
            answer, message = _answer_and_message(said)
            if not message:
                check = check_report(report.verify if report is not None else None)
                message = f"the check `{check.command}` still fails" if check is not None else "the check still fails"
            return self.outcome(Status.CHECK_FAILED, _sentence(message), code, text=answer, report=report)
        if code == EXIT_INTERRUPTED:
            return self.outcome(
                Status.CANCELLED, f"{self.display_name} was interrupted (exit code {code}). {detail}".rstrip(), code,
                report=report,
            )
        if code != 0:
            return self.failed(code, detail, report=report)
        if report is None:
            return self.failed(code, f"The output ended without a result event. {result.last_stderr_line}")
        if report.failed:
            return self.failed(code, said or detail, report=report)
        return self.answer(said, code, report=report)

    def _model_hint(self, backend: Backend | None = None) -> str:
        on_server = (backend or self.backend()).name == "openai"
        return SERVER_UNAVAILABLE_HINT if on_server else MODEL_UNAVAILABLE_HINT

    # --- start-up check --------------------------------------------------------------------------------------

    def ensure_started(self) -> None:
        """``apple-code --version`` then ``--check`` with the configured backend; raises ``ConnectorError`` with
        what to do when the binary is missing or no model is available."""
        self._require_version()
        self._check_backend(self.backend(), "")
        task_backend = self.task_backend_of(self.settings)
        if task_backend is not None and task_backend != self.backend():
            self._check_backend(task_backend, " for approved tasks")

    def _check_backend(self, backend: Backend, what: str) -> None:
        executable = self.executable()
        result = self._probe([executable, "--check", *self._backend_flags(backend)])
        check = last_json_object(result.stdout)
        if result.exit_code == 0:
            return
        if result.exit_code == EXIT_MODEL_UNAVAILABLE:
            name = check.get("backend", backend.name)
            where = f" at {backend.base_url}" if backend.base_url else ""
            reason = _sentence(check.get("reason") or result.last_stderr_line or "no reason given")
            raise ConnectorError(
                f"apple-code: no model available{what} (backend {name}{where}): {reason} {self._model_hint(backend)}",
                Status.NO_MODEL,
            )
        raise ConnectorError(
            f"'{executable} --check' failed (exit code {result.exit_code}): "
            f"{result.last_stderr_line or result.stdout.strip() or 'no output'}"
        )


def _sentence(text: str) -> str:
    """``text`` ending in exactly one full stop (apple-code's reasons usually end with one, the fake's not)."""
    return text.rstrip().rstrip(".") + "."


def _answer_and_message(result: str) -> tuple[str, str]:
    """An error result's partial answer and its message: ``answer\n\n(message)``, or only ``(message)``."""
    text = result.strip()
    if not text.endswith(")"):
        return text, ""
    start = text.rfind("\n\n(")
    if start >= 0:
        return text[:start].strip(), text[start + 3:-1].strip()
    return ("", text[1:-1].strip()) if text.startswith("(") else (text, "")


def last_json_object(stdout: str) -> dict[str, Any]:
    """The last line of apple-code's output that is a JSON object (its result, or `--check`'s report); {} if none."""
    for line in reversed(stdout.splitlines()):
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return {}


class OllamaConnector(AfmConnector):
    """The afm connector on Ollama, for a Mac (or any machine) without Apple Intelligence: apple-code with
    ``--backend openai`` on Ollama's OpenAI-compatible endpoint (``APPLE_FLOW_OLLAMA_BASE_URL``, by default Ollama's
    own http://127.0.0.1:11434/v1) and ``APPLE_FLOW_OLLAMA_MODEL``. Everything else is the afm connector's: the
    prompt budget, the soul prompt, the timeout, plan mode (the ``afm_*`` settings), except the backend, URL and
    model, which this preset sets."""

    @classmethod
    def backend_of(cls, settings: Settings) -> Backend:
        return Backend("openai", settings.ollama.base_url, settings.ollama.model)

    def _model_hint(self, backend: Backend | None = None) -> str:
        return (
            f"Start Ollama (`ollama serve`) and pull the model (`ollama pull {self.settings.ollama.model}`), or "
            "correct APPLE_FLOW_OLLAMA_BASE_URL and APPLE_FLOW_OLLAMA_MODEL."
        )
