"""AfmConnector against a fake apple-code that follows the CLI contract (tests/support/fake_apple_code.py)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from apple_flow.config import Settings
from apple_flow.connectors import (
    AfmConnector,
    Connector,
    ConnectorError,
    Exchange,
    OllamaConnector,
    Status,
    TurnRequest,
    Usage,
    build_connector,
)
from apple_flow.connectors.events import EventStream
from apple_flow.connectors.runner import ProcessRunner
from support.turns import outcome, reply, with_progress
from support.waiting import wait_for

Runs = Callable[[], list[dict[str, Any]]]
MakeSettings = Callable[..., Settings]


@pytest.fixture
def connector(connector_settings: MakeSettings) -> AfmConnector:
    return AfmConnector(connector_settings(), runner=ProcessRunner(drain_seconds=0.3, kill_grace_seconds=0.3))


def mode(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    monkeypatch.setenv("FAKE_APPLE_CODE_MODE", name)


# --- the protocol ------------------------------------------------------------------------------------------


def test_build_connector_gives_an_afm_connector_that_meets_the_protocol(connector_settings: MakeSettings) -> None:
    connector = build_connector(connector_settings())
    assert isinstance(connector, AfmConnector)
    assert isinstance(connector, Connector)


def test_no_op_methods_are_safe_with_nothing_running(connector: AfmConnector) -> None:
    assert connector.cancel() == 0
    assert connector.cancel("alice") == 0
    connector.shutdown()
    connector.shutdown()  # twice is fine


def test_the_connector_keeps_no_conversation(
    connector: AfmConnector, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Stateless: what a turn sees of the conversation is what its request carries, nothing from earlier turns.
    mode(monkeypatch, "echo")
    assert reply(connector, "hello", sender="alice") == "hello"
    assert reply(connector, "again", sender="alice") == "again"
    assert not hasattr(connector, "history")
    assert connector.context_window == 1  # how many exchanges it asks the daemon for (APPLE_FLOW_AFM_CONTEXT_WINDOW)


def test_an_answer_carries_what_apple_code_reports(connector: AfmConnector) -> None:
    result = outcome(connector, "fix it")
    assert result.status is Status.ANSWERED and result.answered
    assert (result.text, result.subtype, result.exit_code, result.agent) == ("fake answer", "success", 0, "apple-code")
    assert result.usage == Usage(input_tokens=10, output_tokens=5, estimated=True)
    assert (result.num_turns, result.duration_ms, result.commands_run, result.files_changed) == (1, 5, 0, ())


# --- one turn ------------------------------------------------------------------------------------------------


def test_successful_run_returns_the_result_event_and_sends_the_prompt_on_stdin(
    connector: AfmConnector, record: Runs
) -> None:
    assert reply(connector, "what does app.py do?") == "fake answer"
    (run,) = record()
    assert run["stdin"] == "what does app.py do?"
    assert run["argv"][-1] == "-"


def test_exact_argv_with_cwd_system_and_timeout(
    connector_settings: MakeSettings, workspace: Path, record: Runs
) -> None:
    connector = AfmConnector(connector_settings(soul_prompt="You are terse.", afm_timeout_seconds=45))
    reply(connector, "hi")
    (run,) = record()
    state = connector.settings.db_path.absolute()
    assert run["argv"] == [
        "--cwd", str(workspace), "--system", "You are terse.", "--timeout", "45", "--output-format", "stream-json",
        "--hide", str(Path(".env").absolute()), "--hide", str(state.parent), "--hide", str(state),
        "--hide", f"{state}-wal", "--hide", f"{state}-shm", "-",
    ]
    assert run["cwd"] == str(workspace)  # the process runs in the workspace too


def test_apple_code_is_told_to_hide_the_daemons_secrets_and_refuse_its_web_port(
    connector_settings: MakeSettings, tmp_path: Path, record: Runs, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A command the agent runs must not read the daemon's .env (the web token) or its database, nor reach its page:
    with any of them a prompt-injected model could approve its own tasks."""
    monkeypatch.chdir(tmp_path)
    settings = connector_settings(db_path=tmp_path / "state" / "relay.db", web_enabled=True, web_port=8790)
    reply(AfmConnector(settings), "hi")
    (run,) = record()
    argv: list[str] = run["argv"]
    hidden = [argv[i + 1] for i, flag in enumerate(argv) if flag == "--hide"]
    assert str(tmp_path / ".env") in hidden and str(tmp_path / "state") in hidden
    assert str(tmp_path / "state" / "relay.db") in hidden
    assert argv[argv.index("--deny-port") + 1] == "8790"
    reply(AfmConnector(connector_settings(web_enabled=False)), "hi")
    assert "--deny-port" not in record()[-1]["argv"]


