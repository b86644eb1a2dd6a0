"""The connector interface: how the daemon asks an agent CLI to answer one turn.

A connector is stateless. It gets one ``TurnRequest`` (the message, the earlier exchanges the daemon chose to
include, the workspace, read-only or plan) and starts the agent once: ``run`` returns the turn (``TurnRun``), whose
``events`` the caller reads as they happen (each with the progress lines it makes, if any), and whose ``outcome()``
then says what happened. It keeps no conversation: the daemon's store does.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Protocol, runtime_checkable

from apple_flow.connectors.stream_events import StreamEvent


@dataclass(frozen=True)
class Exchange:
    """One past turn of a conversation: what the user asked and what the agent answered."""

    user: str
    assistant: str


@dataclass(frozen=True)
class TurnRequest:
    message: str
    #: The workspace the agent works in; None: the default workspace of the settings.
    workspace: Path | None = None
    #: Earlier exchanges of the conversation to include, oldest first (the connector fits them to its budget).
    exchanges: tuple[Exchange, ...] = ()
    read_only: bool = False  # planning turns: the agent may read, not change
    plan: bool = False  # approved tasks: plan-and-execute where the agent has it
    #: A task's turns (its plan and its approved work): a connector may run them on a model of their own.
    task: bool = False
    sender: str = ""  # whose turn this is: ``cancel(sender)`` stops it
    #: What files came with the message and where they are; kept whole after the message when the prompt is fitted.
    files_note: str = ""
    #: The command that says whether the work is done (approved tasks): the agent must make it pass.
    verify: str | None = None


class Status(StrEnum):
    """What happened to a turn. apple-code's ``subtype`` and exit code map to it one to one."""

    ANSWERED = "answered"
    EMPTY = "empty"  # the agent finished without an answer
    TIMED_OUT = "timed_out"
    NO_MODEL = "no_model"
    BINARY_MISSING = "binary_missing"
    CANCELLED = "cancelled"
    CHECK_FAILED = "check_failed"  # the agent answered, but the check (``TurnRequest.verify``) still fails
    FAILED = "failed"


