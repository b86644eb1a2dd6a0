"""`apple-flow service ...` against a fake `launchctl` on PATH that records its argv and keeps a job table like
launchd (tests/support/fake_launchctl.py); on Linux the commands print the systemd user unit."""

from __future__ import annotations

import os
import plistlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from typer.testing import CliRunner

from apple_flow import host
from apple_flow.channels.imessage.chatdb import python_binary
from apple_flow.cli import app
from apple_flow.cli import service as service_cli
from apple_flow.daemon import service as launchd_module
from apple_flow.paths import PROJECT_ROOT
from support.chatdb import ChatDbWriter
from support.daemon_process import wait_for
from support.fake_launchctl import FakeLaunchctl
from support.fake_osascript import FakeOsascript


@pytest.fixture
def launchctl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLaunchctl]:
    fake = FakeLaunchctl(tmp_path, monkeypatch)
    monkeypatch.setattr(launchd_module, "POLL_SECONDS", 0.05)
    yield fake
    fake.kill_all()


@pytest.fixture
def mac(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, launchctl: FakeLaunchctl) -> dict[str, Any]:
    project = tmp_path / "project"
    project.mkdir()
    (project / ".env").write_text("APPLE_FLOW_ALLOWED_SENDERS=+15551234567\nAPPLE_FLOW_AFM_BACKEND=fm\n")
    apple_code = tmp_path / "tools" / "apple-code"
    apple_code.parent.mkdir()
    apple_code.write_text("#!/bin/sh\n")
    apple_code.chmod(0o755)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("APPLE_FLOW_LOG_DIR", str(tmp_path / "logs"))
    monkeypatch.setenv("APPLE_FLOW_AFM_COMMAND", str(apple_code))
    monkeypatch.chdir(project)
    monkeypatch.setattr(host, "is_macos", lambda: True)
    monkeypatch.setattr(service_cli, "REPORT_WAIT_SECONDS", 0)  # no daemon runs unless a test starts one
    return {"launchctl": launchctl, "home": tmp_path / "home", "project": project, "apple_code": apple_code,
            "logs": tmp_path / "logs"}


def test_install_takes_its_settings_from_the_given_env_file(mac: dict[str, Any], tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "site.env").write_text("APPLE_FLOW_SERVICE_LABEL=com.example.site\n")
    result = CliRunner().invoke(app, ["service", "install", "--env-file", str(other / "site.env")])
    assert result.exit_code == 0, result.output
    plist_path = mac["home"] / "Library" / "LaunchAgents" / "com.example.site.plist"
    plist = plistlib.loads(plist_path.read_bytes())
    assert plist["Label"] == "com.example.site" and plist["WorkingDirectory"] == str(other.resolve())


def test_install_writes_the_plist_and_bootstraps_it(mac: dict[str, Any]) -> None:
    result = CliRunner().invoke(app, ["service", "install"])
    assert result.exit_code == 0, result.output
    plist_path = mac["home"] / "Library" / "LaunchAgents" / "com.apple-flow.daemon.plist"
    plist = plistlib.loads(plist_path.read_bytes())
    uid = os.getuid()
    assert mac["launchctl"].calls() == [
        f"bootout gui/{uid}/com.apple-flow.daemon",  # exit 3: not loaded, nothing to wait for
        f"bootstrap gui/{uid} {plist_path}",
    ]
    assert plist["Label"] == "com.apple-flow.daemon"
    assert plist["ProgramArguments"] == [sys.executable, "-m", "apple_flow", "run", "--channel", "imessage"]
    assert plist["RunAtLoad"] is True and plist["KeepAlive"] is True
    assert plist["WorkingDirectory"] == str(mac["project"].resolve())
    assert plist["StandardErrorPath"] == str(mac["logs"] / "daemon.err.log")
    assert plist["StandardOutPath"] == str(mac["logs"] / "daemon.out.log")
    env = plist["EnvironmentVariables"]
    path = env["PATH"].split(":")
    assert path[0] == str(mac["apple_code"].parent) and "/usr/bin" in path
    assert env["APPLE_FLOW_ALLOWED_SENDERS"] == "+15551234567" and env["APPLE_FLOW_AFM_BACKEND"] == "fm"
    assert mac["logs"].is_dir()


