"""`apple-flow run --channel console` in-process (the connector is the test's fake; the end-to-end tests run the
real one): one message per line, replies on stdout, exits 0 after finishing pending turns at end of input."""

from __future__ import annotations

import io
import threading
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import apple_flow.connectors
from apple_flow.channels import registry as channels
from apple_flow.channels.console import ConsoleIngress, PlainConsoleEgress
from apple_flow.cli import app
from apple_flow.cli.run import startup_warnings
from apple_flow.config import load_settings
from apple_flow.daemon.running.lock import InstanceLock
from support.daemon_fakes import FakeConnector


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    made: list[FakeConnector] = []

    def build(settings: Any) -> FakeConnector:
        connector = FakeConnector()
        made.append(connector)
        return connector

    monkeypatch.setattr(apple_flow.connectors, "build_connector", build, raising=False)
    monkeypatch.chdir(tmp_path)  # no stray .env
    return {
        "APPLE_FLOW_DB_PATH": str(tmp_path / "relay.db"),
        "APPLE_FLOW_DEFAULT_WORKSPACE": str(tmp_path),
        "APPLE_FLOW_ALLOWED_SENDERS": "",
    }


def test_run_on_the_console_answers_each_line_and_exits_0(env: dict[str, str]) -> None:
    result = CliRunner().invoke(app, ["run", "--channel", "console"], input="hello\n\n  \nsecond line\n", env=env)
    assert result.exit_code == 0, result.output
    assert "echo: hello\n\n" in result.stdout and "echo: second line\n\n" in result.stdout
    assert result.stdout.index("echo: hello") < result.stdout.index("echo: second line")


def test_the_demo_profile_is_shown_at_start(env: dict[str, str]) -> None:
    standard = CliRunner().invoke(app, ["run", "--channel", "console"], input="hello\n", env=env)
    assert standard.exit_code == 0, standard.output
    assert "Demo profile" not in standard.output
    for command in (["run", "--channel", "console"], ["chat"]):
        demo = CliRunner().invoke(app, command, input="hello\n", env={**env, "APPLE_FLOW_PROFILE": "demo"})
        assert demo.exit_code == 0, demo.output
        said = " ".join(demo.stderr.split())
        assert "Demo profile (APPLE_FLOW_PROFILE=demo" in said and "at most 4 model turns and 110 s per reply" in said


def test_a_second_daemon_on_the_same_database_is_refused(env: dict[str, str], tmp_path: Path) -> None:
    with InstanceLock(tmp_path / "relay.db"):
        result = CliRunner().invoke(app, ["run", "--channel", "console"], input="hello\n", env=env)
    assert result.exit_code == 1
    assert "Another apple-flow daemon" in result.output and "APPLE_FLOW_DB_PATH" in result.output


def test_a_database_folder_that_cannot_be_made_is_a_clear_error(env: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("not a folder")
    env["APPLE_FLOW_DB_PATH"] = str(tmp_path / "a-file" / "relay.db")
    result = CliRunner().invoke(app, ["run", "--channel", "console"], input="hello\n", env=env)
    assert result.exit_code == 1
    assert result.exception is None or isinstance(result.exception, SystemExit)  # no traceback
    assert "a-file" in result.output and "APPLE_FLOW_DB_PATH" in result.output


def test_a_bad_setting_is_named_with_exit_2(env: dict[str, str]) -> None:
    env["APPLE_FLOW_MAX_CONCURRENT_AI_CALLS"] = "zero"
    result = CliRunner().invoke(app, ["run", "--channel", "console"], input="hello\n", env=env)
    assert result.exit_code == 2
    assert "APPLE_FLOW_MAX_CONCURRENT_AI_CALLS" in result.output


def test_console_ingress_numbers_lines_and_skips_blank_ones() -> None:
    ingress = ConsoleIngress.from_stream(io.StringIO("a\n\nb\nc\n"))
    messages = list(ingress.messages(0, threading.Event()))
    assert [(m.rowid, m.sender, m.text) for m in messages] == [(1, "console", "a"), (3, "console", "b"),
                                                               (4, "console", "c")]
    assert [m.text for m in ConsoleIngress.from_stream(io.StringIO("a\nb\n")).messages(1, threading.Event())] == ["b"]


def test_plain_egress_keeps_replies_on_stdout_and_progress_on_stderr() -> None:
    out, err = io.StringIO(), io.StringIO()
    egress = PlainConsoleEgress(out, err)
    egress.send("console", "two\nlines\n")
    egress.send_progress("console", "… readFile a.py")
    assert out.getvalue() == "two\nlines\n\n"
    assert err.getvalue() == "… readFile a.py\n"


def test_chat_renders_replies_in_a_panel_and_exits_0_at_end_of_input(env: dict[str, str]) -> None:
    result = CliRunner().invoke(app, ["chat"], input="hello\nhelp\n", env=env)
    assert result.exit_code == 0, result.output
    assert "apple-flow" in result.stdout and "echo: hello" in result.stdout
    assert "╭" in result.stdout  # the rich panel
    assert "• task: WORK" in result.stdout  # help as a rendered Markdown list


def test_an_imessage_daemon_with_no_allowed_senders_says_it_will_answer_nobody(tmp_path: Path) -> None:
    settings = load_settings(env_file=None, db_path=tmp_path / "relay.db")
    (warning,) = startup_warnings(settings, channels.entry("imessage"))
    assert "APPLE_FLOW_ALLOWED_SENDERS is empty" in warning
    assert startup_warnings(settings, channels.entry("console")) == []  # the console user needs no allowlist entry
    allowed = load_settings(env_file=None, allowed_senders="+15551234567")
    assert startup_warnings(allowed, channels.entry("imessage")) == []