@dataclass(frozen=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    estimated: bool = False  # counted by apple-code's estimator rather than by the model


@dataclass(frozen=True)
class CheckReport:
    """What became of a turn's check (apple-code's ``verify`` object): the command, whether it passed at the end,
    the repair rounds it took, and the end of its last output."""

    command: str
    passed: bool
    rounds: int = 0  # how many times a failure went back to the model
    output_tail: str = ""
    runs: int | None = None  # how many times it ran (0: never: the run ended before a final answer)
    exit_code: int | None = None  # the last run's, when it exited

    @property
    def ran(self) -> bool:
        return self.runs is None or self.runs > 0

    def failing_line(self) -> str:
        """The line of the output that best says what failed: a test runner's own failure line (pytest's
        ``FAILED path::test - why``, unittest's ``FAIL: test``, ``--- FAIL:`` of go, ``test x ... FAILED`` of
        cargo), else an error or assertion line, else any line that mentions a failure, else the last line; the
        first of its kind. Empty without output."""
        lines = [line.strip() for line in self.output_tail.splitlines() if line.strip()]
        lines = [line for line in lines if not _DECORATION.match(line)]
        for pattern in _FAILING:
            for line in lines:
                if pattern.search(line):
                    return line
        return lines[-1] if lines else ""


# What a failing line looks like, most telling first.
_FAILING = (
    re.compile(r"^(FAILED\b|FAIL:|--- FAIL:|ERROR:|ERROR\b)|\.\.\. FAILED$|^not ok\b"),
    re.compile(r"^E\s|\b\w*(Error|Exception)\b:|\berror(\[\w+\])?:|panicked|assert", re.IGNORECASE),
    re.compile(r"\bfail(ed|ure|ures|s)?\b", re.IGNORECASE),
)
# Lines that only frame the output: rules, section titles, how the check ended ("exit code 1").
_DECORATION = re.compile(r"^(={3,}|_{3,}|-{3,}(?! FAIL)|exit code -?\d+$|\[\.\.\. )")


@dataclass(frozen=True)
class TurnOutcome:
    """How one turn ended, with what the agent reported about it."""

    status: Status
    #: The answer; for a turn stopped early, what the agent had said by then.
    text: str = ""
    #: One line on why there is no answer and what to do (empty when answered). For NO_MODEL: the reason and the
    #: fix; otherwise the line of the Apple-Flow reply string after ``Error:``.
    detail: str = ""
    agent: str = ""  # the agent's display name, e.g. "apple-code"
    exit_code: int | None = None
    subtype: str = ""  # the ``result`` event's subtype, as reported
    limit_seconds: float | None = None  # for TIMED_OUT: the limit it ran into
    files_changed: tuple[str, ...] = ()
    commands_run: int = 0
    usage: Usage | None = None
    num_turns: int = 0
    duration_ms: int = 0
    backend: str = ""  # the backend the agent reported it ran on (apple-code: "fm" or "openai")
    model: str = ""  # the model the agent reported
    check: CheckReport | None = None  # the check the agent ran (apple-code --verify), when it ran one

    @property
    def answered(self) -> bool:
        return self.status is Status.ANSWERED

    def as_text(self) -> str:
        """The reply string of Apple Flow's connectors: the answer, ``No response generated.``, or ``Error: ...``."""
        if self.status is Status.ANSWERED:
            return self.text
        if self.status is Status.EMPTY:
            return NO_RESPONSE
        if self.status is Status.NO_MODEL:
            code = "killed" if self.exit_code is None else str(self.exit_code)
            return f"Error: {self.agent} execution failed (exit code {code}). No model available: {self.detail}"
        if self.status in (Status.TIMED_OUT, Status.CHECK_FAILED) and self.text:
            return f"Error: {self.detail}\nPartial answer: {self.text}"
        return f"Error: {self.detail}"


NO_RESPONSE = "No response generated."


@dataclass(frozen=True)
class AgentEvent:
    """One event of the agent's output stream as it happened (parsed once: ``stream_events``), and the short
    progress lines its tool calls make for the chat ("reading src/app.py"; claude can put several calls in one
    event)."""

    event: StreamEvent
    progress: tuple[str, ...] = ()


class TurnRun(Protocol):
    """One turn of an agent, started (``Connector.run``). The caller reads its ``events`` as they come (the agent's
    output is read as they are: nothing is pushed to the caller), then asks ``outcome()``, which reads what events
    are left and says how the turn ended; or it gives up on the turn with ``close()``, which stops it."""

    @property
    def events(self) -> Iterator[AgentEvent]: ...

    def outcome(self) -> TurnOutcome:
        """How the turn ended. Never raises for agent failures: they are outcomes."""
        ...

    def close(self) -> None: ...


class EndedTurn:
    """A turn that ended before its agent started (its workspace missing, its command not found): no events, and
    its outcome."""

    def __init__(self, outcome: TurnOutcome) -> None:
        self.events: Iterator[AgentEvent] = iter(())
        self._outcome = outcome

    def outcome(self) -> TurnOutcome:
        return self._outcome

    def close(self) -> None:
        pass


@runtime_checkable
class Connector(Protocol):
    #: How many earlier exchanges of the conversation this agent wants in each request (0: none).
    context_window: int

    def ensure_started(self) -> None:
        """Checks the agent can run (binary found, model available); raises ``ConnectorError`` if not."""
        ...

    def run(self, request: TurnRequest) -> TurnRun:
        """Starts one turn: its ``AgentEvent``s are read from the ``TurnRun`` returned as they come, then its
        ``TurnOutcome``. Never raises for agent failures: they are outcomes."""
        ...

    def cancel(self, sender: str | None = None) -> int:
        """Stops the running turns of ``sender`` (all when None); returns how many were stopped."""
        ...

    def shutdown(self) -> None: ...


class ConnectorError(RuntimeError):
    """The connector cannot work at all; the message says how to fix it, ``status`` what kind of trouble it is
    (``BINARY_MISSING``, ``NO_MODEL``, else ``FAILED``), so nobody has to read it out of the message."""

    def __init__(self, message: str, status: Status = Status.FAILED) -> None:
        super().__init__(message)
        self.status = status