def test_the_demo_profile_limits_reach_apple_code(
    connector_settings: MakeSettings, workspace: Path, record: Runs
) -> None:
    reply(AfmConnector(connector_settings(profile="demo")), "hi")
    reply(AfmConnector(connector_settings()), "hi")
    demo, standard = record()
    assert demo["argv"][2:8] == ["--timeout", "110", "--output-format", "stream-json", "--max-turns", "4"]
    assert demo["argv"][demo["argv"].index("--context-tokens") + 1] == "2048"
    assert "--max-turns" not in standard["argv"] and standard["argv"][2:4] == ["--timeout", "120"]
    assert "--context-tokens" not in standard["argv"]
    # No earlier exchange goes with a demo prompt (the small model copied the last reply); one does otherwise.
    assert AfmConnector(connector_settings(profile="demo")).context_window == 0
    assert AfmConnector(connector_settings()).context_window == 1


def test_cwd_from_options_wins(connector: AfmConnector, tmp_path: Path, record: Runs) -> None:
    other = tmp_path / "other"
    other.mkdir()
    reply(connector, "hi", other)
    (run,) = record()
    assert run["argv"][:2] == ["--cwd", str(other)]


def test_a_relative_workspace_is_made_absolute_before_the_child_moves_into_it(
    connector: AfmConnector, tmp_path: Path, record: Runs, monkeypatch: pytest.MonkeyPatch
) -> None:
    # e.g. APPLE_FLOW_DEFAULT_WORKSPACE=ws: "--cwd ws" seen from inside ws would be ws/ws.
    (tmp_path / "ws").mkdir(exist_ok=True)
    monkeypatch.chdir(tmp_path)
    assert reply(connector, "hi", "ws") == "fake answer"
    (run,) = record()
    assert run["argv"][:2] == ["--cwd", str(tmp_path / "ws")]


def test_missing_workspace_is_a_clear_error_and_runs_nothing(
    connector: AfmConnector, tmp_path: Path, record: Runs
) -> None:
    result = outcome(connector, "hi", tmp_path / "gone")
    assert result.status is Status.FAILED
    text = result.as_text()
    assert text.startswith("Error: workspace ")
    assert "does not exist" in text and "the workspace you asked for" in text
    default_gone = AfmConnector(connector.settings.model_copy(
        update={"workspaces": connector.settings.workspaces.model_copy(update={"default": tmp_path / "gone"})}))
    assert "Check APPLE_FLOW_DEFAULT_WORKSPACE." in reply(default_gone, "hi")
    assert "Check APPLE_FLOW_DEFAULT_WORKSPACE." in reply(default_gone, "hi", tmp_path / "gone")  # named, still it
    assert record() == []


def test_a_read_only_request_runs_read_only(connector: AfmConnector, record: Runs) -> None:
    reply(connector, "plan it", read_only=True)
    reply(connector, "do it", read_only=False)
    planning, doing = record()
    assert "--read-only" in planning["argv"]
    assert "--read-only" not in doing["argv"]


def test_plan_option_passes_plan_only_when_the_setting_allows(connector_settings: MakeSettings, record: Runs) -> None:
    reply(AfmConnector(connector_settings()), "task", plan=True)
    reply(AfmConnector(connector_settings(afm_plan_tasks=False)), "task", plan=True)
    reply(AfmConnector(connector_settings()), "chat")
    reply(AfmConnector(connector_settings(profile="demo")), "task", plan=True)
    planned, not_allowed, chat, demo = record()
    assert "--plan" in planned["argv"]
    assert "--plan" not in not_allowed["argv"]
    assert "--plan" not in chat["argv"]
    assert "--plan" not in demo["argv"]  # the small local model's profile: the plan arm solved nothing there


