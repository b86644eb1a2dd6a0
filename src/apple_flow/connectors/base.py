"""The connector interface: how the daemon asks an agent CLI to answer one turn.

A *thread* is the conversation of one sender. Connectors keep each thread's history in a ``HistoryStore``
(in memory by default; the daemon passes its SQLite store so history survives restarts).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypedDict, runtime_checkable

ProgressCallback = Callable[[str], None]
EventCallback = Callable[[Mapping[str, Any]], None]


class TurnOptions(TypedDict, total=False):
    """Per-turn options. ``allow_tools=False`` makes the turn read-only (planning turns)."""

    allow_tools: bool
    cwd: str
    plan: bool
    on_event: EventCallback  # gets each event of the agent's JSON stream as it arrives (the daemon keeps them)


@dataclass(frozen=True)
class Exchange:
    """One past turn of a thread."""

    user: str
    assistant: str


class HistoryStore(Protocol):
    def history(self, thread_id: str, limit: int) -> list[Exchange]:
        """The newest ``limit`` exchanges, oldest first."""
        ...

    def append(self, thread_id: str, exchange: Exchange) -> None: ...

    def clear(self, thread_id: str) -> None: ...


class MemoryHistory:
    """The default ``HistoryStore``: per-thread lists kept in memory."""

    def __init__(self, keep: int = 50) -> None:
        self._keep = keep
        self._threads: dict[str, list[Exchange]] = {}

    def history(self, thread_id: str, limit: int) -> list[Exchange]:
        if limit <= 0:
            return []
        return list(self._threads.get(thread_id, [])[-limit:])

    def append(self, thread_id: str, exchange: Exchange) -> None:
        entries = self._threads.setdefault(thread_id, [])
        entries.append(exchange)
        del entries[: -self._keep]

    def clear(self, thread_id: str) -> None:
        self._threads.pop(thread_id, None)


@runtime_checkable
class Connector(Protocol):
    def ensure_started(self) -> None:
        """Checks the agent can run (binary found, model available); raises ``ConnectorError`` if not."""
        ...

    def get_or_create_thread(self, sender: str) -> str: ...

    def reset_thread(self, sender: str) -> str: ...

    def run_turn(self, thread_id: str, prompt: str, options: TurnOptions | None = None) -> str:
        """Runs one turn and returns the reply (or an ``Error: ...`` string; never raises for agent failures)."""
        ...

    def run_turn_streaming(
        self,
        thread_id: str,
        prompt: str,
        on_progress: ProgressCallback | None = None,
        options: TurnOptions | None = None,
    ) -> str: ...

    def shutdown(self) -> None: ...

    def set_soul_prompt(self, text: str) -> None: ...

    def cancel_active_processes(self, thread_id: str | None = None) -> int:
        """Kills running turns (of one thread, or all); returns how many were killed."""
        ...


class ConnectorError(RuntimeError):
    """The connector cannot work at all (e.g. binary missing); the message says how to fix it."""
