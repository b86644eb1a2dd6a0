"""Connectors: how the daemon runs an agent for one turn. ``build_connector`` picks one from the settings."""

from __future__ import annotations

from apple_flow.config import Settings
from apple_flow.connectors.afm import AfmConnector, OllamaConnector
from apple_flow.connectors.base import (
    AgentEvent,
    Connector,
    ConnectorError,
    Exchange,
    Status,
    TurnOutcome,
    TurnRequest,
    TurnRun,
    Usage,
)
from apple_flow.connectors.claude import ClaudeConnector
from apple_flow.connectors.cline import ClineConnector
from apple_flow.connectors.codex import CodexConnector
from apple_flow.connectors.gemini import GeminiConnector
from apple_flow.connectors.kilo import KiloConnector
from apple_flow.connectors.registry import REGISTRY


def build_connector(settings: Settings, name: str | None = None) -> Connector:
    """The connector ``name`` names (default: ``settings.connector``)."""
    name = name or settings.connector
    try:
        cls = REGISTRY[name]
    except KeyError:
        raise ConnectorError(f"unknown connector {name!r}; accepted: {', '.join(REGISTRY)}") from None
    return cls(settings)


__all__ = [
    "REGISTRY",
    "AfmConnector",
    "AgentEvent",
    "ClaudeConnector",
    "ClineConnector",
    "CodexConnector",
    "Connector",
    "ConnectorError",
    "Exchange",
    "GeminiConnector",
    "KiloConnector",
    "OllamaConnector",
    "Status",
    "TurnOutcome",
    "TurnRequest",
    "TurnRun",
    "Usage",
    "build_connector",
]
