"""Settings in sections: each connector's, channel's and part's options in a model of its own, while every
``APPLE_FLOW_*`` variable keeps its name and still reaches its setting, from the environment, from a .env file, as
a keyword argument, and in `apple-flow config`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from apple_flow.cli import app
from apple_flow.config import (
    SECTIONS,
    Settings,
    SettingsError,
    load_settings,
    section_variables,
    setting_variables,
)
from apple_flow.sections import Section

TOKEN = "t" * 40

# Values no default has, for the settings a generic rule cannot make up (a choice, a name checked, a pair).
CHOSEN: dict[str, tuple[str, Any]] = {  # variable -> (as written in .env, as `apple-flow config --json` shows it)
    "connector": ("claude-cli", "claude-cli"),
    "profile": ("demo", "demo"),  # its limits below are all set explicitly, so they keep the values given here
    "escalate_connector": ("codex-cli", "codex-cli"),
    "channel": ("console", "console"),
    "afm_backend": ("openai", "openai"),
    "afm_max_turns": ("6", 6),
    "afm_context_tokens": ("1024", 1024),
    "afm_model": ("m-afm", "m-afm"),
    "afm_base_url": ("http://127.0.0.1:1/v1", "http://127.0.0.1:1/v1"),
    "allowed_senders": ("+15551234567,ana@example.com", ["+15551234567", "ana@example.com"]),
    "allowed_workspaces": ("/tmp/a,/tmp/b", ["/tmp/a", "/tmp/b"]),
    "workspace_aliases": ('{"Site": "/tmp/site"}', {"site": "/tmp/site"}),
    "agent_environment": ("HTTPS_PROXY,NO_PROXY", ["HTTPS_PROXY", "NO_PROXY"]),
    "default_region": ("GB", "GB"),
    "local_model": ("smollm2-135m", "smollm2-135m"),
    "local_task_model": ("qwen2.5-coder-0.5b", "qwen2.5-coder-0.5b"),
    "afm_task_model": ("m-task", "m-task"),
    "afm_task_base_url": ("http://127.0.0.1:2/v1", "http://127.0.0.1:2/v1"),
    "local_model_host": ("127.0.0.2", "127.0.0.2"),
    "web_host": ("localhost", "localhost"),
    "web_token": (TOKEN, "********"),
    "web_base_url": ("https://mac.example/", "https://mac.example"),
    "web_local_name": ("flow.localhost", "flow.localhost"),
    "verify_command": ("make check", "make check"),
}


def not_the_default(variable: str, default: Any) -> tuple[str, Any]:
    """A value for ``variable`` other than its ``default`` (a JSON value, as `config --json` shows it)."""
    if variable in CHOSEN:
        return CHOSEN[variable]
    if isinstance(default, bool):
        return str(not default).lower(), not default
    if isinstance(default, (int, float)):
        return str(default + 3), default + 3
    if default is None:  # the rest of the unset ones: a model name, a path, a command
        value = f"/tmp/{variable}" if variable.endswith(("_file", "_config")) else f"{variable}-x"
        return value, value
    if isinstance(default, str) and default.startswith(("/", "~")):
        return f"/tmp/{variable}", f"/tmp/{variable}"
    return f"{default}-x", f"{default}-x"


def every_variable_changed() -> dict[str, tuple[str, Any]]:
    defaults = load_settings(env_file=None).variables()
    return {variable: not_the_default(variable, defaults[variable]) for variable in setting_variables()}


@pytest.fixture
def only_the_file(monkeypatch: pytest.MonkeyPatch) -> None:
    """None of the variables the suite sets for every test (they would win over the .env file)."""
    for variable in setting_variables():
        monkeypatch.delenv(f"APPLE_FLOW_{variable.upper()}", raising=False)


def shown(settings: Settings) -> dict[str, Any]:
    values = settings.variables()
    values["web_token"] = "********" if values["web_token"] == TOKEN else values["web_token"]
    return values


def test_the_top_level_has_at_most_30_fields() -> None:
    assert len(Settings.model_fields) <= 30, sorted(Settings.model_fields)


def test_connectors_and_channels_have_sections_that_keep_their_variables() -> None:
    settings = load_settings(env_file=None, codex_command="/opt/codex", afm_backend="fm", send_retries=5,
                             local_model="smollm2-135m", default_workspace="/tmp/w", log_dir="/tmp/logs")
    assert (settings.codex.command, settings.afm.backend, settings.imessage.send_retries) == ("/opt/codex", "fm", 5)
    assert (settings.localmodel.name, settings.workspaces.default) == ("smollm2-135m", Path("/tmp/w"))
    assert settings.service.log_dir == Path("/tmp/logs")
    for name in ("afm", "ollama", "codex", "claude", "gemini", "cline", "kilo", "imessage", "web"):
        assert issubclass(SECTIONS[name], Section)
    # The registry's connectors each have a section of the same name as the one they read.
    from apple_flow.connectors.registry import REGISTRY

    assert {connector.section for connector in REGISTRY.values()} <= set(SECTIONS)


def test_no_two_settings_share_a_variable() -> None:
    variables = setting_variables()
    assert len(variables) == len(set(variables))
    assert not set(section_variables()) & set(Settings.model_fields)


def test_every_variable_reaches_its_setting_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    changed = every_variable_changed()
    for variable, (written, _) in changed.items():
        monkeypatch.setenv(f"APPLE_FLOW_{variable.upper()}", written)
    assert shown(load_settings(env_file=None)) == {variable: value for variable, (_, value) in changed.items()}


@pytest.mark.usefixtures("only_the_file")
def test_every_variable_reaches_its_setting_from_a_env_file(tmp_path: Path) -> None:
    changed = every_variable_changed()
    env = tmp_path / ".env"
    env.write_text("".join(f"APPLE_FLOW_{variable.upper()}={written}\n" for variable, (written, _) in changed.items()))
    assert shown(load_settings(env_file=env)) == {variable: value for variable, (_, value) in changed.items()}


@pytest.mark.usefixtures("only_the_file")
def test_config_shows_every_variable_as_set_with_secrets_masked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    changed = every_variable_changed()
    (tmp_path / ".env").write_text(
        "".join(f"APPLE_FLOW_{variable.upper()}={written}\n" for variable, (written, _) in changed.items())
    )
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["config", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {variable: value for variable, (_, value) in changed.items()}
    assert TOKEN not in result.stdout
    table = CliRunner().invoke(app, ["config"])
    assert "APPLE_FLOW_SEND_RETRIES" in table.stdout and "APPLE_FLOW_AFM_COMMAND" in table.stdout


def test_the_environment_wins_over_env_for_a_section_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = tmp_path / ".env"
    env.write_text("APPLE_FLOW_AFM_COMMAND=/from/file\nAPPLE_FLOW_SEND_RETRIES=4\n")
    monkeypatch.setenv("apple_flow_afm_command", "/from/environment")  # case does not matter
    settings = load_settings(env_file=env)
    assert (settings.afm.command, settings.imessage.send_retries) == ("/from/environment", 4)


def test_a_section_is_not_read_from_a_variable_of_its_own_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("APPLE_FLOW_AFM", '{"command": "/elsewhere"}')
    monkeypatch.setenv("APPLE_FLOW_WEB", "not json")
    settings = load_settings(env_file=None)
    assert (settings.afm.command, settings.web.port) == ("apple-code", 8787)


def test_an_invalid_option_is_named_by_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("APPLE_FLOW_AFM_MAX_TURNS", "0")
    monkeypatch.setenv("APPLE_FLOW_WORKSPACE_ALIASES", "{not json")
    monkeypatch.setenv("APPLE_FLOW_LOCAL_MODEL", "no-such-model")
    monkeypatch.setenv("APPLE_FLOW_SEND_RETRIES", "many")
    with pytest.raises(SettingsError) as error:
        load_settings(env_file=None)
    text = str(error.value)
    for variable in ("AFM_MAX_TURNS", "WORKSPACE_ALIASES", "LOCAL_MODEL", "SEND_RETRIES"):
        assert f"APPLE_FLOW_{variable}: " in text


def test_a_section_given_whole_wins_over_its_variables() -> None:
    settings = Settings(_env_file=None, afm=SECTIONS["afm"](command="/whole"), afm_command="/flat")  # type: ignore[call-arg]
    assert settings.afm.command == "/whole"
