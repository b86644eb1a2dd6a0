"""AfmConnector against a fake apple-code that follows the CLI contract (tests/connectors/fake_apple_code.py)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from apple_flow.config import Settings
from apple_flow.connectors import AfmConnector, Connector, ConnectorError, Exchange, MemoryHistory, build_connector
from apple_flow.connectors.runner import ProcessRunner

Runs = Callable[[], list[dict[str, Any]]]
MakeSettings = Callable[..., Settings]


@pytest.fixture
def connector(make_settings: MakeSettings) -> AfmConnector:
    return AfmConnector(make_settings(), runner=ProcessRunner(drain_seconds=0.3, kill_grace_seconds=0.3))


def mode(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    monkeypatch.setenv("FAKE_APPLE_CODE_MODE", name)


# --- the protocol ------------------------------------------------------------------------------------------


def test_build_connector_gives_an_afm_connector_that_meets_the_protocol(make_settings: MakeSettings) -> None:
    connector = build_connector(make_settings())
    assert isinstance(connector, AfmConnector)
    assert isinstance(connector, Connector)


def test_no_op_methods_are_safe_with_nothing_running(connector: AfmConnector) -> None:
    assert connector.cancel_active_processes() == 0
    assert connector.cancel_active_processes("alice") == 0
    connector.shutdown()
    connector.shutdown()  # twice is fine


def test_threads_are_the_sender_and_reset_clears_history(
    connector: AfmConnector, monkeypatch: pytest.MonkeyPatch
) -> None:
    thread = connector.get_or_create_thread("+15551234567")
    assert thread == connector.get_or_create_thread("+15551234567")
    assert thread != connector.get_or_create_thread("bob@example.com")
    assert connector.run_turn(thread, "hello") == "fake answer"
    assert connector.history.history(thread, 5) == [Exchange("hello", "fake answer")]
    assert connector.reset_thread("+15551234567") == thread
    assert connector.history.history(thread, 5) == []


# --- one turn ------------------------------------------------------------------------------------------------


def test_successful_run_returns_the_result_event_and_sends_the_prompt_on_stdin(
    connector: AfmConnector, record: Runs
) -> None:
    assert connector.run_turn("alice", "what does app.py do?") == "fake answer"
    (run,) = record()
    assert run["stdin"] == "what does app.py do?"
    assert run["argv"][-1] == "-"


def test_exact_argv_with_cwd_system_and_timeout(make_settings: MakeSettings, workspace: Path, record: Runs) -> None:
    connector = AfmConnector(make_settings(soul_prompt="You are terse.", afm_timeout_seconds=45))
    connector.run_turn("alice", "hi")
    (run,) = record()
    assert run["argv"] == [
        "--cwd", str(workspace), "--system", "You are terse.", "--timeout", "45", "--output-format", "stream-json", "-",
    ]
    assert run["cwd"] == str(workspace)  # the process runs in the workspace too


def test_cwd_from_options_wins(connector: AfmConnector, tmp_path: Path, record: Runs) -> None:
    other = tmp_path / "other"
    other.mkdir()
    connector.run_turn("alice", "hi", {"cwd": str(other)})
    (run,) = record()
    assert run["argv"][:2] == ["--cwd", str(other)]


def test_a_relative_workspace_is_made_absolute_before_the_child_moves_into_it(
    connector: AfmConnector, tmp_path: Path, record: Runs, monkeypatch: pytest.MonkeyPatch
) -> None:
    # e.g. APPLE_FLOW_DEFAULT_WORKSPACE=ws: "--cwd ws" seen from inside ws would be ws/ws.
    (tmp_path / "ws").mkdir(exist_ok=True)
    monkeypatch.chdir(tmp_path)
    assert connector.run_turn("alice", "hi", {"cwd": "ws"}) == "fake answer"
    (run,) = record()
    assert run["argv"][:2] == ["--cwd", str(tmp_path / "ws")]


def test_missing_workspace_is_a_clear_error_and_runs_nothing(
    connector: AfmConnector, tmp_path: Path, record: Runs
) -> None:
    reply = connector.run_turn("alice", "hi", {"cwd": str(tmp_path / "gone")})
    assert reply.startswith("Error: workspace ")
    assert "does not exist" in reply and "the workspace you asked for" in reply
    default_gone = AfmConnector(connector.settings.model_copy(update={"default_workspace": tmp_path / "gone"}))
    assert "Check APPLE_FLOW_DEFAULT_WORKSPACE." in default_gone.run_turn("alice", "hi")
    assert record() == []


def test_allow_tools_false_runs_read_only(connector: AfmConnector, record: Runs) -> None:
    connector.run_turn("alice", "plan it", {"allow_tools": False})
    connector.run_turn("alice", "do it", {"allow_tools": True})
    planning, doing = record()
    assert "--read-only" in planning["argv"]
    assert "--read-only" not in doing["argv"]


def test_plan_option_passes_plan_only_when_the_setting_allows(make_settings: MakeSettings, record: Runs) -> None:
    AfmConnector(make_settings()).run_turn("alice", "task", {"plan": True})
    AfmConnector(make_settings(afm_plan_tasks=False)).run_turn("alice", "task", {"plan": True})
    AfmConnector(make_settings()).run_turn("alice", "chat")
    planned, not_allowed, chat = record()
    assert "--plan" in planned["argv"]
    assert "--plan" not in not_allowed["argv"]
    assert "--plan" not in chat["argv"]


def test_backend_settings_become_flags(make_settings: MakeSettings, record: Runs) -> None:
    settings = make_settings(
        afm_backend="openai", afm_model="qwen2.5:3b", afm_base_url="http://127.0.0.1:9/v1", afm_context_tokens=2048
    )
    AfmConnector(settings).run_turn("alice", "hi")
    argv = record()[0]["argv"]
    flags = argv[argv.index("stream-json") + 1 : -1]
    assert flags == [
        "--backend", "openai", "--model", "qwen2.5:3b", "--base-url", "http://127.0.0.1:9/v1",
        "--context-tokens", "2048",
    ]


def test_default_backend_passes_no_backend_flags(connector: AfmConnector, record: Runs) -> None:
    connector.run_turn("alice", "hi")
    argv = record()[0]["argv"]
    assert not {"--backend", "--model", "--base-url", "--context-tokens"} & set(argv)


# --- failures ------------------------------------------------------------------------------------------------


def test_timeout_reported_by_apple_code(
    make_settings: MakeSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    mode(monkeypatch, "timeout")
    reply = AfmConnector(make_settings(afm_timeout_seconds=0.5)).run_turn("alice", "big job")
    assert reply.startswith("Error: Request timed out after 0.5s.")
    assert "Partial answer: partial: read 2 files" in reply


def test_apple_code_that_ignores_its_timeout_is_killed(
    make_settings: MakeSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    mode(monkeypatch, "hang")
    connector = AfmConnector(
        make_settings(afm_timeout_seconds=1), runner=ProcessRunner(0.3, 0.3), kill_margin_seconds=0.5
    )
    started = time.monotonic()
    reply = connector.run_turn("alice", "big job")
    assert reply.startswith("Error: Request timed out after 1s.")
    assert time.monotonic() - started < 4
    assert connector.history.history("alice", 5) == []


def test_command_not_found(make_settings: MakeSettings, tmp_path: Path) -> None:
    missing = str(tmp_path / "no" / "apple-code")
    reply = AfmConnector(make_settings(afm_command=missing)).run_turn("alice", "hi")
    assert reply == f"Error: apple-code CLI not found at '{missing}'. Check apple_flow_afm_command setting."


def test_bare_command_not_on_path(make_settings: MakeSettings, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    reply = AfmConnector(make_settings(afm_command="apple-code-missing")).run_turn("alice", "hi")
    assert reply == "Error: apple-code CLI not found at 'apple-code-missing'. Check apple_flow_afm_command setting."


def test_command_not_executable(make_settings: MakeSettings, tmp_path: Path) -> None:
    script = tmp_path / "not-exec"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o644)
    reply = AfmConnector(make_settings(afm_command=str(script))).run_turn("alice", "hi")
    assert reply.startswith(f"Error: apple-code CLI at '{script}' cannot be run")
    assert str(script) in reply
    assert "apple_flow_afm_command" in reply


def test_error_exit_code_names_the_code_and_last_stderr_line(
    connector: AfmConnector, monkeypatch: pytest.MonkeyPatch
) -> None:
    mode(monkeypatch, "fail")
    reply = connector.run_turn("alice", "hi")
    assert reply == "Error: apple-code execution failed (exit code 1). backend error: connection refused"
    assert connector.history.history("alice", 5) == []  # errors are not remembered


def test_model_unavailable_says_why(connector: AfmConnector, monkeypatch: pytest.MonkeyPatch) -> None:
    mode(monkeypatch, "unavailable")
    reply = connector.run_turn("alice", "hi")
    assert reply.startswith("Error: apple-code execution failed (exit code 3). No model available: ")
    assert "Apple Intelligence is not enabled" in reply
    assert "APPLE_FLOW_AFM_BACKEND=openai" in reply


def test_empty_response(connector: AfmConnector, monkeypatch: pytest.MonkeyPatch) -> None:
    mode(monkeypatch, "empty")
    assert connector.run_turn("alice", "hi") == "No response generated."


def test_stream_without_result_event_is_a_failure(connector: AfmConnector, monkeypatch: pytest.MonkeyPatch) -> None:
    mode(monkeypatch, "no-result")
    reply = connector.run_turn("alice", "hi")
    assert reply.startswith("Error: apple-code execution failed (exit code 0). The output ended without a result")


# --- prompt fitting ----------------------------------------------------------------------------------------------


def test_context_window_limits_the_history_sent(make_settings: MakeSettings, monkeypatch: pytest.MonkeyPatch) -> None:
    mode(monkeypatch, "echo")
    history = MemoryHistory()
    connector = AfmConnector(make_settings(afm_context_window=1), history)
    for n in range(3):
        history.append("alice", Exchange(f"question {n}", f"answer {n}"))
    prompt = connector.run_turn("alice", "newest")
    assert "User: question 2\nAssistant: answer 2" in prompt
    assert "question 1" not in prompt and "question 0" not in prompt
    assert prompt.endswith("newest")


def test_history_is_kept_per_sender(make_settings: MakeSettings, monkeypatch: pytest.MonkeyPatch) -> None:
    mode(monkeypatch, "echo")
    connector = AfmConnector(make_settings(afm_context_window=2))
    connector.run_turn("alice", "alice one")
    connector.run_turn("bob", "bob one")
    prompt = connector.run_turn("alice", "alice two")
    assert "User: alice one" in prompt
    assert "bob" not in prompt


def test_zero_window_sends_no_history(make_settings: MakeSettings, monkeypatch: pytest.MonkeyPatch) -> None:
    mode(monkeypatch, "echo")
    connector = AfmConnector(make_settings(afm_context_window=0))
    connector.run_turn("alice", "one")
    assert connector.run_turn("alice", "two") == "two"


def test_long_message_is_cut_from_the_middle_to_the_budget(
    make_settings: MakeSettings, record: Runs, monkeypatch: pytest.MonkeyPatch
) -> None:
    connector = AfmConnector(make_settings(afm_max_prompt_chars=1000))
    message = "START " + "x" * 5000 + " END"
    connector.history.append("alice", Exchange("old question", "old answer"))
    connector.run_turn("alice", message)
    sent = record()[0]["stdin"]
    assert len(sent) == 1000
    assert sent.startswith("START ") and sent.endswith(" END")
    assert "characters cut" in sent
    assert "old question" not in sent  # the message alone fills the budget


def test_history_is_trimmed_to_what_the_budget_leaves(make_settings: MakeSettings, record: Runs) -> None:
    connector = AfmConnector(make_settings(afm_max_prompt_chars=600, afm_context_window=3))
    for n in range(3):
        connector.history.append("alice", Exchange(f"q{n} " + "a" * 400, f"r{n} " + "b" * 400))
    connector.run_turn("alice", "the new message")
    sent = record()[0]["stdin"]
    assert len(sent) <= 600
    assert sent.endswith("the new message")
    assert "q2 " in sent  # the newest exchange is kept (trimmed) first


def test_no_tools_context_is_injected(connector: AfmConnector, record: Runs) -> None:
    connector.run_turn("alice", "list the files")
    sent = record()[0]["stdin"]
    assert sent == "list the files"
    for word in ("readFile", "runCommand", "tool", "Tools"):
        assert word not in sent


def test_soul_prompt_is_cut_and_goes_in_system_not_the_prompt(make_settings: MakeSettings, record: Runs) -> None:
    soul = "You are Flow. " + "Be kind. " * 200
    connector = AfmConnector(make_settings(soul_prompt=soul, afm_soul_max_chars=100))
    connector.run_turn("alice", "hi")
    run = record()[0]
    system = run["argv"][run["argv"].index("--system") + 1]
    assert len(system) <= 100
    assert system.startswith("You are Flow.")
    assert "Flow" not in run["stdin"]


def test_set_soul_prompt_replaces_the_setting(connector: AfmConnector, record: Runs) -> None:
    connector.set_soul_prompt("  Answer in French.  ")
    connector.run_turn("alice", "hi")
    argv = record()[0]["argv"]
    assert argv[argv.index("--system") + 1] == "Answer in French."


def test_empty_soul_prompt_sends_no_system_flag(connector: AfmConnector, record: Runs) -> None:
    connector.run_turn("alice", "hi")
    assert "--system" not in record()[0]["argv"]


def test_soul_prompt_starting_with_a_dash_is_one_value(make_settings: MakeSettings, record: Runs) -> None:
    AfmConnector(make_settings(soul_prompt="- be brief")).run_turn("alice", "hi")
    argv = record()[0]["argv"]
    assert argv[argv.index("--system") + 1] == "- be brief"


# --- streaming ---------------------------------------------------------------------------------------------------


def test_streaming_reports_tool_calls_and_the_answer_as_progress_lines(connector: AfmConnector) -> None:
    progress: list[str] = []
    reply = connector.run_turn_streaming("alice", "fix it", progress.append)
    assert reply == "fake answer"
    assert progress == ["reading src/app.py", "running: make test", "writing the answer (11 characters so far)"]


def test_streaming_without_callback_is_run_turn(connector: AfmConnector) -> None:
    assert connector.run_turn_streaming("alice", "fix it") == "fake answer"


# --- cancelling and starting ---------------------------------------------------------------------------------------


def test_cancel_active_processes_stops_a_thread(connector: AfmConnector, monkeypatch: pytest.MonkeyPatch) -> None:
    mode(monkeypatch, "hang")
    replies: list[str] = []
    worker = threading.Thread(target=lambda: replies.append(connector.run_turn("alice", "long")))
    worker.start()
    deadline = time.monotonic() + 5
    while connector.runner.active_count() == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert connector.cancel_active_processes("bob") == 0
    assert connector.cancel_active_processes("alice") == 1
    worker.join(5)
    assert replies == ["Error: apple-code run was cancelled."]


def test_ensure_started_runs_version_then_check_with_the_backend(make_settings: MakeSettings, record: Runs) -> None:
    AfmConnector(make_settings()).ensure_started()
    AfmConnector(make_settings(afm_backend="openai", afm_base_url="http://127.0.0.1:9/v1")).ensure_started()
    assert [run["argv"] for run in record()] == [
        ["--version"], ["--check"],
        ["--version"], ["--check", "--backend", "openai", "--base-url", "http://127.0.0.1:9/v1"],
    ]


def test_ensure_started_names_a_missing_binary(make_settings: MakeSettings, tmp_path: Path) -> None:
    with pytest.raises(ConnectorError, match=r"apple-code CLI not found at .*APPLE_FLOW_AFM_COMMAND"):
        AfmConnector(make_settings(afm_command=str(tmp_path / "nope"))).ensure_started()


def test_ensure_started_says_why_the_model_is_unavailable(
    connector: AfmConnector, monkeypatch: pytest.MonkeyPatch
) -> None:
    mode(monkeypatch, "unavailable")
    with pytest.raises(ConnectorError, match=r"no model available \(backend fm\): Apple Intelligence is not enabled"):
        connector.ensure_started()


def test_relative_command_path_still_runs_in_another_workspace(
    make_settings: MakeSettings, fake_apple_code: Path, monkeypatch: pytest.MonkeyPatch, record: Runs
) -> None:
    monkeypatch.chdir(fake_apple_code.parent.parent)  # the command is relative to here, the workspace is not
    connector = AfmConnector(make_settings(afm_command=f"{fake_apple_code.parent.name}/apple-code"))
    assert connector.run_turn("alice", "hi") == "fake answer"
    connector.ensure_started()
