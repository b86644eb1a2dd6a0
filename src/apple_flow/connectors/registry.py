"""The connectors by ``APPLE_FLOW_CONNECTOR`` value. Adding a connector: a line here and its name in
``config.ConnectorName`` (a test checks the two agree)."""

from __future__ import annotations

from apple_flow.connectors.afm import AfmConnector
from apple_flow.connectors.claude import ClaudeConnector
from apple_flow.connectors.cli import CliConnector
from apple_flow.connectors.codex import CodexConnector

REGISTRY: dict[str, type[CliConnector]] = {
    "afm": AfmConnector,
    "codex-cli": CodexConnector,
    "claude-cli": ClaudeConnector,
}
