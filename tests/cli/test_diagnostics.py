"""`apple-flow doctor`, `inbox`, `send`, `config` on Linux against real-schema databases (macOS-only checks are
reported as not applicable; the macOS paths run with a fake osascript)."""

from __future__ import annotations

import json
import os
import plistlib
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from apple_flow import host
from apple_flow.channels.imessage.chatdb import python_binary
from apple_flow.cli import app, diagnostics
from apple_flow.config import Settings, load_settings
from apple_flow.daemon.store import Store
from apple_flow.health import doctor
from apple_flow.paths import PROJECT_ROOT
from support.chatdb import ChatDbWriter, make_body
from support.daemon_process import wait_for
from support.fake_launchctl import FakeLaunchctl
from support.fake_osascript import FakeOsascript
from support.scripted_server import MODEL_ID, ScriptedServer


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.chdir(tmp_path)  # no stray .env
    for name in ("APPLE_FLOW_ALLOWED_SENDERS", "APPLE_FLOW_MESSAGES_DB_PATH", "APPLE_FLOW_AFM_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("COLUMNS", "250")
    monkeypatch.setenv("APPLE_FLOW_AFM_COMMAND", str(tmp_path / "no-apple-code"))
    monkeypatch.setattr(host, "is_macos", lambda: False)
    runner = CliRunner()

    def invoke(*args: str) -> Any:
        return runner.invoke(app, list(args))

    return invoke


@pytest.fixture
def inbox_db(chat_db: ChatDbWriter) -> ChatDbWriter:
    chat_db.message("please fix the tests 👋🏽", sender="+1 (555) 123-4567")
    chat_db.message(None, body=make_body("中文 𝐁 café"), sender="stranger@example.com")
    chat_db.message("my reply", is_from_me=True)
    chat_db.message('Loved "please fix"', associated_message_type=2000)
    chat_db.message(None, body=b"\xff\xfe garbage")
    return chat_db


def test_inbox_json_lists_what_the_daemon_sees(cli: Any, inbox_db: ChatDbWriter, monkeypatch: Any) -> None:
    monkeypatch.setenv("APPLE_FLOW_ALLOWED_SENDERS", "15551234567")
    result = cli("inbox", "--db", str(inbox_db.path), "--json")
    assert result.exit_code == 0, result.output
    listing = json.loads(result.stdout)
    assert [(e["rowid"], e["sender"], e["skipped"], e["allowed"]) for e in listing] == [
        (1, "+15551234567", None, True),
        (2, "stranger@example.com", None, False),
        (3, "+15551234567", "from me", True),
        (4, "+15551234567", "reaction", True),
        (5, "+15551234567", "undecodable body", True),
    ]
    assert listing[0]["text"] == "please fix the tests 👋🏽" and listing[0]["reply_to"] == "+15551234567"
    assert listing[1]["text"] == "中文 𝐁 café"


def test_inbox_lists_rows_it_cannot_use_with_the_reason_and_no_traceback(cli: Any, chat_db: ChatDbWriter) -> None:
    text_row = chat_db.message("placeholder")
    chat_db.set_raw("message", "text", text_row, b"hi \xed\xa0\x80", as_text=True)
    number_row = chat_db.message("odd row")
    chat_db.set_raw("message", "item_type", number_row, "banana")
    chat_db.message("fine")
    result = cli("inbox", "--db", str(chat_db.path), "--json")
    assert result.exit_code == 0, result.output
    listing = json.loads(result.stdout)
    assert [(e["rowid"], e["text"], e["skipped"]) for e in listing] == [
        (text_row, "hi \ufffd", None),
        (number_row, "odd row", "item_type is 'banana', not an integer"),
        (number_row + 1, "fine", None),
    ]
    table = cli("inbox", "--db", str(chat_db.path))
    assert table.exit_code == 0 and "Traceback" not in table.output
    assert "skipped: item_type is 'banana', not an integer" in table.stdout


def test_inbox_limit_and_table(cli: Any, inbox_db: ChatDbWriter) -> None:
    result = cli("inbox", "--db", str(inbox_db.path), "--limit", "2")
    assert result.exit_code == 0, result.output
    assert "skipped: reaction" in result.stdout and "skipped: undecodable body" in result.stdout
    assert "please fix the tests" not in result.stdout  # only the newest two


def test_inbox_on_a_missing_database_says_what_to_do(cli: Any, tmp_path: Path) -> None:
    result = cli("inbox", "--db", str(tmp_path / "nope" / "chat.db"))
    assert result.exit_code == 1
    assert "does not exist" in result.output and "APPLE_FLOW_MESSAGES_DB_PATH" in result.output


def test_doctor_on_linux_reports_macos_checks_as_not_applicable(
    cli: Any, inbox_db: ChatDbWriter, monkeypatch: Any
) -> None:
    monkeypatch.setenv("APPLE_FLOW_ALLOWED_SENDERS", "+1 (555) 123-4567")
    result = cli("doctor", "--db", str(inbox_db.path))
    lines = {line.split("│")[1].strip(): line for line in result.stdout.splitlines() if line.count("│") >= 3}
    assert "ok" in lines["settings"] and "ok" in lines["chat.db"] and "rowid 5" in lines["chat.db"]
    assert "n/a" in lines["Full Disk Access"] and "n/a" in lines["Messages automation"]
    assert "ok" in lines["new-message pickup"] and "file events" in lines["new-message pickup"]
    assert "ok" in lines["allowed senders"] and "+15551234567" in lines["allowed senders"]
    assert "FAIL" in lines["agent (afm)"] and "no-apple-code" in result.stdout and "setup.sh" in result.stdout
    assert result.exit_code == 1  # the missing agent binary
    assert "1 check(s) failed: agent (afm)" in result.output


def test_doctor_counts_the_sms_messages_the_daemon_did_not_act_on(
    cli: Any, inbox_db: ChatDbWriter, monkeypatch: Any, tmp_path: Path
) -> None:
    monkeypatch.setenv("APPLE_FLOW_DB_PATH", str(tmp_path / "state" / "relay.db"))
    fresh = cli("doctor", "--db", str(inbox_db.path))
    assert "none refused" in fresh.stdout
    assert not (tmp_path / "state").exists()  # the doctor creates no database
    store = Store(tmp_path / "state" / "relay.db")
    store.events.log("sms_refused", "SMS, not iMessage: its sender can be forged", "+15551234567")
    store.close()
    result = cli("doctor", "--db", str(inbox_db.path))
    assert "Not acted on: 1 SMS/RCS message" in result.stdout and "APPLE_FLOW_ALLOW_SMS" in result.stdout


def test_doctor_checks_the_workspaces(cli: Any, inbox_db: ChatDbWriter, monkeypatch: Any, tmp_path: Path) -> None:
    inside = tmp_path / "allowed" / "site"
    inside.mkdir(parents=True)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    monkeypatch.setenv("APPLE_FLOW_ALLOWED_WORKSPACES", str(tmp_path / "allowed"))
    monkeypatch.setenv("APPLE_FLOW_DEFAULT_WORKSPACE", str(inside))
    monkeypatch.setenv("APPLE_FLOW_WORKSPACE_ALIASES", json.dumps({"site": str(inside)}))
    good = cli("doctor", "--db", str(inbox_db.path))
    assert "@site" in good.stdout and "points outside" not in good.stdout
    monkeypatch.setenv("APPLE_FLOW_WORKSPACE_ALIASES", json.dumps({"site": str(inside), "out": str(outside)}))
    warned = cli("doctor", "--db", str(inbox_db.path))
    assert "@out points outside the allowed workspaces" in warned.stdout
    monkeypatch.setenv("APPLE_FLOW_DEFAULT_WORKSPACE", str(tmp_path / "gone"))
    failed = cli("doctor", "--db", str(inbox_db.path))
    assert failed.exit_code == 1 and "workspaces" in failed.output
    assert "APPLE_FLOW_DEFAULT_WORKSPACE" in failed.stdout


def test_doctor_fails_an_empty_allowlist_and_invalid_settings_with_fixes(cli: Any, monkeypatch: Any) -> None:
    monkeypatch.setenv("APPLE_FLOW_POLL_INTERVAL_SECONDS", "-1")
    result = cli("doctor")
    assert result.exit_code == 1
    assert "APPLE_FLOW_POLL_INTERVAL_SECONDS" in result.stdout
    assert "set APPLE_FLOW_ALLOWED_SENDERS=" in result.stdout
    assert "not on macOS" in result.stdout  # the default chat.db path, not given and not here
    assert "no chat.db here" in result.stdout


def test_doctor_on_macos_checks_automation_and_names_full_disk_access_problems(
    cli: Any, inbox_db: ChatDbWriter, fake_osascript: FakeOsascript, monkeypatch: Any
) -> None:
    monkeypatch.setattr(host, "is_macos", lambda: True)
    fake_osascript.mode("deny")
    result = cli("doctor", "--db", str(inbox_db.path))
    assert "Messages automation" in result.stdout and "Privacy & Security > Automation" in result.stdout
    (call,) = fake_osascript.calls()
    assert call["argv"] == ["-"] and "get id of 1st account whose service type = iMessage" in call["stdin"]

    fake_osascript.mode("ok")
    missing = cli("doctor", "--db", str(inbox_db.path.parent / "nowhere" / "chat.db"))
    assert "cannot tell until chat.db exists" in missing.stdout
    assert "only the poll every" in missing.stdout  # its folder does not exist either


def test_send_goes_through_the_egress_and_says_what_chat_db_shows(
    cli: Any, fake_osascript: FakeOsascript, chat_db: ChatDbWriter, monkeypatch: Any
) -> None:
    monkeypatch.setenv("APPLE_FLOW_MESSAGES_DB_PATH", str(chat_db.path))
    monkeypatch.setenv("APPLE_FLOW_SEND_CONFIRM_SECONDS", "1")
    result = cli("send", "(555) 123-4567", 'hi " & (do shell script "id") & "')
    assert result.exit_code == 0, result.output
    assert [c["argv"] for c in fake_osascript.calls()] == [["-", "+15551234567", 'hi " & (do shell script "id") & "']]
    assert "Sent to +15551234567: Messages shows it as sent" in " ".join(result.output.split())

    fake_osascript.rows("error")
    failed = cli("send", "+15551234567", "again")
    assert failed.exit_code == 1
    assert "Not delivered: Messages could not send it (chat.db row" in " ".join(failed.output.split())


@pytest.mark.parametrize(("handle", "text", "empty"), [("", "hello", "HANDLE"), ("+15551234567", "  ", "TEXT")])
def test_send_refuses_an_empty_handle_or_text(
    cli: Any, fake_osascript: FakeOsascript, handle: str, text: str, empty: str
) -> None:
    result = cli("send", handle, text)
    assert result.exit_code == 2
    assert f"{empty} is empty: nothing was sent" in result.output and "Sent" not in result.output
    assert fake_osascript.calls() == []


def test_send_without_osascript_is_not_applicable_here(cli: Any, monkeypatch: Any) -> None:
    monkeypatch.setenv("APPLE_FLOW_OSASCRIPT_COMMAND", "no-such-osascript-here")
    result = cli("send", "+15551234567", "hello")
    assert result.exit_code == 1
    assert "not applicable" in result.output and "needs macOS" in result.output


def test_config_prints_effective_settings_with_secrets_masked(cli: Any, monkeypatch: Any) -> None:
    monkeypatch.setenv("APPLE_FLOW_AFM_BASE_URL", "http://me:hunter2@127.0.0.1:11434/v1")
    monkeypatch.setenv("APPLE_FLOW_REPLY_CHUNK_CHARS", "900")
    result = cli("config", "--json")
    assert result.exit_code == 0, result.output
    values = json.loads(result.stdout)
    assert values["reply_chunk_chars"] == 900
    assert values["afm_base_url"] == "http://me:********@127.0.0.1:11434/v1"
    assert "hunter2" not in result.stdout
    table = cli("config")
    assert "APPLE_FLOW_REPLY_CHUNK_CHARS" in table.stdout and "hunter2" not in table.stdout


def test_secret_named_settings_are_masked() -> None:
    class WithToken(Settings):
        api_token: str = "s3cret"

    assert diagnostics.masked_settings(WithToken(_env_file=None))["api_token"] == "********"  # type: ignore[call-arg]


DoctorUpAndDown = Callable[..., tuple[Any, Any]]


@pytest.fixture
def doctor_up_and_down(cli: Any, inbox_db: ChatDbWriter, apple_code_bin: Path, monkeypatch: Any) -> DoctorUpAndDown:
    """`apple-flow doctor` with the real apple-code and the given settings, run twice: with the setting named
    (the agent's base URL) pointing at a scripted server (the doctor must pass), then at a port where nothing
    listens. Returns both results."""
    monkeypatch.setenv("APPLE_FLOW_ALLOWED_SENDERS", "+15551234567")
    monkeypatch.setenv("APPLE_FLOW_AFM_COMMAND", str(apple_code_bin))

    def run(base_url_setting: str, **settings: str) -> tuple[Any, Any]:
        for name, value in settings.items():
            monkeypatch.setenv(name, value)
        with ScriptedServer([]) as server:
            monkeypatch.setenv(base_url_setting, server.url)
            up = cli("doctor", "--db", str(inbox_db.path), "--no-sandbox-check")  # that one has a test of its own
        assert up.exit_code == 0, up.output
        monkeypatch.setenv(base_url_setting, "http://127.0.0.1:9/v1")  # nothing listens there
        return up, cli("doctor", "--db", str(inbox_db.path), "--no-sandbox-check")

    return run


def test_doctor_runs_the_real_apple_code_check_against_a_server(doctor_up_and_down: DoctorUpAndDown) -> None:
    up, down = doctor_up_and_down("APPLE_FLOW_AFM_BASE_URL", APPLE_FLOW_AFM_BACKEND="openai",
                                  APPLE_FLOW_AFM_MODEL=MODEL_ID)
    assert "--check passed" in up.stdout and "All checks passed" in up.output

    assert down.exit_code == 1
    assert "no model available" in down.stdout and "cannot connect" in down.stdout
    assert "setup.sh" not in down.stdout  # the binary is there: building it again is no fix


@pytest.mark.skipif(sys.platform != "linux", reason="bwrap; on a Mac scripts/check-macos.sh runs it")
def test_doctor_runs_apple_codes_sandbox_check_with_what_the_daemon_hides(
    cli: Any, inbox_db: ChatDbWriter, apple_code_bin: Path, monkeypatch: Any, tmp_path: Path
) -> None:
    """The doctor shows `apple-code --sandbox-check`, run with the daemon's --hide and --deny-port, so the owner sees
    that a command the agent runs cannot reach the daemon's secrets on this machine (the swift build check is left
    out here: no swift on PATH)."""
    monkeypatch.setenv("APPLE_FLOW_AFM_COMMAND", str(apple_code_bin))
    monkeypatch.setenv("APPLE_FLOW_ALLOWED_SENDERS", "+15551234567")
    monkeypatch.setenv("APPLE_FLOW_DB_PATH", str(tmp_path / "state" / "relay.db"))
    monkeypatch.setenv("PATH", os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep)
                                               if not (Path(p) / "swift").exists()))
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "relay.db").write_text("db")
    (tmp_path / ".env").write_text("APPLE_FLOW_WEB_TOKEN=secret-token-0123456789\n")
    row = table_rows(cli("doctor", "--db", str(inbox_db.path)).stdout)["command sandbox"]
    assert "ok" in row and "bwrap" in row and "checks passed" in row and "not for this system" in row
    skipped = table_rows(cli("doctor", "--db", str(inbox_db.path), "--no-sandbox-check").stdout)
    assert "command sandbox" not in skipped
    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap: the doctor says so and how to fix it
    row = table_rows(cli("doctor", "--db", str(inbox_db.path)).stdout)["command sandbox"]
    assert "FAIL" in row and "bwrap not installed" in row


