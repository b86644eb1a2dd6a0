"""apple-code's stream-json events as typed records, mirroring the Output section of ``apple_code/CONTRACT.md``
(``start``, ``tool_call``, ``tool_result``, ``text``, ``notice``, ``verify``, ``result``); claude's ``result``
event uses the same names. Each line is parsed here once, where it enters (``connectors.events``, and the run log
read back from the store), and the rest of apple-flow reads the records, never the JSON.

A field missing or of the wrong type is left at its default (an older or newer apple-code still reads); an event of
another type, or of another agent's stream, is ``Other``. Every record keeps the object it was read from
(``raw``): what the run log stores, and what an agent with a stream of its own (Gemini CLI) reads.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


def _raw() -> Any:
    return field(default_factory=dict, compare=False, repr=False)


@dataclass(frozen=True)
class Start:
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
    id: str = ""
    name: str = ""
    arguments: Mapping[str, Any] = field(default_factory=dict)
    subtask: int | None = None
    raw: Mapping[str, Any] = _raw()


@dataclass(frozen=True)
class ToolResult:
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
    delta: str = ""
    subtask: int | None = None
    raw: Mapping[str, Any] = _raw()


@dataclass(frozen=True)
class Notice:
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

    subtask: int | None = None
    raw: Mapping[str, Any] = _raw()


@dataclass(frozen=True)
class ResultUsage:
    input_tokens: int | None = None
    output_tokens: int | None = None
    estimated: bool = False  # counted by apple-code's estimator, not the model
    fixed_tokens: int | None = None  # what every request paid before the conversation


@dataclass(frozen=True)
class Result:
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

TYPES: dict[type[Any], str] = {
    Start: "start", ToolCall: "tool_call", ToolResult: "tool_result", Text: "text", Notice: "notice",
    Verify: "verify", Result: "result",
}


def event_type(event: StreamEvent) -> str:
    """The event's ``type`` as the stream names it."""
    return event.type if isinstance(event, Other) else TYPES[type(event)]


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
        return Verify(**vars(_verify(data)), subtask=subtask, raw=data)
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
