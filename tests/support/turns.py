"""Running one turn of a connector in a test: its reply string, its outcome, or its progress lines too; and
``ScriptedTurn``, a turn a test writes as a generator."""

from __future__ import annotations

from collections.abc import Generator
from pathlib import Path
from typing import Any

from apple_flow.connectors.base import AgentEvent, Connector, TurnOutcome, TurnRequest

Script = Generator[AgentEvent, None, TurnOutcome]


class ScriptedTurn:
    """A ``TurnRun`` from a generator that yields the turn's events and returns its outcome (closing the turn
    closes the generator)."""

    def __init__(self, script: Script) -> None:
        self._script = script
        self._outcome: TurnOutcome | None = None
        self.events = self._read()

    def _read(self) -> Generator[AgentEvent, None, None]:
        self._outcome = yield from self._script

    def outcome(self) -> TurnOutcome:
        for _ in self.events:
            pass
        assert self._outcome is not None
        return self._outcome

    def close(self) -> None:
        self.events.close()
        self._script.close()


def request(message: str, workspace: str | Path | None = None, **fields: Any) -> TurnRequest:
    return TurnRequest(message, Path(workspace) if workspace is not None else None, **fields)


def outcome(connector: Connector, message: str, workspace: str | Path | None = None, **fields: Any) -> TurnOutcome:
    return connector.run(request(message, workspace, **fields)).outcome()


def reply(connector: Connector, message: str, workspace: str | Path | None = None, **fields: Any) -> str:
    """The turn's Apple-Flow reply string: the answer, or ``Error: ...`` / ``No response generated.``"""
    return outcome(connector, message, workspace, **fields).as_text()


def with_progress(
    connector: Connector, message: str, workspace: str | Path | None = None, **fields: Any
) -> tuple[str, list[str]]:
    """The reply string and the progress lines the turn's events made, in order."""
    turn = connector.run(request(message, workspace, **fields))
    progress = [line for event in turn.events for line in event.progress]
    return turn.outcome().as_text(), progress
