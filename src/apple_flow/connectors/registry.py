"""The connectors by ``APPLE_FLOW_CONNECTOR`` value. Adding a connector: a line here and its name in
``config.ConnectorName`` (a test checks the two agree)."""

from __future__ import annotations

from apple_flow.connectors.afm import AfmConnector, OllamaConnector
from apple_flow.connectors.claude import ClaudeConnector
from apple_flow.connectors.cli import CliConnector
from apple_flow.connectors.cline import ClineConnector
from apple_flow.connectors.codex import CodexConnector
from apple_flow.connectors.gemini import GeminiConnector
from apple_flow.connectors.kilo import KiloConnector

REGISTRY: dict[str, type[CliConnector]] = {
    "afm": AfmConnector,
    "ollama": OllamaConnector,  # afm on Ollama: a preset of its backend, URL and model
    "codex-cli": CodexConnector,
    "claude-cli": ClaudeConnector,
    "gemini-cli": GeminiConnector,
    # The names upstream Apple Flow gives these two, so its .env works here.
    "cline": ClineConnector,
    "kilo-cli": KiloConnector,
}

# The connectors that run apple-code: a failed approved task of theirs may be escalated to another connector.
APPLE_CODE_CONNECTORS = frozenset({"afm", "ollama"})
