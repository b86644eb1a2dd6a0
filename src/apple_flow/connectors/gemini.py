"""GeminiConnector: Gemini CLI in headless mode once per turn (``gemini --output-format stream-json
--approval-mode MODE --prompt=PROMPT``).

From Gemini CLI's own documentation (docs/cli/headless.md and docs/cli/cli-reference.md in google-gemini/gemini-cli,
published at geminicli.com/docs/cli/headless): ``-p``/``--prompt`` runs one prompt without the interactive UI and
exits; ``--output-format stream-json`` prints JSON lines: ``init`` (session id, model), ``message`` (user and
assistant text; ``delta: true`` for pieces of the answer), ``tool_use`` (``tool_name``, ``tool_id``,
``parameters``), ``tool_result``, ``error`` (non-fatal) and last ``result`` (``status`` success or error, ``error``,
``stats`` with ``input_tokens``, ``output_tokens``, ``duration_ms``). ``--approval-mode`` is ``default``,
``auto_edit``, ``yolo`` or ``plan`` (read-only); headless runs refuse whatever would need an approval. Exit codes:
0 success, 1 general error, 41 authentication, 42 input, 52 configuration, 53 turn limit, 54 fatal tool error,
130 cancelled.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from apple_flow.connectors.base import Status, TurnOutcome, TurnRequest, Usage
from apple_flow.connectors.cli import CliConnector, Invocation
from apple_flow.connectors.events import EventStream
from apple_flow.connectors.runner import RunResult
from apple_flow.connectors.stream_events import StreamEvent

EXIT_CANCELLED = 130
# What to do about the exits that have one fix.
EXIT_HINTS = {
    41: "Gemini CLI is not signed in: run `gemini` once in a terminal, or give the daemon GEMINI_API_KEY.",
    52: "Gemini CLI's configuration is invalid: check ~/.gemini/settings.json.",
    53: "It reached its turn limit (maxSessionTurns): ask for less at a time.",
}
WRITE_TOOLS = frozenset({"write_file", "replace"})
SHELL_TOOL = "run_shell_command"


def gemini_tool_calls(event: StreamEvent) -> list[tuple[str, Mapping[str, Any]]]:
    """Gemini CLI: ``{"type":"tool_use","tool_name":..,"tool_id":..,"parameters":{..}}``."""
    return _tool_uses(event.raw)


def _tool_uses(event: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    if event.get("type") != "tool_use" or not isinstance(event.get("tool_name"), str):
        return []
    parameters = event.get("parameters")
    return [(event["tool_name"], parameters if isinstance(parameters, dict) else {})]


class GeminiStream(EventStream):
    """Gemini's stream has no answer in its ``result`` event: the answer is the assistant's text after its last
    tool call (text before a tool call is the model thinking aloud: "Let me look at the tests.")."""

    def __init__(self) -> None:
        super().__init__(gemini_tool_calls)
        self.model = ""
        self.files_changed: list[str] = []
        self.commands_run = 0
        self.last_error = ""
        self._since_tool: list[str] = []

    def _note(self, event: Mapping[str, Any]) -> None:  # Gemini CLI's own stream format
        kind = event.get("type")
        if kind == "init" and isinstance(event.get("model"), str):
            self.model = event["model"]
        elif kind == "message" and event.get("role") == "assistant" and isinstance(event.get("content"), str):
            self._since_tool.append(event["content"])
        elif kind == "error" and isinstance(event.get("message"), str):
            self.last_error = event["message"]
        for name, parameters in _tool_uses(event):
            self._since_tool = []
            path = parameters.get("file_path")
            if name in WRITE_TOOLS and isinstance(path, str) and path not in self.files_changed:
                self.files_changed.append(path)
            self.commands_run += 1 if name == SHELL_TOOL else 0

    @property
    def answer(self) -> str:
        return "".join(self._since_tool).strip()

    @property
    def failure(self) -> str:
        """Why the run failed, as the stream says: the ``result`` event's error, else the last ``error`` event."""
        error = self.result.raw.get("error") if self.result is not None else None
        message = error.get("message") if isinstance(error, dict) else None
        return message if isinstance(message, str) and message else self.last_error


class GeminiConnector(CliConnector):
    display_name: ClassVar[str] = "Gemini"
    section: ClassVar[str] = "gemini"
    # Gemini CLI has no flag that adds to its system prompt (GEMINI_SYSTEM_MD replaces it). The prompt travels as
    # one argument: Gemini CLI takes stdin as extra context only.
    soul_leads_prompt: ClassVar[bool] = True
    prompt_argument_extra: ClassVar[int | None] = 0
    # An API key, or Vertex AI with a project and its credentials file.
    environment_variables: ClassVar[tuple[str, ...]] = (
        "GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_LOCATION",
        "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_APPLICATION_CREDENTIALS",
    )

    def _context_window(self) -> int:
        return self.options.context_window

    def invocation(self, executable: str, prompt: str, cwd: Path, request: TurnRequest) -> Invocation:
        # plan: read-only for real; auto_edit: edits are approved, anything else (shell commands) would need an
        # approval, which a headless run refuses (as claude's acceptEdits).
        mode = "plan" if request.read_only else "auto_edit"
        argv = [executable, "--output-format", "stream-json", "--approval-mode", mode]
        if self.options.model:
            argv += ["--model", self.options.model]
        # One argument, --prompt=TEXT (the long form of -p): a request starting with "-" is not taken for a flag.
        argv.append(f"--prompt={prompt}")
        return Invocation(argv, "", cwd, self.settings.turn_timeout_seconds, GeminiStream())

    def interpret(self, result: RunResult, invocation: Invocation) -> TurnOutcome:
        stream = invocation.stream
        assert isinstance(stream, GeminiStream)
        fields = self._reported(stream)
        code = result.exit_code
        if result.timed_out:
            return self.timed_out(invocation.timeout, stream.answer, exit_code=code, **fields)
        detail = stream.failure or result.last_stderr_line
        if code == EXIT_CANCELLED:
            return self.outcome(Status.CANCELLED, f"Gemini was interrupted (exit code {code}). {detail}".rstrip(),
                                code, **fields)
        if code != 0:
            hint = EXIT_HINTS.get(code, "") if code is not None else ""
            if detail and hint:
                detail = f"{detail.rstrip().rstrip('.')}. {hint}"
            return self.failed(code, detail or hint, **fields)
        if stream.result is None:
            return self.failed(code, f"The output ended without a result event. {result.last_stderr_line}", **fields)
        status = stream.result.raw.get("status")
        if status != "success":
            return self.failed(code, detail or f"result status {status!r}", **fields)
        return self.answer(stream.answer, code, **fields)

    @staticmethod
    def _reported(stream: GeminiStream) -> dict[str, Any]:
        fields: dict[str, Any] = {
            "model": stream.model,
            "files_changed": tuple(stream.files_changed),
            "commands_run": stream.commands_run,
        }
        stats = stream.result.raw.get("stats") if stream.result is not None else None
        if isinstance(stats, dict):
            tokens = {k: stats[k] for k in ("input_tokens", "output_tokens") if isinstance(stats.get(k), int)}
            if tokens:
                fields["usage"] = Usage(**tokens)  # counted by the API, not estimated
            if isinstance(stats.get("duration_ms"), int):
                fields["duration_ms"] = stats["duration_ms"]
        return fields