def test_reinstall_waits_until_the_old_job_has_left_the_domain(mac: dict[str, Any]) -> None:
    # launchd removes a booted-out job in the background (~5 s on macOS 26.5); a bootstrap meanwhile fails with 5.
    launchctl = mac["launchctl"]
    assert CliRunner().invoke(app, ["service", "install"]).exit_code == 0
    launchctl.configure(linger=3)
    launchctl.clear_calls()
    result = CliRunner().invoke(app, ["service", "install"])
    assert result.exit_code == 0, result.output
    target = f"gui/{os.getuid()}/com.apple-flow.daemon"
    assert launchctl.calls()[:5] == [f"bootout {target}", *[f"print {target}"] * 4]
    assert launchctl.verbs()[5:] == ["bootstrap"]
    assert target in launchctl.jobs()


def test_a_job_that_never_leaves_is_reported_after_a_bounded_wait(
    mac: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(launchd_module, "LEAVE_TIMEOUT_SECONDS", 1.0)
    assert CliRunner().invoke(app, ["service", "install"]).exit_code == 0
    mac["launchctl"].configure(linger=10**6)
    mac["launchctl"].clear_calls()
    result = CliRunner().invoke(app, ["service", "install"])
    assert result.exit_code == 1
    assert "still in the launchd domain after 1 s" in result.output
    assert "bootstrap" not in mac["launchctl"].verbs()


@pytest.mark.parametrize("code", [5, 37])
def test_bootstrap_is_retried_on_errors_5_and_37(mac: dict[str, Any], code: int) -> None:
    mac["launchctl"].configure(busy=2, busy_code=code)
    result = CliRunner().invoke(app, ["service", "install"])
    assert result.exit_code == 0, result.output
    assert mac["launchctl"].verbs() == ["bootout", "bootstrap", "bootstrap", "bootstrap"]


def test_bootstrap_gives_up_after_a_bounded_time_and_other_errors_at_once(
    mac: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(launchd_module, "BOOTSTRAP_RETRY_SECONDS", 3.0)
    mac["launchctl"].configure(busy=10**6, busy_code=37)
    result = CliRunner().invoke(app, ["service", "install"])
    assert result.exit_code == 1
    assert "exit 37" in result.output and "Operation already in progress" in result.output
    assert 2 <= mac["launchctl"].verbs().count("bootstrap") < 100

    mac["launchctl"].clear_calls()
    mac["launchctl"].configure(busy=1, busy_code=1)  # e.g. "1: Operation not permitted": retrying cannot help
    failed = CliRunner().invoke(app, ["service", "install"])
    assert failed.exit_code == 1 and "exit 1" in failed.output
    assert mac["launchctl"].verbs().count("bootstrap") == 1


def test_the_plist_holding_env_values_is_private(mac: dict[str, Any]) -> None:
    plist_path = mac["home"] / "Library" / "LaunchAgents" / "com.apple-flow.daemon.plist"
    plist_path.parent.mkdir(parents=True)
    plist_path.write_text("old")
    plist_path.chmod(0o644)
    old_umask = os.umask(0o022)
    try:
        result = CliRunner().invoke(app, ["service", "install"])
    finally:
        os.umask(old_umask)
    assert result.exit_code == 0, result.output
    assert plist_path.stat().st_mode & 0o777 == 0o600
    assert plistlib.loads(plist_path.read_bytes())["EnvironmentVariables"]["APPLE_FLOW_ALLOWED_SENDERS"]
    assert list(plist_path.parent.iterdir()) == [plist_path]  # no temporary file left beside it


def test_status_restart_uninstall(mac: dict[str, Any]) -> None:
    runner = CliRunner()
    assert runner.invoke(app, ["service", "status"]).exit_code == 1
    runner.invoke(app, ["service", "install"])
    status = runner.invoke(app, ["service", "status"])
    assert status.exit_code == 0 and "running, pid 4242" in status.stdout
    mac["launchctl"].clear_calls()
    assert runner.invoke(app, ["service", "restart"]).exit_code == 0
    assert mac["launchctl"].calls() == [f"kickstart -k gui/{os.getuid()}/com.apple-flow.daemon"]
    mac["launchctl"].clear_calls()
    assert runner.invoke(app, ["service", "uninstall"]).exit_code == 0
    assert mac["launchctl"].verbs() == ["bootout", "print"]
    assert not (mac["home"] / "Library" / "LaunchAgents" / "com.apple-flow.daemon.plist").exists()
    again = runner.invoke(app, ["service", "uninstall"])
    assert again.exit_code == 0 and "not installed" in again.output


def test_a_launchctl_failure_is_reported_with_its_output(mac: dict[str, Any]) -> None:
    result = CliRunner().invoke(app, ["service", "restart"])
    assert result.exit_code == 1
    assert "launchctl kickstart -k" in result.output and "exit 113" in result.output


def test_logs_show_the_end_of_each_log(mac: dict[str, Any]) -> None:
    runner = CliRunner()
    assert runner.invoke(app, ["service", "logs"]).exit_code == 1
    mac["logs"].mkdir()
    (mac["logs"] / "daemon.err.log").write_text("".join(f"line {i}\n" for i in range(100)))
    result = runner.invoke(app, ["service", "logs", "-n", "3"])
    assert result.exit_code == 0
    assert result.stdout.splitlines()[1:] == ["line 97", "line 98", "line 99"]


def test_on_linux_the_commands_print_the_systemd_unit(
    mac: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(host, "is_macos", lambda: False)
    for command in ("install", "uninstall", "status", "restart"):
        result = CliRunner().invoke(app, ["service", command])
        assert result.exit_code == 1
        assert "macOS-only" in result.stderr
        unit = result.stdout
        assert f"ExecStart={sys.executable} -m apple_flow run --channel imessage" in unit
        assert f"EnvironmentFile=-{mac['project'].resolve() / '.env'}" in unit
        assert "Restart=always" in unit and "WantedBy=default.target" in unit
    assert mac["launchctl"].calls() == []


def test_install_has_the_service_check_its_permissions_at_once_and_says_what_to_allow(
    mac: dict[str, Any], tmp_path: Path, chat_db: ChatDbWriter, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The fake launchd really starts the job (its ProgramArguments, the plist's environment only), so what is
    # checked is the service's own view: its Automation probe, its chat.db read, its report.
    mac["launchctl"].configure(run=True)
    osascript_dir = tmp_path / "osascript"
    osascript_dir.mkdir()
    osascript = FakeOsascript(osascript_dir, monkeypatch)
    chat_db.message("hi", sender="+15551234567")
    state = tmp_path / "state" / "relay.db"
    (mac["project"] / ".env").write_text(
        "APPLE_FLOW_ALLOWED_SENDERS=+15551234567\n"
        f"APPLE_FLOW_MESSAGES_DB_PATH={chat_db.path}\n"
        f"APPLE_FLOW_DB_PATH={state}\n"
        f"APPLE_FLOW_OSASCRIPT_COMMAND={osascript.path}\n"
        f"APPLE_FLOW_AFM_COMMAND={tmp_path / 'no-apple-code'}\n"
        "APPLE_FLOW_POLL_INTERVAL_SECONDS=0.2\n"
        f"FAKE_OSASCRIPT_LOG={osascript.log}\n"
        "FAKE_OSASCRIPT_MODE=deny\n"
        f"PYTHONPATH={PROJECT_ROOT / 'src'}\n"
    )
    monkeypatch.setenv("APPLE_FLOW_AFM_COMMAND", str(tmp_path / "no-apple-code"))
    python = str(python_binary())

    result = CliRunner().invoke(app, ["service", "install", "--wait", "60"])
    assert result.exit_code == 0, result.output
    output = " ".join(result.output.split())
    assert f"The service runs as {python}" in output
    assert "Messages (Automation): macOS asks now whether" in output and "click Allow" in output
    assert "System Settings > Privacy & Security > Full Disk Access" in output
    assert f"chat.db (Full Disk Access): ok: {chat_db.path} readable by {python}" in output
    assert f"Messages (Automation): denied: {python} is not allowed to control Messages" in output
    assert f"switch on Messages under {python} in System Settings > Privacy & Security > Automation" in output
    probe = osascript.calls()[0]
    assert probe["argv"] == ["-"] and "get id of 1st account whose service type = iMessage" in probe["stdin"]

    status = CliRunner().invoke(app, ["service", "status"])
    assert status.exit_code == 3, status.output  # running, but it cannot send
    shown = " ".join(status.output.split())
    assert "state = running" not in shown and ": running, pid" in shown
    assert f"Permissions of {python} (this service process" in shown
    assert "Messages (Automation): denied" in shown and "chat.db (Full Disk Access): ok" in shown

    pid = next(iter(mac["launchctl"].jobs().values()))["pid"]
    assert CliRunner().invoke(app, ["service", "uninstall"]).exit_code == 0
    wait_for(lambda: not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE, 20,
             "the service to stop")


def test_install_says_when_the_service_has_not_reported_in_time(mac: dict[str, Any]) -> None:
    result = CliRunner().invoke(app, ["service", "install", "--wait", "0.5"])
    assert result.exit_code == 0, result.output
    assert "has not reported its permissions yet" in " ".join(result.output.split())
    assert "apple-flow service status" in result.output