def table_rows(stdout: str) -> dict[str, str]:
    """The doctor's table as {check: its whole row}, continuation lines (an empty first cell) joined."""
    rows: dict[str, str] = {}
    last = ""
    for line in stdout.splitlines():
        cells = line.split("│")
        if len(cells) < 4:
            continue
        name = cells[1].strip()
        text = " ".join(cell.strip() for cell in cells[2:])
        if name:
            last = name
            rows[name] = text
        elif last:
            rows[last] += " " + text
    return {name: " ".join(text.split()) for name, text in rows.items()}


def test_doctor_says_which_app_each_permission_result_applies_to(
    cli: Any, inbox_db: ChatDbWriter, fake_osascript: FakeOsascript, monkeypatch: Any
) -> None:
    monkeypatch.setattr(host, "is_macos", lambda: True)
    monkeypatch.delenv("__CFBundleIdentifier", raising=False)
    monkeypatch.setenv("TERM_PROGRAM", "Apple_Terminal")
    fake_osascript.mode("deny")
    rows = table_rows(cli("doctor", "--db", str(inbox_db.path)).stdout)
    assert "Terminal is not allowed to control Messages" in rows["Messages automation"]
    assert "switch on Messages under Terminal" in rows["Messages automation"]
    assert "granted to Terminal (the app this command runs in;" in rows["Full Disk Access"]
    assert "the service is checked as itself" in rows["Full Disk Access"]

    monkeypatch.delenv("TERM_PROGRAM")  # e.g. over ssh, or the daemon itself under launchd
    rows = table_rows(cli("doctor", "--db", str(inbox_db.path)).stdout)
    assert f"{python_binary()} is not allowed to control Messages" in rows["Messages automation"]


