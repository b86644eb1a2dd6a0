"""In-process stand-ins for the daemon's unit tests: a connector whose turns the test controls, a list ingress and
a recording egress. End-to-end tests use the real connector, apple-code and chat.db instead."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from apple_flow.channels.base import Attachment, Egress, InboundMessage, Ingress, SendError, Skipped, Tapback
from apple_flow.connectors.base import AgentEvent, ConnectorError, Status, TurnOutcome, TurnRequest
from apple_flow.connectors.events import parse_event
from support.turns import Script, ScriptedTurn

Answer = Callable[[str, TurnRequest], "str | TurnOutcome"]


@dataclass
class Call:
    request: TurnRequest
    started: float = field(default_factory=time.monotonic)
    finished: float = 0.0

    @property
    def prompt(self) -> str:
        return self.request.message


class FakeConnector:
    """Answers with ``answer(prompt, request)`` (default: "echo: <prompt>"; a string is the answer, or give a
    ``TurnOutcome``). A prompt containing ``SLOW`` waits until ``release`` is set (or the turn is cancelled);
    ``progress`` lines are reported as tool-call events before answering."""

    def __init__(self, answer: Answer | None = None, progress: tuple[str, ...] = (), context_window: int = 0) -> None:
        self.answer = answer or (lambda prompt, request: f"echo: {prompt}")
        self.progress = progress
        self.context_window = context_window
        self.calls: list[Call] = []
        self.release = threading.Event()
        self.cancelled: list[str | None] = []
        self.shut_down = False
        self.fail_start: str | None = None
        self._cancel_events: dict[str, threading.Event] = {}
        self._lock = threading.Lock()
        self.running = 0
        self.max_running = 0

    def ensure_started(self) -> None:
        if self.fail_start:
            raise ConnectorError(self.fail_start)

    def run(self, request: TurnRequest) -> ScriptedTurn:
        return ScriptedTurn(self._turn(request))

    def _turn(self, request: TurnRequest) -> Script:
        call = Call(request)
        cancel = threading.Event()
        with self._lock:
            self.calls.append(call)
            self._cancel_events[request.sender] = cancel
            self.running += 1
            self.max_running = max(self.max_running, self.running)
        try:
            for line in self.progress:
                yield AgentEvent(parse_event({"type": "tool_call", "name": line}), (line,))
            if "SLOW" in request.message:
                while not (self.release.is_set() or cancel.is_set()):
                    time.sleep(0.01)
                if cancel.is_set():
                    return TurnOutcome(Status.CANCELLED, detail="AFM run was cancelled.", agent="AFM")
            answer = self.answer(request.message, request)
            if isinstance(answer, TurnOutcome):
                return answer
            return TurnOutcome(Status.ANSWERED if answer else Status.EMPTY, text=answer, agent="AFM")
        finally:
            call.finished = time.monotonic()
            with self._lock:
                self.running -= 1

    def shutdown(self) -> None:
        self.shut_down = True

    def cancel(self, sender: str | None = None) -> int:
        self.cancelled.append(sender)
        with self._lock:
            events = [e for t, e in self._cancel_events.items() if sender is None or t == sender]
        for event in events:
            event.set()
        return len(events)

    def prompts(self) -> list[str]:
        return [c.prompt for c in self.calls]


class ListIngress(Ingress):
    """Messages (and skipped rows) added by the test; ends (like piped input) once ``close`` is called and all
    were read."""

    def __init__(self) -> None:
        self._messages: list[InboundMessage | Skipped] = []
        self._closed = False
        self._cond = threading.Condition()
        self.read_from: int | None = None

    def add(
        self, sender: str, text: str, rowid: int | None = None, is_from_me: bool = False,
        date: datetime | None = None, attachments: tuple[Attachment, ...] = (), tapback: Tapback | None = None,
        late: bool = False, forgeable: bool = False,
    ) -> InboundMessage:
        with self._cond:
            number = rowid if rowid is not None else (self._messages[-1].rowid + 1 if self._messages else 1)
            message = InboundMessage(number, sender, text, date or datetime.now(UTC), is_from_me=is_from_me,
                                     attachments=attachments, tapback=tapback, late=late, forgeable=forgeable)
            self._messages.append(message)
            self._cond.notify_all()
            return message

    def skip(self, rowid: int, reason: str = "echo", sender: str | None = None, forgeable: bool = False) -> Skipped:
        """A row the channel skips, as its ingress reports it."""
        with self._cond:
            skipped = Skipped(rowid, reason, sender, forgeable=forgeable)
            self._messages.append(skipped)
            self._cond.notify_all()
            return skipped

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def messages(self, after_rowid: int, stop: threading.Event) -> Iterator[InboundMessage | Skipped]:
        self.read_from = after_rowid
        index = 0
        while not stop.is_set():
            with self._cond:
                pending = [m for m in self._messages[index:]]
                if not pending:
                    if self._closed:
                        return
                    self._cond.wait(0.05)
                    continue
                index += len(pending)
            for message in pending:
                if message.rowid > after_rowid:
                    yield message

    def latest_rowid(self) -> int:
        with self._cond:
            return self._messages[-1].rowid if self._messages else 0


class RecordingEgress(Egress):
    def __init__(self) -> None:
        self.sent: list[tuple[str, str]] = []
        self.progress: list[tuple[str, str]] = []
        self.files: list[tuple[str, Path]] = []
        self.order: list[tuple[str, str, str]] = []  # everything sent, in order: (kind, recipient, text or file name)
        self.fail_for: set[str] = set()
        self.crash_for: set[str] = set()
        self._lock = threading.Lock()

    def send(self, recipient: str, text: str) -> tuple[str, ...]:
        """Records the text; its id (as a tapback names it) is ``guid-<n>``, n counting the texts sent."""
        if recipient in self.fail_for:
            raise SendError(f"Messages refused to send to {recipient}")
        if recipient in self.crash_for:
            raise RuntimeError("a bug in the channel")
        with self._lock:
            self.sent.append((recipient, text))
            self.order.append(("text", recipient, text))
            return (f"guid-{len(self.sent)}",)

    def guid_of(self, starting: str) -> str:
        """The id of the last text sent that starts with ``starting``."""
        with self._lock:
            return f"guid-{max(i for i, (_, t) in enumerate(self.sent, start=1) if t.startswith(starting))}"

    def send_progress(self, recipient: str, text: str) -> None:
        with self._lock:
            self.progress.append((recipient, text))
            self.order.append(("progress", recipient, text))

    def send_file(self, recipient: str, path: Path) -> None:
        if recipient in self.fail_for:
            raise SendError(f"Messages refused the file for {recipient}")
        with self._lock:
            self.files.append((recipient, path))
            self.order.append(("file", recipient, path.name))

    def to(self, recipient: str) -> list[str]:
        with self._lock:
            return [text for who, text in self.sent if who == recipient]
