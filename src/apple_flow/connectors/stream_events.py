"""apple-code's stream-json events as typed records, mirroring the Output section of ``apple_code/CONTRACT.md``
(``start``, ``tool_call``, ``tool_result``, ``text``, ``notice``, ``verify``, ``result``), each with its ``type``
as the stream names it; claude's ``result`` event uses the same names. Each line is parsed once, where it enters
(``connectors.events``, where the stream is read, and the run log read back from the store), and the rest of
apple-flow reads the records, never the JSON.

A field missing or of the wrong type is left at its default (an older or newer apple-code still reads); an event of
another type, or of another agent's stream, is ``Other``. Every record keeps the object it was read from
(``raw``): what the run log stores, and what an agent with a stream of its own (Gemini CLI) reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar


def _raw() -> Any:
    return field(default_factory=dict, compare=False, repr=False)


@dataclass(frozen=True)
class Start:
    type: ClassVar[str] = "start"  # the event's ``type`` as the stream names it
    version: str = ""
    backend: str = ""
    model: str = ""
    cwd: str = ""
    context_tokens: int | None = None
    tools: tuple[str, ...] = ()
    subtask: int | None = None  # set on a worker's events in a --plan run
    raw: Mapping[str, Any] = _raw()


@dataclass(frozen=True)
class ToolCall:
    type: ClassVar[str] = "tool_call"
    id: str = ""
    name: str = ""
    arguments: Mapping[str, Any] = field(default_factory=dict)
    subtask: int | None = None
    raw: Mapping[str, Any] = _raw()


@dataclass(frozen=True)
class ToolResult:
    type: ClassVar[str] = "tool_result"
    id: str = ""
    name: str = ""
    ok: bool = True
    summary: str = ""
    truncated: bool = False
    output: str | None = None  # what the model was given, at most 4 KiB
    exit_code: int | None = None  # runCommand, when the command exited
    diff: str | None = None  # writeFile and editFile, when the text changed
    subtask: int | None = None
    raw: Mapping[str, Any] = _raw()


@dataclass(frozen=True)
class Text:
    type: ClassVar[str] = "text"
    delta: str = ""
    subtask: int | None = None
    raw: Mapping[str, Any] = _raw()


@dataclass(frozen=True)
class Notice:
    type: ClassVar[str] = "notice"
    message: str = ""
    subtask: int | None = None
    raw: Mapping[str, Any] = _raw()


@dataclass(frozen=True)
class VerifyReport:
    """Where the ``--verify`` check stands: in a ``verify`` event each time it runs, and in the ``result``."""

    command: str = ""
    passed: bool | None = None  # None: not said (a malformed object; no verdict)
    rounds: int = 0  # how many times a failure went back to the model
    runs: int | None = None  # how many times the check ran (0: never; None: not said)
    exit_code: int | None = None  # the last run's (absent when it was killed or timed out)
    output_tail: str = ""


@dataclass(frozen=True)
class Verify(VerifyReport):
    """Each time the check runs: where it stands then."""

    type: ClassVar[str] = "verify"
    subtask: int | None = None
    before: bool | None = None  # True: the run before the model's first turn (absent otherwise)
    raw: Mapping[str, Any] = _raw()


@dataclass(frozen=True)
class ResultUsage:
    input_tokens: int | None = None
    output_tokens: int | None = None
    estimated: bool = False  # counted by apple-code's estimator, not the model
    fixed_tokens: int | None = None  # what every request paid before the conversation


@dataclass(frozen=True)
class Result:
    type: ClassVar[str] = "result"
    subtype: str | None = None  # success, error_backend, error_timeout, ... (paired with the exit code)
    is_error: bool = False
    result: str | None = None  # the answer; on an error, the message (after any partial answer)
    num_turns: int | None = None
    duration_ms: int | None = None
    usage: ResultUsage | None = None
    files_changed: tuple[str, ...] | None = None
    commands_run: int | None = None
    backend: str | None = None
    model: str | None = None
    verify: VerifyReport | None = None  # with --verify
    subtask: int | None = None
    raw: Mapping[str, Any] = _raw()

    @property
    def failed(self) -> bool:
        return self.is_error or (self.subtype or "success") != "success"

    @property
    def answer(self) -> str:
        return (self.result or "").strip()


@dataclass(frozen=True)
class Other:
    """An event of a type the contract does not name (or another agent's)."""

    type: str = "unknown"
    subtask: int | None = None
    raw: Mapping[str, Any] = _raw()


StreamEvent = Start | ToolCall | ToolResult | Text | Notice | Verify | Result | Other