def test_doctor_shows_what_the_daemon_reported_about_its_own_permissions(
    cli: Any, inbox_db: ChatDbWriter, fake_osascript: FakeOsascript, monkeypatch: Any, tmp_path: Path
) -> None:
    from apple_flow.channels.imessage.permissions import PermissionMonitor, Responsible, read_report
    from apple_flow.daemon.store import Store

    monkeypatch.setattr(host, "is_macos", lambda: True)
    state = tmp_path / "state" / "relay.db"
    monkeypatch.setenv("APPLE_FLOW_DB_PATH", str(state))
    assert "no daemon has reported" in table_rows(cli("doctor", "--db", str(inbox_db.path)).stdout)["service"]

    fake_osascript.mode("deny")
    store = Store(state)
    settings = load_settings(env_file=None, messages_db_path=inbox_db.path)
    monitor = PermissionMonitor(settings, store.meta, app=Responsible("/venv/bin/python3.12", terminal=False))
    monitor.start()
    wait_for(lambda: (r := read_report(state)) and r.settled, 10, "the daemon's report")
    monitor.close()
    store.close()
    row = table_rows(cli("doctor", "--db", str(inbox_db.path)).stdout)["service"]
    assert "warn" in row and "the daemon (pid" in row and "as /venv/bin/python3.12" in row
    assert "Messages (Automation): denied" in row


