"""The connector group of Settings: defaults, and errors that name the variable and what it accepts."""

from __future__ import annotations

from pathlib import Path
from typing import get_args

import pytest

from apple_flow.config import ConnectorName, SettingsError, load_settings
from apple_flow.connectors import REGISTRY, build_connector


def test_connector_defaults_match_the_seed_plan() -> None:
    s = load_settings(env_file=None)
    assert s.connector == "afm"
    assert s.afm.command == "apple-code"
    assert s.afm.context_window == 1
    assert s.afm.max_prompt_chars == 3000
    assert s.afm.soul_max_chars == 500
    assert s.afm.timeout_seconds == 120
    assert s.afm.backend == "auto"
    assert s.afm.model is None and s.afm.base_url is None
    assert s.afm.plan_tasks is True
    assert s.turn_timeout_seconds == 300


def test_environment_and_env_file_are_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = tmp_path / ".env"
    env.write_text("APPLE_FLOW_AFM_MAX_PROMPT_CHARS=2000\nAPPLE_FLOW_CONNECTOR=claude-cli\n")
    monkeypatch.setenv("APPLE_FLOW_AFM_BACKEND", "openai")
    s = load_settings(env_file=env)
    assert (s.afm.max_prompt_chars, s.connector, s.afm.backend) == (2000, "claude-cli", "openai")


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("connector", "gemini", "APPLE_FLOW_CONNECTOR: unknown connector; accepted: afm, ollama, codex-cli, "
                                "claude-cli, gemini-cli, cline, kilo-cli (got 'gemini')"),
        ("afm_backend", "cloud", "APPLE_FLOW_AFM_BACKEND: Input should be 'auto', 'fm' or 'openai' (got 'cloud')"),
        ("afm_max_prompt_chars", "10", "APPLE_FLOW_AFM_MAX_PROMPT_CHARS: Input should be greater than or equal to 200"),
        ("afm_timeout_seconds", "0", "APPLE_FLOW_AFM_TIMEOUT_SECONDS: Input should be greater than 0"),
        ("afm_context_window", "-1", "APPLE_FLOW_AFM_CONTEXT_WINDOW: Input should be greater than or equal to 0"),
        ("afm_context_tokens", "100", "APPLE_FLOW_AFM_CONTEXT_TOKENS: Input should be greater than or equal to 256"),
        ("afm_plan_tasks", "maybe", "APPLE_FLOW_AFM_PLAN_TASKS: Input should be a valid boolean"),
        ("turn_timeout_seconds", "soon", "APPLE_FLOW_TURN_TIMEOUT_SECONDS: Input should be a valid number"),
        ("afm_plan_tasks", "maybe", "accepted: true or false"),
        ("workspace_aliases", "site=~/code/site", "APPLE_FLOW_WORKSPACE_ALIASES: not valid JSON (Expecting value: "
                                                  'line 1 column 1 (char 0)); accepted: a JSON object, e.g. '
                                                  '{"site": "~/code/site"}'),
        ("workspace_aliases", '["a"]', "APPLE_FLOW_WORKSPACE_ALIASES: Input should be a valid dictionary"),
        ("allowed_senders", '["a",', "APPLE_FLOW_ALLOWED_SENDERS: not valid JSON (Expecting value: line 1 column 6 "
                                     '(char 5)); accepted: a,b,c or a JSON list'),
    ],
)
def test_bad_values_name_the_variable_and_what_it_accepts(
    field: str, value: str, expected: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(f"APPLE_FLOW_{field.upper()}", value)
    with pytest.raises(SettingsError) as info:
        load_settings(env_file=None)
    assert expected in str(info.value)
    assert "Value error" not in str(info.value)


def test_every_accepted_connector_builds(tmp_path: Path) -> None:
    assert set(REGISTRY) == set(get_args(ConnectorName))  # the setting accepts exactly the registered connectors
    for name, cls in REGISTRY.items():
        assert type(build_connector(load_settings(env_file=None, connector=name))) is cls


def test_the_standard_profile_keeps_the_standard_limits() -> None:
    """An Apple-model or real-server setup: no profile set, so apple-code's own turns and two minutes a reply."""
    s = load_settings(env_file=None)
    assert s.profile == "standard"
    assert (s.afm.max_turns, s.afm.timeout_seconds, s.turn_timeout_seconds) == (None, 120, 300)
    assert s.afm.context_tokens is None  # the model's own window
    assert s.chat_read_only is False
    assert s.profile_line() is None


def test_the_demo_profile_sets_limits_that_fit_the_small_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("APPLE_FLOW_PROFILE", "demo")
    s = load_settings(env_file=None)
    assert (s.afm.max_turns, s.afm.timeout_seconds, s.turn_timeout_seconds) == (4, 110, 140)
    # Requests of 2,048 tokens: answers of at most 256 (an eighth), which a small model otherwise fills with rambling.
    assert s.afm.context_tokens == 2048
    assert s.afm.timeout_seconds < s.turn_timeout_seconds  # the daemon's own guard stays behind apple-code's
    line = s.profile_line()
    assert line is not None and "Demo profile" in line
    assert "at most 4 model turns" in line and "110 s per reply" in line and "2048-token requests" in line
    # Chat only reads: small models answer questions with writeFile calls on made-up paths.
    assert s.chat_read_only is True and "chat only reads files" in line
    # Tasks run without --plan and prompts carry no earlier exchange: both measured to hurt the small model.
    assert s.afm.plan_tasks is False and s.afm.context_window == 0


def test_settings_set_explicitly_win_over_the_demo_profile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = tmp_path / ".env"
    env.write_text("APPLE_FLOW_AFM_TIMEOUT_SECONDS=90\n")
    monkeypatch.setenv("APPLE_FLOW_PROFILE", "demo")
    monkeypatch.setenv("APPLE_FLOW_AFM_MAX_TURNS", "7")
    monkeypatch.setenv("APPLE_FLOW_CHAT_READ_ONLY", "false")
    s = load_settings(env_file=env)
    assert (s.afm.max_turns, s.afm.timeout_seconds, s.turn_timeout_seconds) == (7, 90, 140)
    assert s.chat_read_only is False
    assert "at most 7 model turns and 90 s per reply" in (s.profile_line() or "")


@pytest.mark.parametrize(
    ("variable", "value", "expected"),
    [
        ("APPLE_FLOW_PROFILE", "tiny", "APPLE_FLOW_PROFILE: Input should be 'standard' or 'demo' (got 'tiny')"),
        ("APPLE_FLOW_AFM_MAX_TURNS", "0", "APPLE_FLOW_AFM_MAX_TURNS: Input should be greater than or equal to 1"),
    ],
)
def test_a_bad_profile_or_turn_limit_is_named(
    variable: str, value: str, expected: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(SettingsError) as caught:
        load_settings(env_file=None)
    assert expected in str(caught.value)


def test_checking_and_escalation_default_to_a_found_check_and_no_escalation() -> None:
    s = load_settings(env_file=None)
    assert (s.verify.command, s.verify.detect, s.verify.rounds, s.escalate_connector) == (None, True, 2, None)


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"APPLE_FLOW_ESCALATE_CONNECTOR": "gpt"}, "APPLE_FLOW_ESCALATE_CONNECTOR: unknown connector; accepted: afm, "
                                                   "ollama, codex-cli, claude-cli, gemini-cli, cline, kilo-cli (got "
                                                   "'gpt')"),
        ({"APPLE_FLOW_ESCALATE_CONNECTOR": "afm"}, "APPLE_FLOW_ESCALATE_CONNECTOR: afm is the connector every turn "
                                                   "runs on already (APPLE_FLOW_CONNECTOR); name another one"),
        ({"APPLE_FLOW_CONNECTOR": "ollama", "APPLE_FLOW_ESCALATE_CONNECTOR": "ollama"}, "ollama is the connector"),
        ({"APPLE_FLOW_VERIFY_ROUNDS": "-1"}, "APPLE_FLOW_VERIFY_ROUNDS: Input should be greater than or equal to 0"),
        ({"APPLE_FLOW_VERIFY_DETECT": "perhaps"}, "APPLE_FLOW_VERIFY_DETECT: Input should be a valid boolean"),
    ],
)
def test_bad_check_and_escalation_settings_are_named(
    env: dict[str, str], expected: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError) as caught:
        load_settings(env_file=None)
    assert expected in str(caught.value)


def test_an_escalation_connector_is_read_and_empty_means_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("APPLE_FLOW_ESCALATE_CONNECTOR", "claude-cli")
    assert load_settings(env_file=None).escalate_connector == "claude-cli"
    monkeypatch.setenv("APPLE_FLOW_ESCALATE_CONNECTOR", "")
    assert load_settings(env_file=None).escalate_connector is None
    assert type(build_connector(load_settings(env_file=None), "claude-cli")).__name__ == "ClaudeConnector"
