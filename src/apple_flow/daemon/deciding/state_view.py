"""What the orchestrator reads from the store, and all it may do with it: small read-only Protocols the store's
tables meet (the health checks read the events through ``EventReads`` too)."""

from __future__ import annotations

from typing import Protocol

from apple_flow.daemon.deciding.approvals import ApprovalRecords
from apple_flow.daemon.store import Event, FailedSend, Held, Run


class MessageReads(Protocol):
    """What the orchestrator reads of the store's messages."""

    def count_messages(self, state: str | None = None) -> int: ...

    def failed_sends(self, since: float, sender: str | None = None) -> tuple[int, FailedSend | None]: ...


class EventReads(Protocol):
    """What the orchestrator (and the health checks) read of the store's events."""

    def count_events(self, kind: str) -> int: ...

    def recent_events(self, limit: int = 50, kind: str | None = None) -> list[Event]: ...


class RunReads(Protocol):
    """What the orchestrator reads of the store's runs."""

    def get_run(self, run_id: str) -> Run | None: ...

    def of_sender(self, sender: str, limit: int = 5) -> list[Run]: ...

    def search(self, sender: str, query: str = "", limit: int = 5) -> list[Run]: ...

    def since(self, sender: str, since: float) -> list[Run]: ...

    def escalation_of(self, run_id: str) -> Run | None: ...

    def of_approval(self, approval_id: str) -> list[Run]: ...


class HeldReads(Protocol):
    """What the orchestrator reads of the messages held from while the Mac slept."""

    def listing(self, sender: str) -> list[Held]: ...


class ReplyFileReads(Protocol):
    """What the orchestrator reads of the files replies sent."""

    def not_sent(self, sender: str, since: float) -> list[tuple[float, str, str]]: ...


class StateView(Protocol):
    """What the orchestrator reads from the store (and all it may do with it)."""

    @property
    def messages(self) -> MessageReads: ...

    @property
    def runs(self) -> RunReads: ...

    @property
    def events(self) -> EventReads: ...

    @property
    def approvals(self) -> ApprovalRecords: ...

    @property
    def held(self) -> HeldReads: ...

    @property
    def reply_files(self) -> ReplyFileReads: ...