def test_doctor_checks_the_ollama_preset_with_the_real_apple_code(doctor_up_and_down: DoctorUpAndDown) -> None:
    up, down = doctor_up_and_down("APPLE_FLOW_OLLAMA_BASE_URL", APPLE_FLOW_CONNECTOR="ollama",
                                  APPLE_FLOW_OLLAMA_MODEL=MODEL_ID)
    assert "--check passed" in table_rows(up.stdout)["agent (ollama)"]

    row = table_rows(down.stdout)["agent (ollama)"]  # no Ollama there
    assert "FAIL" in row and "ollama serve" in row and f"ollama pull {MODEL_ID}" in row


def test_doctor_says_how_to_install_a_missing_gemini_cli(cli: Any, inbox_db: ChatDbWriter, monkeypatch: Any,
                                                          tmp_path: Path) -> None:
    monkeypatch.setenv("APPLE_FLOW_ALLOWED_SENDERS", "+15551234567")
    monkeypatch.setenv("APPLE_FLOW_CONNECTOR", "gemini-cli")
    monkeypatch.setenv("APPLE_FLOW_GEMINI_COMMAND", str(tmp_path / "no-gemini"))
    row = table_rows(cli("doctor", "--db", str(inbox_db.path)).stdout)["agent (gemini-cli)"]
    assert "FAIL" in row and "Gemini CLI not found" in row and "npm install -g @google/gemini-cli" in row


