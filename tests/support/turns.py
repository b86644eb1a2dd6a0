"""Running one turn of a connector in a test: its reply string, its outcome, or its progress lines too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from apple_flow.connectors.base import AgentEvent, Connector, TurnOutcome, TurnRequest, outcome_of


def request(message: str, workspace: str | Path | None = None, **fields: Any) -> TurnRequest:
    return TurnRequest(message, Path(workspace) if workspace is not None else None, **fields)


def outcome(connector: Connector, message: str, workspace: str | Path | None = None, **fields: Any) -> TurnOutcome:
    return outcome_of(connector.run(request(message, workspace, **fields)))


def reply(connector: Connector, message: str, workspace: str | Path | None = None, **fields: Any) -> str:
    """The turn's Apple-Flow reply string: the answer, or ``Error: ...`` / ``No response generated.``"""
    return outcome(connector, message, workspace, **fields).as_text()


def with_progress(
    connector: Connector, message: str, workspace: str | Path | None = None, **fields: Any
) -> tuple[str, list[str]]:
    """The reply string and the progress lines the turn's events made, in order."""
    progress: list[str] = []
    for item in connector.run(request(message, workspace, **fields)):
        if isinstance(item, AgentEvent):
            progress.extend(item.progress)
        else:
            return item.as_text(), progress
    raise AssertionError("the turn ended without an outcome")
