"""Codex, Claude, Gemini, Cline and Kilo CLI connectors against fake binaries that record argv, cwd and stdin
(tests/support/fake_cli.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from apple_flow.config import Settings
from apple_flow.connectors import (
    ClaudeConnector,
    ClineConnector,
    CodexConnector,
    Connector,
    ConnectorError,
    Exchange,
    GeminiConnector,
    KiloConnector,
    Status,
    Usage,
    build_connector,
)
from support.turns import outcome, reply, with_progress

Runs = Callable[[], list[dict[str, Any]]]
MakeSettings = Callable[..., Settings]


@pytest.fixture
def cli_settings(connector_settings: MakeSettings, fake_cli_bin: Path) -> Callable[..., Settings]:
    def make(**overrides: Any) -> Settings:
        values = {
            "codex_command": str(fake_cli_bin / "codex"), "claude_command": str(fake_cli_bin / "claude"),
            "gemini_command": str(fake_cli_bin / "gemini"), "cline_command": str(fake_cli_bin / "cline"),
            "kilo_command": str(fake_cli_bin / "kilo"),
        }
        return connector_settings(**(values | overrides))

    return make


# --- codex ---------------------------------------------------------------------------------------------------


def test_codex_argv_cwd_and_stdin(cli_settings: Callable[..., Settings], workspace: Path, record: Runs) -> None:
    connector = build_connector(cli_settings(connector="codex-cli", codex_model="gpt-5-codex"))
    assert isinstance(connector, CodexConnector)
    assert isinstance(connector, Connector)
    assert reply(connector, "fix the test") == "codex answer"
    (run,) = record()
    assert run["argv"] == [
        "exec", "--skip-git-repo-check", "--sandbox", "workspace-write", "--cd", str(workspace),
        "--model", "gpt-5-codex", "-",
    ]
    assert run["cwd"] == str(workspace)
    assert run["stdin"] == "fix the test"


def test_codex_read_only_turn_uses_the_read_only_sandbox(cli_settings: Callable[..., Settings], record: Runs) -> None:
    reply(CodexConnector(cli_settings()), "plan", read_only=True)
    argv = record()[0]["argv"]
    assert argv[argv.index("--sandbox") + 1] == "read-only"


def test_codex_soul_prompt_and_history_lead_the_prompt(cli_settings: Callable[..., Settings], record: Runs) -> None:
    connector = CodexConnector(cli_settings(soul_prompt="Be brief.", codex_context_window=3))
    assert connector.context_window == 3
    reply(connector, "second", exchanges=(Exchange("first", "codex answer"),))
    second = record()[0]["stdin"]
    assert second.startswith("Be brief.\n\n")
    assert "User: first\nAssistant: codex answer" in second
    assert second.endswith("second")


def test_codex_failure_and_empty_answer(
    cli_settings: Callable[..., Settings], monkeypatch: pytest.MonkeyPatch
) -> None:
    connector = CodexConnector(cli_settings())
    monkeypatch.setenv("FAKE_CLI_MODE", "fail")
    failed = outcome(connector, "x")
    assert (failed.status, failed.exit_code) == (Status.FAILED, 2)
    assert failed.as_text() == "Error: Codex execution failed (exit code 2). error: not logged in"
    monkeypatch.setenv("FAKE_CLI_MODE", "empty")
    assert outcome(connector, "x").status is Status.EMPTY
    assert reply(connector, "x") == "No response generated."


def test_codex_missing_binary(cli_settings: Callable[..., Settings], tmp_path: Path) -> None:
    missing = str(tmp_path / "codex-missing")
    connector = CodexConnector(cli_settings(codex_command=missing))
    assert outcome(connector, "x").status is Status.BINARY_MISSING
    assert reply(connector, "x") == (
        f"Error: Codex CLI not found at '{missing}'. Check apple_flow_codex_command setting."
    )
    with pytest.raises(ConnectorError, match="APPLE_FLOW_CODEX_COMMAND"):
        connector.ensure_started()


def test_codex_ensure_started_runs_version(
    cli_settings: Callable[..., Settings], record: Runs, monkeypatch: pytest.MonkeyPatch
) -> None:
    connector = CodexConnector(cli_settings())
    connector.ensure_started()
    assert [run["argv"] for run in record()] == [["--version"]]
    monkeypatch.setenv("FAKE_CLI_MODE", "broken-version")
    with pytest.raises(ConnectorError, match=r"--version' failed \(exit code 1\): dyld: Library not loaded.*"
                       r"APPLE_FLOW_CODEX_COMMAND"):
        connector.ensure_started()


# --- claude --------------------------------------------------------------------------------------------------


def test_claude_argv_cwd_stdin_and_progress(
    cli_settings: Callable[..., Settings], workspace: Path, record: Runs
) -> None:
    connector = build_connector(cli_settings(connector="claude-cli", claude_model="sonnet", soul_prompt="Be kind."))
    assert isinstance(connector, ClaudeConnector)
    text, progress = with_progress(connector, "fix the test")
    assert text == "claude answer"
    (run,) = record()
    assert run["argv"] == [
        "-p", "--output-format", "stream-json", "--verbose", "--permission-mode", "acceptEdits",
        "--model", "sonnet", "--append-system-prompt", "Be kind.",
    ]
    assert run["cwd"] == str(workspace)
    assert run["stdin"] == "fix the test"
    assert progress == ["reading src/app.py", "running: pytest -q"]


def test_claude_read_only_turn_uses_plan_mode(cli_settings: Callable[..., Settings], record: Runs) -> None:
    reply(ClaudeConnector(cli_settings()), "plan", read_only=True)
    argv = record()[0]["argv"]
    assert argv[argv.index("--permission-mode") + 1] == "plan"


def test_claude_is_error_with_exit_zero_is_a_failure(
    cli_settings: Callable[..., Settings], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_CLI_MODE", "error-result")
    result = outcome(ClaudeConnector(cli_settings()), "x")
    assert (result.status, result.subtype, result.num_turns) == (Status.FAILED, "error_max_turns", 2)
    assert result.as_text() == "Error: Claude execution failed (exit code 0). error_max_turns: stopped after 10 turns"


def test_claude_failure_exit(cli_settings: Callable[..., Settings], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_CLI_MODE", "fail")
    text = reply(ClaudeConnector(cli_settings()), "x")
    assert text == "Error: Claude execution failed (exit code 2). error: not logged in"


def test_claude_empty_answer(cli_settings: Callable[..., Settings], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_CLI_MODE", "empty")
    result = outcome(ClaudeConnector(cli_settings()), "x")
    assert result.status is Status.EMPTY
    assert result.as_text() == "No response generated."


# --- gemini --------------------------------------------------------------------------------------------------


def test_gemini_argv_cwd_prompt_and_progress(
    cli_settings: Callable[..., Settings], workspace: Path, record: Runs
) -> None:
    connector = build_connector(cli_settings(connector="gemini-cli", gemini_model="flash", soul_prompt="Be kind."))
    assert isinstance(connector, GeminiConnector)
    assert isinstance(connector, Connector)
    text, progress = with_progress(connector, "-v is not a flag here: fix the test")
    assert text == "gemini answer"  # the text after the last tool call; "Let me look." came before
    (run,) = record()
    assert run["argv"] == [
        "--output-format", "stream-json", "--approval-mode", "auto_edit", "--model", "flash",
        "--prompt=Be kind.\n\n-v is not a flag here: fix the test",
    ]
    assert run["cwd"] == str(workspace)
    assert run["stdin"] == ""  # stdin is closed at once: Gemini CLI would read it as extra context
    assert progress == ["reading src/app.py", "writing src/app.py", "running: pytest -q"]


def test_gemini_outcome_carries_what_the_stream_reports(cli_settings: Callable[..., Settings]) -> None:
    result = outcome(GeminiConnector(cli_settings()), "fix it")
    assert (result.status, result.agent, result.exit_code, result.model) == (
        Status.ANSWERED, "Gemini", 0, "gemini-2.5-flash"
    )
    assert result.usage == Usage(input_tokens=1200, output_tokens=34, estimated=False)
    assert (result.duration_ms, result.files_changed, result.commands_run) == (4321, ("src/app.py",), 1)


def test_gemini_read_only_turn_uses_plan_mode_and_history_leads_the_prompt(
    cli_settings: Callable[..., Settings], record: Runs
) -> None:
    connector = GeminiConnector(cli_settings(gemini_context_window=2))
    assert connector.context_window == 2
    reply(connector, "plan it", read_only=True, exchanges=(Exchange("first", "gemini answer"),))
    argv = record()[0]["argv"]
    assert argv[argv.index("--approval-mode") + 1] == "plan"
    assert "--model" not in argv  # unset: Gemini CLI's own default
    prompt = argv[-1].removeprefix("--prompt=")
    assert "User: first\nAssistant: gemini answer" in prompt and prompt.endswith("plan it")


def test_gemini_prompt_is_capped_below_the_argument_limit(
    cli_settings: Callable[..., Settings], record: Runs
) -> None:
    reply(GeminiConnector(cli_settings()), "ü" * 200_000)
    prompt = record()[0]["argv"][-1]
    assert len(prompt.encode()) < 128 * 1024  # Linux's MAX_ARG_STRLEN: a longer argument could not be spawned


def test_gemini_sign_in_failure_says_what_to_do(
    cli_settings: Callable[..., Settings], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_CLI_MODE", "auth")
    result = outcome(GeminiConnector(cli_settings()), "x")
    assert (result.status, result.exit_code) == (Status.FAILED, 41)
    assert result.as_text() == (
        "Error: Gemini execution failed (exit code 41). Please set an Auth method. Gemini CLI is not signed in: run "
        "`gemini` once in a terminal, or give the daemon GEMINI_API_KEY."
    )


def test_gemini_error_result_with_exit_zero_is_a_failure(
    cli_settings: Callable[..., Settings], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_CLI_MODE", "error-result")
    result = outcome(GeminiConnector(cli_settings()), "x")
    assert (result.status, result.exit_code) == (Status.FAILED, 0)
    assert result.as_text() == "Error: Gemini execution failed (exit code 0). Quota exceeded for gemini-2.5-flash"


def test_gemini_failure_empty_answer_and_missing_binary(
    cli_settings: Callable[..., Settings], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    connector = GeminiConnector(cli_settings())
    monkeypatch.setenv("FAKE_CLI_MODE", "fail")
    assert reply(connector, "x") == "Error: Gemini execution failed (exit code 2). error: not logged in"
    monkeypatch.setenv("FAKE_CLI_MODE", "empty")
    assert outcome(connector, "x").status is Status.EMPTY
    missing = str(tmp_path / "gemini-missing")
    gone = GeminiConnector(cli_settings(gemini_command=missing))
    assert reply(gone, "x") == f"Error: Gemini CLI not found at '{missing}'. Check apple_flow_gemini_command setting."
    with pytest.raises(ConnectorError, match="APPLE_FLOW_GEMINI_COMMAND"):
        gone.ensure_started()


# --- the check of an approved task ------------------------------------------------------------------


@pytest.mark.parametrize("name", ["codex-cli", "claude-cli", "gemini-cli"])
def test_a_cli_without_a_check_option_is_asked_in_the_prompt_to_run_the_check(
    cli_settings: Callable[..., Settings], record: Runs, name: str
) -> None:
    connector = build_connector(cli_settings(connector=name))
    reply(connector, "fix the parser", verify="make test")
    reply(connector, "just chat")
    checked, plain = record()
    sent = checked["stdin"] or " ".join(checked["argv"])  # gemini takes the prompt as an argument
    assert "fix the parser\n\nWhen the work is done, run `make test` in the workspace and fix what it reports until " \
           "it passes." in sent
    assert "make test" not in (plain["stdin"] or " ".join(plain["argv"]))


# --- cline ---------------------------------------------------------------------------------------------------


def test_cline_argv_cwd_prompt_and_progress(
    cli_settings: Callable[..., Settings], workspace: Path, record: Runs
) -> None:
    connector = build_connector(
        cli_settings(connector="cline", cline_model="claude-sonnet-4-5", soul_prompt="Be kind.")
    )
    assert isinstance(connector, ClineConnector)
    assert isinstance(connector, Connector)
    text, progress = with_progress(connector, "fix the test")
    assert text == "cline answer"  # the completion_result; "Let me look." was said on the way
    (run,) = record()
    assert run["argv"] == [
        "-y", "--json", "--act", "-m", "claude-sonnet-4-5", "-c", str(workspace), "Be kind.\n\nfix the test",
    ]
    assert run["cwd"] == str(workspace)
    assert run["stdin"] == ""  # piped stdin would be prepended to the task
    assert progress == ["reading src/app.py", "editing src/app.py", "running: pytest -q"]  # the partial: once


def test_cline_outcome_carries_what_the_stream_reports(cli_settings: Callable[..., Settings]) -> None:
    result = outcome(ClineConnector(cli_settings()), "fix it")
    assert (result.status, result.agent, result.exit_code) == (Status.ANSWERED, "Cline", 0)
    assert (result.files_changed, result.commands_run) == (("src/app.py",), 1)


def test_cline_read_only_turn_plans_and_history_leads_the_prompt(
    cli_settings: Callable[..., Settings], record: Runs
) -> None:
    connector = ClineConnector(cli_settings(cline_context_window=2))
    assert connector.context_window == 2
    reply(connector, "plan it", read_only=True, exchanges=(Exchange("first", "cline answer"),))
    argv = record()[0]["argv"]
    assert argv[:3] == ["-y", "--json", "--plan"] and "--act" not in argv
    assert "-m" not in argv  # unset: the model `cline auth` chose
    assert "User: first\nAssistant: cline answer" in argv[-1] and argv[-1].endswith("plan it")


def test_cline_task_starting_with_a_dash_is_not_taken_for_an_option(
    cli_settings: Callable[..., Settings], record: Runs
) -> None:
    reply(ClineConnector(cli_settings()), "-v is not a flag here")
    assert record()[0]["argv"][-1] == " -v is not a flag here"


def test_cline_prompt_is_capped_below_the_argument_limit(cli_settings: Callable[..., Settings], record: Runs) -> None:
    reply(ClineConnector(cli_settings(soul_prompt="Be kind.")), "ü" * 200_000)
    assert len(record()[0]["argv"][-1].encode()) < 128 * 1024  # Linux's MAX_ARG_STRLEN


def test_cline_error_with_exit_zero_is_a_failure(
    cli_settings: Callable[..., Settings], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_CLI_MODE", "error-result")
    result = outcome(ClineConnector(cli_settings()), "x")
    assert (result.status, result.exit_code) == (Status.FAILED, 0)
    assert result.as_text() == "Error: Cline execution failed (exit code 0). API request failed: 401 invalid x-api-key"


def test_cline_failure_empty_answer_and_missing_binary(
    cli_settings: Callable[..., Settings], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    connector = ClineConnector(cli_settings())
    monkeypatch.setenv("FAKE_CLI_MODE", "fail")
    assert reply(connector, "x") == "Error: Cline execution failed (exit code 2). error: not logged in"
    monkeypatch.setenv("FAKE_CLI_MODE", "empty")
    assert reply(connector, "x") == "No response generated."
    missing = str(tmp_path / "cline-missing")
    gone = ClineConnector(cli_settings(cline_command=missing))
    assert reply(gone, "x") == f"Error: Cline CLI not found at '{missing}'. Check apple_flow_cline_command setting."
    with pytest.raises(ConnectorError, match="APPLE_FLOW_CLINE_COMMAND"):
        gone.ensure_started()


# --- kilo ----------------------------------------------------------------------------------------------------


def test_kilo_argv_cwd_stdin_and_progress(cli_settings: Callable[..., Settings], workspace: Path, record: Runs) -> None:
    connector = build_connector(
        cli_settings(connector="kilo-cli", kilo_model="anthropic/claude-sonnet-4", soul_prompt="Be kind.")
    )
    assert isinstance(connector, KiloConnector)
    assert isinstance(connector, Connector)
    text, progress = with_progress(connector, "-v is not a flag here: fix the test")
    assert text == "kilo answer"  # the text after the last tool call; "Let me look." came before
    (run,) = record()
    assert run["argv"] == ["run", "--format", "json", "--auto", "--model", "anthropic/claude-sonnet-4"]
    assert run["cwd"] == str(workspace)
    assert run["stdin"] == "Be kind.\n\n-v is not a flag here: fix the test"
    assert progress == ["reading src/app.py", "editing src/app.py", "running: pytest -q"]


def test_kilo_outcome_carries_what_the_stream_reports(cli_settings: Callable[..., Settings]) -> None:
    result = outcome(KiloConnector(cli_settings()), "fix it")
    assert (result.status, result.agent, result.exit_code) == (Status.ANSWERED, "Kilo", 0)
    assert result.usage == Usage(input_tokens=1200, output_tokens=34)  # both steps'
    assert (result.files_changed, result.commands_run) == (("src/app.py",), 1)


def test_kilo_read_only_turn_uses_the_plan_agent_without_auto_approval(
    cli_settings: Callable[..., Settings], record: Runs
) -> None:
    connector = KiloConnector(cli_settings(kilo_context_window=2))
    assert connector.context_window == 2
    reply(connector, "plan it", read_only=True, exchanges=(Exchange("first", "kilo answer"),))
    (run,) = record()
    assert run["argv"] == ["run", "--format", "json", "--agent", "plan"]  # no --auto: what it asks is refused
    assert "User: first\nAssistant: kilo answer" in run["stdin"] and run["stdin"].endswith("plan it")


def test_kilo_error_event_with_exit_zero_is_a_failure(
    cli_settings: Callable[..., Settings], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_CLI_MODE", "error-result")
    result = outcome(KiloConnector(cli_settings()), "x")
    assert (result.status, result.exit_code) == (Status.FAILED, 0)
    assert result.as_text() == "Error: Kilo execution failed (exit code 0). Insufficient credits"


def test_kilo_failure_empty_answer_and_missing_binary(
    cli_settings: Callable[..., Settings], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    connector = KiloConnector(cli_settings())
    monkeypatch.setenv("FAKE_CLI_MODE", "fail")
    assert reply(connector, "x") == "Error: Kilo execution failed (exit code 2). error: not logged in"
    monkeypatch.setenv("FAKE_CLI_MODE", "empty")
    assert reply(connector, "x") == "No response generated."
    missing = str(tmp_path / "kilo-missing")
    gone = KiloConnector(cli_settings(kilo_command=missing))
    assert reply(gone, "x") == f"Error: Kilo CLI not found at '{missing}'. Check apple_flow_kilo_command setting."
    with pytest.raises(ConnectorError, match="APPLE_FLOW_KILO_COMMAND"):
        gone.ensure_started()