@pytest.mark.parametrize(
    ("connector", "variable", "install"),
    [("cline", "APPLE_FLOW_CLINE_COMMAND", "npm install -g cline"),
     ("kilo-cli", "APPLE_FLOW_KILO_COMMAND", "npm install -g @kilocode/cli")],
)
def test_doctor_says_how_to_install_a_missing_cline_or_kilo(
    cli: Any, inbox_db: ChatDbWriter, monkeypatch: Any, tmp_path: Path, connector: str, variable: str, install: str
) -> None:
    monkeypatch.setenv("APPLE_FLOW_ALLOWED_SENDERS", "+15551234567")
    monkeypatch.setenv("APPLE_FLOW_CONNECTOR", connector)
    monkeypatch.setenv(variable, str(tmp_path / "not-installed"))
    row = table_rows(cli("doctor", "--db", str(inbox_db.path)).stdout)[f"agent ({connector})"]
    assert "FAIL" in row and "CLI not found" in row and install in row


def test_only_a_missing_agent_binary_counts_as_missing(
    connector_settings: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The probe asks the connector's error what went wrong; it does not look for words in the message (a model
    that is 'not found' is no missing binary: set-up would offer to build apple-code again)."""
    monkeypatch.setenv("FAKE_APPLE_CODE_MODE", "unavailable")
    monkeypatch.setenv("FAKE_APPLE_CODE_REASON", "the model file was not found")
    no_model = doctor.probe_agent(connector_settings())
    assert (no_model.ok, no_model.missing) == (False, False)
    assert "no model available" in no_model.detail and "not found" in no_model.detail
    missing = doctor.probe_agent(connector_settings(afm_command=str(tmp_path / "nowhere" / "apple-code")))
    assert (missing.ok, missing.missing) == (False, True)
    assert "CLI not found" in missing.detail


def test_doctor_with_the_service_installed_asks_macos_nothing_about_the_terminal_and_checks_the_service(
    cli: Any, fake_osascript: FakeOsascript, monkeypatch: Any, tmp_path: Path
) -> None:
    from apple_flow.channels.imessage.permissions import PermissionMonitor, Responsible

    monkeypatch.setattr(host, "is_macos", lambda: True)
    monkeypatch.setenv("TERM_PROGRAM", "Apple_Terminal")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    plist = tmp_path / "home" / "Library" / "LaunchAgents" / "com.apple-flow.daemon.plist"
    plist.parent.mkdir(parents=True)
    plist.write_bytes(plistlib.dumps({"Label": "com.apple-flow.daemon"}))
    FakeLaunchctl(tmp_path, monkeypatch)
    subprocess.run(["launchctl", "bootstrap", f"gui/{os.getuid()}", str(plist)], check=True)
    state = tmp_path / "state" / "relay.db"
    monkeypatch.setenv("APPLE_FLOW_DB_PATH", str(state))
    # The terminal may not read this (it is missing): with a service, the doctor does not try.
    monkeypatch.setenv("APPLE_FLOW_MESSAGES_DB_PATH", str(tmp_path / "Messages" / "chat.db"))
    fake_osascript.mode("deny")

    result = cli("doctor", "--no-sandbox-check")
    rows = table_rows(result.stdout)
    assert fake_osascript.calls() == []  # no Apple event from the terminal: no Automation prompt about Terminal
    for name in ("chat.db", "new-message pickup", "Full Disk Access", "Messages automation"):
        assert rows[name].startswith("n/a the service checks this itself, as Apple Flow"), rows[name]
    assert "Terminal" not in result.stdout
    assert "installed, but the daemon has not reported" in rows["service"]

    # The service's own report decides: Apple Flow without Full Disk Access fails the doctor.
    chat_db = tmp_path / "Messages" / "chat.db"
    store = Store(state)
    settings = load_settings(env_file=None, messages_db_path=chat_db)
    app = Responsible("Apple Flow", terminal=False, app=str(tmp_path / "home" / "Apple Flow.app"))
    monitor = PermissionMonitor(settings, store.meta, app=app)
    monitor.start()
    wait_for(lambda: (r := doctor.read_report(state)) and r.settled, 10, "the service's report")
    monitor.close()
    store.close()
    result = cli("doctor", "--no-sandbox-check")
    row = table_rows(result.stdout)["service"]
    assert row.startswith("FAIL the daemon (pid") and "as Apple Flow" in row
    assert "Messages (Automation): denied" in row and "switch on Messages under Apple Flow" in row
    assert result.exit_code == 1
    assert "Terminal" not in result.stdout


def test_doctor_says_when_the_installed_service_is_switched_off_and_how_to_switch_it_on(
    cli: Any, monkeypatch: Any, tmp_path: Path
) -> None:
    monkeypatch.setattr(host, "is_macos", lambda: True)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    plist = tmp_path / "home" / "Library" / "LaunchAgents" / "com.apple-flow.daemon.plist"
    plist.parent.mkdir(parents=True)
    plist.write_bytes(plistlib.dumps({"Label": "com.apple-flow.daemon"}))
    launchctl = FakeLaunchctl(tmp_path, monkeypatch)
    target = f"gui/{os.getuid()}/com.apple-flow.daemon"
    row = table_rows(cli("doctor", "--no-sandbox-check").stdout)["service"]
    assert row.startswith(f"FAIL installed but not loaded: launchd does not know {target}")
    assert "run `apple-flow service install`" in row

    launchctl.configure(disabled=[target], background_off=True)
    result = cli("doctor", "--no-sandbox-check")
    row = table_rows(result.stdout)["service"]
    assert row.startswith(f"FAIL installed but switched off: launchd keeps {target} disabled, so it never runs")
    assert "switch on \u201cApple Flow\u201d under Allow in the Background" in row
    assert result.exit_code == 1


def test_doctor_says_whether_safari_opens_the_pages_name_and_how_to_make_it(
    cli: Any, monkeypatch: Any, tmp_path: Path
) -> None:
    import socket

    from apple_flow import local_name

    monkeypatch.setattr(host, "is_macos", lambda: True)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("APPLE_FLOW_WEB_ENABLED", "true")

    def macos_resolver(name: str, port: object) -> list[Any]:  # no /etc/hosts line: .localhost names are unknown
        raise socket.gaierror(8, "nodename nor servname provided, or not known")

    monkeypatch.setattr(local_name, "RESOLVE", macos_resolver)
    row = table_rows(cli("doctor", "--no-sandbox-check").stdout)["web page in Safari"]
    assert row == (
        "warn Safari cannot open apple-flow.localhost on this Mac (Chrome and Firefox can) fix: run once in Terminal: "
        "echo '127.0.0.1 apple-flow.localhost' | sudo tee -a /etc/hosts; sudo killall -HUP mDNSResponder"
    )
    monkeypatch.setattr(local_name, "RESOLVE", lambda name, port: [(socket.AF_INET6, 1, 6, "", ("::1", 0, 0, 0))])
    row = table_rows(cli("doctor", "--no-sandbox-check").stdout)["web page in Safari"]
    assert row == "ok apple-flow.localhost resolves on this Mac: Safari opens the page"
    doc = (PROJECT_ROOT / "docs" / "mac-first-run.md").read_text()
    assert local_name.hosts_fix("apple-flow.localhost") in doc and row.removeprefix("ok ") in doc
    monkeypatch.setenv("APPLE_FLOW_WEB_LOCAL_NAME", "")  # served as 127.0.0.1: nothing to resolve
    assert table_rows(cli("doctor", "--no-sandbox-check").stdout)["web page in Safari"].startswith("n/a")