def test_backend_settings_become_flags(connector_settings: MakeSettings, record: Runs) -> None:
    settings = connector_settings(
        afm_backend="openai", afm_model="qwen2.5:3b", afm_base_url="http://127.0.0.1:9/v1", afm_context_tokens=2048
    )
    reply(AfmConnector(settings), "hi")
    argv = record()[0]["argv"]
    flags = argv[argv.index("stream-json") + 1 : argv.index("--hide")]
    assert flags == [
        "--backend", "openai", "--model", "qwen2.5:3b", "--base-url", "http://127.0.0.1:9/v1",
        "--context-tokens", "2048",
    ]


def test_approved_tasks_run_on_the_task_server_and_chat_on_the_first(
        connector_settings: MakeSettings, record: Runs) -> None:
    settings = connector_settings(afm_backend="openai", afm_base_url="http://127.0.0.1:9/v1",
                                  afm_task_base_url="http://127.0.0.1:10/v1", afm_context_tokens=2048)
    connector = AfmConnector(settings)
    reply(connector, "fix it", plan=True, task=True)
    reply(connector, "what is here?")
    reply(connector, "plan it", read_only=True, task=True)  # a task's plan, before approval: the task model too
    reply(connector, "look around", read_only=True)  # a read-only chat turn
    task, chat, planning, looking = (run["argv"] for run in record())

    def backend(argv: list[str]) -> list[str]:
        return argv[argv.index("stream-json") + 1 : argv.index("--hide")]

    assert backend(task) == backend(planning) == [
        "--backend", "openai", "--base-url", "http://127.0.0.1:10/v1", "--context-tokens", "2048"]
    assert backend(chat) == backend(looking) == [
        "--backend", "openai", "--base-url", "http://127.0.0.1:9/v1", "--context-tokens", "2048"]


def test_a_task_model_alone_keeps_the_server(connector_settings: MakeSettings, record: Runs) -> None:
    settings = connector_settings(afm_backend="openai", afm_base_url="http://127.0.0.1:9/v1",
                                  afm_model="small", afm_task_model="large")
    reply(AfmConnector(settings), "fix it", plan=True)
    argv = record()[0]["argv"]
    assert argv[argv.index("--model") + 1] == "large" and argv[argv.index("--base-url") + 1] == "http://127.0.0.1:9/v1"
    assert argv[argv.index("--backend") + 1] == "openai"


