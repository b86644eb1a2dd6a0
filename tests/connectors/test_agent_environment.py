"""Every connector's process gets an allowlisted environment: what any process needs, its own variables, the names
the owner adds, the run marker; never an APPLE_FLOW_* value, nor another agent's key (a prompt-injected agent could
print them)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from apple_flow.config import Settings, SettingsError, load_settings
from apple_flow.connectors import build_connector
from apple_flow.connectors.base import TurnRequest
from apple_flow.connectors.environment import BASE_VARIABLES, RUN_MARKER, agent_environment
from apple_flow.connectors.registry import REGISTRY

Runs = Callable[[], list[dict[str, Any]]]
FAKES = {"afm": "apple-code", "ollama": "apple-code", "codex-cli": "codex", "claude-cli": "claude",
         "gemini-cli": "gemini", "cline": "cline", "kilo-cli": "kilo"}
KEYS = {"ANTHROPIC_API_KEY": "claude-cli", "OPENAI_API_KEY": "codex-cli", "GEMINI_API_KEY": "gemini-cli",
        "APPLE_CODE_API_KEY": "afm"}


@pytest.fixture
def secrets_around(monkeypatch: pytest.MonkeyPatch) -> None:
    """The daemon's environment as launchd gives it: every .env value, the web token among them, and the keys of
    every agent the owner has."""
    for name, value in {
        "APPLE_FLOW_WEB_TOKEN": "web-token-must-not-leak-0123456789abcdef",
        "APPLE_FLOW_ALLOWED_SENDERS": "+15551234567",
        "apple_flow_lower_case": "also-withheld", "AWS_SECRET_ACCESS_KEY": "aws-must-not-leak",
        "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8", "HTTPS_PROXY": "http://proxy:3128",
        RUN_MARKER: "run-token", **{key: f"{key}-value" for key in KEYS},
    }.items():
        monkeypatch.setenv(name, value)


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_each_connector_gets_only_its_allowlist(
    name: str, secrets_around: None, connector_settings: Callable[..., Settings], fake_cli_bin: Path,
    record: Runs,
) -> None:
    command = {"codex-cli": "codex_command", "claude-cli": "claude_command", "gemini-cli": "gemini_command",
               "cline": "cline_command", "kilo-cli": "kilo_command"}
    overrides = {command[name]: str(fake_cli_bin / FAKES[name])} if name in command else {}
    connector = build_connector(connector_settings(connector=name, **overrides))
    connector.ensure_started()
    connector.run(TurnRequest("hello")).outcome()
    runs = record()
    assert len(runs) >= 2  # --version (and --check), then the turn: each gets the same environment
    for run in runs:
        env: dict[str, str] = run["env"]
        assert not [key for key in env if key.upper().startswith("APPLE_FLOW_")]
        assert "web-token-must-not-leak-0123456789abcdef" not in repr(env)
        assert "AWS_SECRET_ACCESS_KEY" not in env and "HTTPS_PROXY" not in env
        assert env["LC_ALL"] == "C.UTF-8" and env["LANG"] == "C.UTF-8" and env[RUN_MARKER] == "run-token"
        assert "PATH" in env and "HOME" in env
        # Its own key only: apple-code's for afm and ollama (apple-code on Ollama).
        own = "afm" if FAKES[name] == "apple-code" else name
        assert {key for key in KEYS if key in env} == {key for key, owner in KEYS.items() if owner == own}
        extra = set(env) - {*BASE_VARIABLES, RUN_MARKER, *REGISTRY[name].environment_variables}
        assert {key for key in extra if not key.startswith(("LC_", "FAKE_"))} == set()


def test_the_owner_can_add_variables(
    secrets_around: None, connector_settings: Callable[..., Settings], fake_cli_bin: Path, record: Runs,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("APPLE_FLOW_AGENT_ENVIRONMENT", "HTTPS_PROXY,FAKE_CLI_RECORD")
    connector = build_connector(connector_settings(connector="claude-cli", claude_command=str(fake_cli_bin / "claude")))
    connector.run(TurnRequest("hello")).outcome()
    (run,) = record()
    assert run["env"]["HTTPS_PROXY"] == "http://proxy:3128"


@pytest.mark.parametrize("value, said", [
    ("APPLE_FLOW_WEB_TOKEN", "never reach the agent"),
    ("apple_flow_web_token", "never reach the agent"),
    ("NOT-A-NAME", "not a variable name"),
])
def test_agent_environment_setting_refuses_bad_names(value: str, said: str) -> None:
    with pytest.raises(SettingsError, match="APPLE_FLOW_AGENT_ENVIRONMENT") as caught:
        load_settings(env_file=None, agent_environment=value)
    assert said in str(caught.value)


def test_a_named_daemon_setting_is_withheld_anyway() -> None:
    source = {"PATH": "/bin", "APPLE_FLOW_WEB_TOKEN": "t", "LC_CTYPE": "UTF-8", "OTHER": "x"}
    assert agent_environment(source, ["APPLE_FLOW_WEB_TOKEN", "Apple_Flow_X"]) == {"PATH": "/bin", "LC_CTYPE": "UTF-8"}