def test_ensure_started_checks_the_task_server_too_and_names_it(
        connector_settings: MakeSettings, record: Runs, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = connector_settings(afm_backend="openai", afm_base_url="http://127.0.0.1:9/v1",
                                  afm_task_base_url="http://127.0.0.1:10/v1")
    AfmConnector(settings).ensure_started()
    assert [run["argv"] for run in record()] == [
        ["--version"], ["--check", "--backend", "openai", "--base-url", "http://127.0.0.1:9/v1"],
        ["--check", "--backend", "openai", "--base-url", "http://127.0.0.1:10/v1"],
    ]
    monkeypatch.setenv("FAKE_APPLE_CODE_UNAVAILABLE_AT", "http://127.0.0.1:10/v1")
    with pytest.raises(ConnectorError, match=r"no model available for approved tasks \(backend fm at "
                                             r"http://127.0.0.1:10/v1\).*apple-flow model start --tasks") as raised:
        AfmConnector(settings).ensure_started()
    assert raised.value.status is Status.NO_MODEL
    monkeypatch.setenv("FAKE_APPLE_CODE_UNAVAILABLE_AT", "http://127.0.0.1:9/v1")
    with pytest.raises(ConnectorError, match=r"no model available \(backend fm at http://127.0.0.1:9/v1\)"):
        AfmConnector(settings).ensure_started()  # the chat server's, said without "for approved tasks"


def test_an_mcp_config_is_passed_as_an_absolute_path(
    connector_settings: MakeSettings, record: Runs, tmp_path: Path
) -> None:
    reply(AfmConnector(connector_settings(afm_mcp_config=tmp_path / "mcp.json")), "hi")
    argv = record()[0]["argv"]
    assert argv[argv.index("--mcp-config") + 1] == str(tmp_path / "mcp.json") and argv[-1] == "-"
    reply(AfmConnector(connector_settings()), "hi")
    assert "--mcp-config" not in record()[-1]["argv"]


def test_default_backend_passes_no_backend_flags(connector: AfmConnector, record: Runs) -> None:
    reply(connector, "hi")
    argv = record()[0]["argv"]
    assert not {"--backend", "--model", "--base-url", "--context-tokens"} & set(argv)


# --- failures ------------------------------------------------------------------------------------------------


def test_timeout_reported_by_apple_code(
    connector_settings: MakeSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    mode(monkeypatch, "timeout")
    result = outcome(AfmConnector(connector_settings(afm_timeout_seconds=0.5)), "big job")
    assert (result.status, result.limit_seconds, result.exit_code, result.subtype) == (
        Status.TIMED_OUT, 0.5, 124, "error_timeout"
    )
    assert result.text == "partial: read 2 files"
    assert result.as_text().startswith("Error: Request timed out after 0.5s.")
    assert "Partial answer: partial: read 2 files" in result.as_text()


def test_apple_code_that_ignores_its_timeout_is_killed(
    connector_settings: MakeSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    mode(monkeypatch, "hang")
    connector = AfmConnector(
        connector_settings(afm_timeout_seconds=1), runner=ProcessRunner(0.3, 0.3), kill_margin_seconds=0.5
    )
    started = time.monotonic()
    result = outcome(connector, "big job")
    assert result.status is Status.TIMED_OUT
    assert result.as_text().startswith("Error: Request timed out after 1s.")
    assert time.monotonic() - started < 4


def test_command_not_found(connector_settings: MakeSettings, tmp_path: Path) -> None:
    missing = str(tmp_path / "no" / "apple-code")
    result = outcome(AfmConnector(connector_settings(afm_command=missing)), "hi")
    assert result.status is Status.BINARY_MISSING
    assert result.as_text() == f"Error: apple-code CLI not found at '{missing}'. Check apple_flow_afm_command setting."


def test_bare_command_not_on_path(connector_settings: MakeSettings, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    text = reply(AfmConnector(connector_settings(afm_command="apple-code-missing")), "hi")
    assert text == "Error: apple-code CLI not found at 'apple-code-missing'. Check apple_flow_afm_command setting."


def test_command_not_executable(connector_settings: MakeSettings, tmp_path: Path) -> None:
    script = tmp_path / "not-exec"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o644)
    result = outcome(AfmConnector(connector_settings(afm_command=str(script))), "hi")
    assert result.status is Status.FAILED
    text = result.as_text()
    assert text.startswith(f"Error: apple-code CLI at '{script}' cannot be run")
    assert str(script) in text
    assert "apple_flow_afm_command" in text


def test_error_exit_code_names_the_code_and_last_stderr_line(
    connector: AfmConnector, monkeypatch: pytest.MonkeyPatch
) -> None:
    mode(monkeypatch, "fail")
    result = outcome(connector, "hi")
    assert (result.status, result.exit_code, result.subtype) == (Status.FAILED, 1, "error_backend")
    assert result.as_text() == "Error: apple-code execution failed (exit code 1). backend error: connection refused"


def test_model_unavailable_says_why(
    connector: AfmConnector, monkeypatch: pytest.MonkeyPatch
) -> None:
    mode(monkeypatch, "unavailable")
    result = outcome(connector, "hi")
    assert (result.status, result.exit_code, result.subtype) == (Status.NO_MODEL, 3, "error_model_unavailable")
    assert result.detail.startswith("Apple Intelligence is not enabled. Turn on Apple Intelligence")
    text = result.as_text()
    assert text.startswith("Error: apple-code execution failed (exit code 3). No model available: ")
    assert "Apple Intelligence is not enabled" in text
    assert "APPLE_FLOW_AFM_BACKEND=openai" in text


def test_empty_response(
    connector: AfmConnector, monkeypatch: pytest.MonkeyPatch
) -> None:
    mode(monkeypatch, "empty")
    result = outcome(connector, "hi")
    assert (result.status, result.text) == (Status.EMPTY, "")
    assert result.as_text() == "No response generated."


def test_an_answer_that_starts_with_error_is_an_answer(
    connector: AfmConnector, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_APPLE_CODE_ANSWER", "Error: is what parse() raises on a blank line.")
    result = outcome(connector, "what does parse() raise?")
    assert result.status is Status.ANSWERED
    assert result.as_text() == "Error: is what parse() raises on a blank line."


def test_an_interrupted_apple_code_is_a_cancelled_turn(
    connector: AfmConnector, monkeypatch: pytest.MonkeyPatch
) -> None:
    mode(monkeypatch, "interrupted")
    result = outcome(connector, "hi")
    assert (result.status, result.exit_code, result.subtype) == (Status.CANCELLED, 130, "error_interrupted")
    assert result.as_text() == (
        "Error: apple-code was interrupted (exit code 130). apple-code: error_interrupted: interrupted by SIGTERM"
    )


def test_stream_without_result_event_is_a_failure(
    connector: AfmConnector, monkeypatch: pytest.MonkeyPatch
) -> None:
    mode(monkeypatch, "no-result")
    result = outcome(connector, "hi")
    assert result.status is Status.FAILED
    assert result.as_text().startswith(
        "Error: apple-code execution failed (exit code 0). The output ended without a result"
    )


# --- prompt fitting ----------------------------------------------------------------------------------------------


def test_context_window_limits_the_history_sent(
    connector_settings: MakeSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The daemon sends the newest ``context_window`` exchanges; the connector fits what it is given.
    mode(monkeypatch, "echo")
    connector = AfmConnector(connector_settings(afm_context_window=1))
    assert connector.context_window == 1
    exchanges = tuple(Exchange(f"question {n}", f"answer {n}") for n in range(3))
    prompt = reply(connector, "newest", exchanges=exchanges[-connector.context_window :])
    assert "User: question 2\nAssistant: answer 2" in prompt
    assert "question 1" not in prompt and "question 0" not in prompt
    assert prompt.endswith("newest")


def test_the_exchanges_of_the_request_lead_the_prompt(
    connector_settings: MakeSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    mode(monkeypatch, "echo")
    connector = AfmConnector(connector_settings(afm_context_window=2))
    prompt = reply(connector, "alice two", exchanges=(Exchange("alice one", "echo one"),))
    assert prompt.startswith("Earlier conversation (for context):\nUser: alice one\nAssistant: echo one")
    assert prompt.endswith("alice two")


def test_zero_window_asks_for_no_history(connector_settings: MakeSettings, monkeypatch: pytest.MonkeyPatch) -> None:
    mode(monkeypatch, "echo")
    connector = AfmConnector(connector_settings(afm_context_window=0))
    assert connector.context_window == 0
    assert reply(connector, "two") == "two"


def test_long_message_is_cut_from_the_middle_to_the_budget(
    connector_settings: MakeSettings, record: Runs, monkeypatch: pytest.MonkeyPatch
) -> None:
    connector = AfmConnector(connector_settings(afm_max_prompt_chars=1000))
    message = "START " + "x" * 5000 + " END"
    reply(connector, message, exchanges=(Exchange("old question", "old answer"),))
    sent = record()[0]["stdin"]
    assert len(sent) == 1000
    assert sent.startswith("START ") and sent.endswith(" END")
    assert "characters cut" in sent
    assert "old question" not in sent  # the message alone fills the budget


def test_history_is_trimmed_to_what_the_budget_leaves(connector_settings: MakeSettings, record: Runs) -> None:
    connector = AfmConnector(connector_settings(afm_max_prompt_chars=600, afm_context_window=3))
    exchanges = tuple(Exchange(f"q{n} " + "a" * 400, f"r{n} " + "b" * 400) for n in range(3))
    reply(connector, "the new message", exchanges=exchanges)
    sent = record()[0]["stdin"]
    assert len(sent) <= 600
    assert sent.endswith("the new message")
    assert "q2 " in sent  # the newest exchange is kept (trimmed) first


def test_no_tools_context_is_injected(connector: AfmConnector, record: Runs) -> None:
    reply(connector, "list the files")
    sent = record()[0]["stdin"]
    assert sent == "list the files"
    for word in ("readFile", "runCommand", "tool", "Tools"):
        assert word not in sent


def test_soul_prompt_is_cut_and_goes_in_system_not_the_prompt(connector_settings: MakeSettings, record: Runs) -> None:
    soul = "You are Flow. " + "Be kind. " * 200
    connector = AfmConnector(connector_settings(soul_prompt=soul, afm_soul_max_chars=100))
    reply(connector, "hi")
    run = record()[0]
    system = run["argv"][run["argv"].index("--system") + 1]
    assert len(system) <= 100
    assert system.startswith("You are Flow.")
    assert "Flow" not in run["stdin"]


def test_the_soul_prompt_is_stripped(connector_settings: MakeSettings, record: Runs) -> None:
    reply(AfmConnector(connector_settings(soul_prompt="  Answer in French.  ")), "hi")
    argv = record()[0]["argv"]
    assert argv[argv.index("--system") + 1] == "Answer in French."


def test_the_soul_file_wins_over_the_soul_prompt(
    connector_settings: MakeSettings, tmp_path: Path, record: Runs
) -> None:
    soul = tmp_path / "soul.md"
    soul.write_text("Answer in German.\n", encoding="utf-8")
    reply(AfmConnector(connector_settings(soul_prompt="Answer in French.", soul_file=soul)), "hi")
    argv = record()[0]["argv"]
    assert argv[argv.index("--system") + 1] == "Answer in German."


def test_empty_soul_prompt_sends_no_system_flag(connector: AfmConnector, record: Runs) -> None:
    reply(connector, "hi")
    assert "--system" not in record()[0]["argv"]


def test_soul_prompt_starting_with_a_dash_is_one_value(connector_settings: MakeSettings, record: Runs) -> None:
    reply(AfmConnector(connector_settings(soul_prompt="- be brief")), "hi")
    argv = record()[0]["argv"]
    assert argv[argv.index("--system") + 1] == "- be brief"


# --- streaming ---------------------------------------------------------------------------------------------------


def test_tool_calls_and_the_answer_become_progress_lines_as_they_come(connector: AfmConnector) -> None:
    text, progress = with_progress(connector, "fix it")
    assert text == "fake answer"
    assert progress == ["reading src/app.py", "running: make test", "writing the answer (11 characters so far)"]


def test_every_event_of_the_stream_is_read_in_order_before_the_outcome(connector: AfmConnector) -> None:
    turn = connector.run(TurnRequest("fix it"))
    kinds = [item.event.type for item in turn.events]
    assert kinds == ["start", "tool_call", "tool_result", "tool_call", "tool_result", "text", "result"]
    assert turn.outcome() == outcome(connector, "fix it")


def test_a_turn_whose_stream_fails_to_read_stops_its_agent(
    connector: AfmConnector, monkeypatch: pytest.MonkeyPatch
) -> None:
    mode(monkeypatch, "hang")
    monkeypatch.setattr(EventStream, "feed", lambda self, line: 1 / 0)
    turn = connector.run(TurnRequest("long"))
    with pytest.raises(ZeroDivisionError):
        turn.outcome()
    assert connector.runner.active_count() == 0


def test_a_turn_closed_before_its_end_stops_its_agent(connector: AfmConnector, monkeypatch: pytest.MonkeyPatch) -> None:
    mode(monkeypatch, "hang")
    turn = connector.run(TurnRequest("long"))
    wait_for(lambda: connector.runner.active_count() > 0, 5, "the turn to start")
    turn.close()
    assert connector.runner.active_count() == 0


# --- cancelling and starting ---------------------------------------------------------------------------------------


def test_cancel_stops_the_turns_of_one_key(
    connector: AfmConnector, monkeypatch: pytest.MonkeyPatch
) -> None:
    mode(monkeypatch, "hang")
    replies: list[str] = []
    worker = threading.Thread(target=lambda: replies.append(reply(connector, "long", sender="alice")))
    worker.start()
    wait_for(lambda: connector.runner.active_count() > 0, 5, "the turn to start")
    assert connector.cancel("bob") == 0
    assert connector.cancel("alice") == 1
    worker.join(5)
    assert replies == ["Error: apple-code run was cancelled."]


def test_ensure_started_runs_version_then_check_with_the_backend(
    connector_settings: MakeSettings, record: Runs
) -> None:
    AfmConnector(connector_settings()).ensure_started()
    AfmConnector(connector_settings(afm_backend="openai", afm_base_url="http://127.0.0.1:9/v1")).ensure_started()
    assert [run["argv"] for run in record()] == [
        ["--version"], ["--check"],
        ["--version"], ["--check", "--backend", "openai", "--base-url", "http://127.0.0.1:9/v1"],
    ]


def test_ensure_started_names_a_missing_binary(connector_settings: MakeSettings, tmp_path: Path) -> None:
    with pytest.raises(ConnectorError, match=r"apple-code CLI not found at .*APPLE_FLOW_AFM_COMMAND") as raised:
        AfmConnector(connector_settings(afm_command=str(tmp_path / "nope"))).ensure_started()
    assert raised.value.status is Status.BINARY_MISSING


def test_ensure_started_says_why_the_model_is_unavailable(
    connector: AfmConnector, monkeypatch: pytest.MonkeyPatch
) -> None:
    mode(monkeypatch, "unavailable")
    why = r"no model available \(backend fm\): Apple Intelligence is not enabled"
    with pytest.raises(ConnectorError, match=why) as raised:
        connector.ensure_started()
    assert raised.value.status is Status.NO_MODEL


def test_relative_command_path_still_runs_in_another_workspace(
    connector_settings: MakeSettings, fake_apple_code: Path, monkeypatch: pytest.MonkeyPatch, record: Runs
) -> None:
    monkeypatch.chdir(fake_apple_code.parent.parent)  # the command is relative to here, the workspace is not
    connector = AfmConnector(connector_settings(afm_command=f"{fake_apple_code.parent.name}/apple-code"))
    assert reply(connector, "hi") == "fake answer"
    connector.ensure_started()


# --- the ollama preset ---------------------------------------------------------------------------------------


def test_ollama_is_apple_code_on_ollamas_default_url_with_the_model_setting(
    connector_settings: MakeSettings, workspace: Path, record: Runs
) -> None:
    # One setting picks it; the afm backend settings (here deliberately pointing elsewhere) do not apply to it.
    settings = connector_settings(connector="ollama", afm_backend="fm", afm_model="other", afm_base_url="http://x/v1")
    connector = build_connector(settings)
    assert isinstance(connector, OllamaConnector) and isinstance(connector, Connector)
    assert reply(connector, "hi") == "fake answer"
    assert record()[0]["argv"] == [
        "--cwd", str(workspace), "--timeout", "120", "--output-format", "stream-json",
        "--backend", "openai", "--model", "qwen2.5-coder:7b", "--base-url", "http://127.0.0.1:11434/v1",
        *connector.reach_flags(), "-",
    ]


def test_ollama_model_and_url_settings_and_its_start_up_check(
    connector_settings: MakeSettings, record: Runs
) -> None:
    settings = connector_settings(
        connector="ollama", ollama_model="llama3.2:3b", ollama_base_url="http://127.0.0.1:9/v1", afm_context_tokens=2048
    )
    build_connector(settings).ensure_started()
    assert [run["argv"] for run in record()] == [
        ["--version"],
        ["--check", "--backend", "openai", "--model", "llama3.2:3b", "--base-url", "http://127.0.0.1:9/v1",
         "--context-tokens", "2048"],
    ]


def test_ollama_without_a_model_says_how_to_get_one(
    connector_settings: MakeSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    mode(monkeypatch, "unavailable")
    connector = build_connector(connector_settings(connector="ollama"))
    text = outcome(connector, "hi").as_text()
    assert "`ollama pull qwen2.5-coder:7b`" in text and "APPLE_FLOW_OLLAMA_BASE_URL" in text
    assert "Apple Intelligence (macOS 26)" not in text  # the afm hint would not help here
    with pytest.raises(ConnectorError, match=r"ollama serve.*ollama pull qwen2\.5-coder:7b"):
        connector.ensure_started()
