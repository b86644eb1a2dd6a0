"""`apple-flow service ...` against a fake `launchctl` on PATH that records its argv and keeps a job table like
launchd (tests/support/fake_launchctl.py), and a fake `codesign` (tests/support/fake_codesign.py); the job runs the
real Apple Flow.app launcher. On Linux the commands print the systemd user unit."""

from __future__ import annotations

import hashlib
import json
import os
import plistlib
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from typer.testing import CliRunner

from apple_flow import host
from apple_flow import login_service as launchd_module
from apple_flow.channels.imessage.permissions import read_report
from apple_flow.cli import app
from apple_flow.cli import service as service_cli
from apple_flow.paths import PROJECT_ROOT
from apple_flow.sections import LimitsSettings
from support.chatdb import ChatDbWriter
from support.daemon_process import wait_for
from support.fake_codesign import FakeCodesign
from support.fake_launchctl import FakeLaunchctl
from support.fake_osascript import FakeOsascript
from support.fake_tccutil import FakeTccutil

APP = Path("Library") / "Application Support" / "Apple Flow" / "Apple Flow.app"


@pytest.fixture
def launchctl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLaunchctl]:
    fake = FakeLaunchctl(tmp_path, monkeypatch)
    monkeypatch.setattr(launchd_module, "POLL_SECONDS", 0.05)
    yield fake
    fake.kill_all()


@pytest.fixture
def mac(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, launchctl: FakeLaunchctl, launcher_bin: Path
) -> dict[str, Any]:
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
    codesign = FakeCodesign(tmp_path / "codesign-bin", monkeypatch)
    tccutil = FakeTccutil(tmp_path / "tccutil-bin", monkeypatch)
    return {"launchctl": launchctl, "home": tmp_path / "home", "project": project, "apple_code": apple_code,
            "logs": tmp_path / "logs", "codesign": codesign, "app": tmp_path / "home" / APP, "tccutil": tccutil}


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
        f"enable gui/{uid}/com.apple-flow.daemon",  # a job disabled once stays disabled: bootstrap would fail 5
        f"bootstrap gui/{uid} {plist_path}",
    ]
    assert plist["Label"] == "com.apple-flow.daemon"
    arguments = plist["ProgramArguments"]
    # Apple Flow.app's launcher runs the daemon's Python as its child; the daemon reads the .env itself.
    assert arguments[:-1] == [
        str(mac["app"] / "Contents" / "MacOS" / "Apple Flow"), sys.executable, "-m", "apple_flow", "run",
        "--channel", "imessage", "--env-file", str(mac["project"].resolve() / ".env"), "--service", "--installed-at",
    ]
    assert abs(float(arguments[-1]) - time.time()) < 60
    assert plist["RunAtLoad"] is True and plist["KeepAlive"] is True
    grace = LimitsSettings.model_fields["shutdown_grace_seconds"].default
    assert plist["ExitTimeOut"] == int(grace) + 10  # launchd's SIGKILL comes after the daemon's shutdown grace
    assert plist["WorkingDirectory"] == str(mac["project"].resolve())
    assert plist["StandardErrorPath"] == str(mac["logs"] / "daemon.err.log")
    assert plist["StandardOutPath"] == str(mac["logs"] / "daemon.out.log")
    env = plist["EnvironmentVariables"]
    path = env["PATH"].split(":")
    assert path[0] == str(mac["apple_code"].parent) and "/usr/bin" in path
    # No snapshot of .env: environment values would win over the file at every restart.
    assert set(env) == {"PATH", "PYTHONUNBUFFERED"}
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
    assert launchctl.verbs()[5:] == ["enable", "bootstrap"]
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
    assert mac["launchctl"].verbs() == ["bootout", "enable", "bootstrap", "bootstrap", "bootstrap"]


def test_bootstrap_gives_up_after_a_bounded_time_and_other_errors_at_once(
    mac: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(launchd_module, "BOOTSTRAP_RETRY_SECONDS", 3.0)
    mac["launchctl"].configure(busy=10**6, busy_code=37)
    result = CliRunner().invoke(app, ["service", "install"])
    assert result.exit_code == 1
    assert "exit 37" in result.output and "Operation already in progress" in result.output
    assert "still busy with the old job" in " ".join(result.output.split())
    assert 2 <= mac["launchctl"].verbs().count("bootstrap") < 100

    mac["launchctl"].clear_calls()
    mac["launchctl"].configure(busy=1, busy_code=1)  # e.g. "1: Operation not permitted": retrying cannot help
    failed = CliRunner().invoke(app, ["service", "install"])
    assert failed.exit_code == 1 and "exit 1" in failed.output
    assert mac["launchctl"].verbs().count("bootstrap") == 1


def test_a_disabled_service_is_enabled_before_it_is_bootstrapped(mac: dict[str, Any]) -> None:
    target = f"gui/{os.getuid()}/com.apple-flow.daemon"
    mac["launchctl"].configure(disabled=[target])  # `launchctl disable`, which outlives a bootout
    result = CliRunner().invoke(app, ["service", "install"])
    assert result.exit_code == 0, result.output
    assert mac["launchctl"].verbs() == ["bootout", "enable", "bootstrap"]
    assert target in mac["launchctl"].jobs()


def test_a_lasting_error_5_is_explained_as_the_background_switch_under_login_items(
    mac: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(launchd_module, "BOOTSTRAP_RETRY_SECONDS", 1.0)
    target = f"gui/{os.getuid()}/com.apple-flow.daemon"
    mac["launchctl"].configure(disabled=[target], background_off=True)
    result = CliRunner().invoke(app, ["service", "install"])
    assert result.exit_code == 1
    shown = " ".join(result.output.split())
    assert "Bootstrap failed: 5: Input/output error" in shown
    assert "the service is disabled, or \u201cApple Flow\u201d is switched off under Allow in the Background" in shown
    assert "System Settings > General > Login Items & Extensions" in shown
    assert "plutil" not in shown


def test_the_plist_is_private_and_holds_no_env_value(mac: dict[str, Any]) -> None:
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
    assert "+15551234567" not in plist_path.read_text()
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
    removed = runner.invoke(app, ["service", "uninstall"])
    assert removed.exit_code == 0
    assert "Apple Flow.app stays, with the permissions you gave it" in " ".join(removed.output.split())
    assert mac["app"].is_dir()
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
        "FAKE_OSASCRIPT_MODE=deny\n"  # not a setting: the service puts it in its environment, as a key for an agent
    )
    monkeypatch.setenv("APPLE_FLOW_AFM_COMMAND", str(tmp_path / "no-apple-code"))

    result = CliRunner().invoke(app, ["service", "install", "--wait", "60"])
    assert result.exit_code == 0, result.output
    output = " ".join(result.output.split())
    # macOS holds Apple Flow.app responsible: every line names it, not a Python binary.
    assert "The service runs as Apple Flow: macOS asks about it" in output
    assert "macOS asks now whether \u201cApple Flow\u201d may control \u201cMessages\u201d: click Allow" in output
    assert ("switch on Apple Flow in System Settings > Privacy & Security > Full Disk Access (not listed? the + "
            f"button, then Cmd+Shift+G and ~/{APP})") in output
    assert f"chat.db (Full Disk Access): ok: {chat_db.path} readable by Apple Flow" in output
    assert "Messages (Automation): denied: Apple Flow is not allowed to control Messages" in output
    assert "switch on Messages under Apple Flow in System Settings > Privacy & Security > Automation" in output
    assert "python3" not in output
    # The service waits only for chat.db before it reads, so its reply to "hi" may reach osascript before the
    # Automation probe does: the probe is the call that carries its script, whichever came first.
    probes = [c for c in osascript.calls() if "get id of 1st account whose service type = iMessage" in c["stdin"]]
    assert probes and probes[0]["argv"] == ["-"]

    status = CliRunner().invoke(app, ["service", "status"])
    assert status.exit_code == 3, status.output  # running, but it cannot send
    shown = " ".join(status.output.split())
    assert "state = running" not in shown and ": running, pid" in shown
    assert "Permissions of Apple Flow (this service process" in shown
    assert "Messages (Automation): denied" in shown and "chat.db (Full Disk Access): ok" in shown

    pid = next(iter(mac["launchctl"].jobs().values()))["pid"]
    report = read_report(state)
    assert report is not None and psutil.Process(report.pid).ppid() == pid  # the launcher's child
    assert CliRunner().invoke(app, ["service", "uninstall"]).exit_code == 0
    for process in (pid, report.pid):  # the launcher passed launchd's stop on, and ended with its child

        def gone(p: int = process) -> bool:
            return not psutil.pid_exists(p) or psutil.Process(p).status() == psutil.STATUS_ZOMBIE

        wait_for(gone, 60, "the service to stop")


def test_install_says_when_the_service_has_not_reported_in_time(mac: dict[str, Any]) -> None:
    result = CliRunner().invoke(app, ["service", "install", "--wait", "0.5"])
    assert result.exit_code == 0, result.output
    assert "has not reported its permissions yet" in " ".join(result.output.split())
    assert "apple-flow service status" in result.output


# --- Apple Flow.app ---------------------------------------------------------------------------------------------


def test_install_assembles_and_signs_apple_flow_app(mac: dict[str, Any], launcher_bin: Path) -> None:
    result = CliRunner().invoke(app, ["service", "install"])
    assert result.exit_code == 0, result.output
    bundle = mac["app"]
    info = plistlib.loads((bundle / "Contents" / "Info.plist").read_bytes())
    assert info["CFBundleIdentifier"] == "com.apple-flow.launcher"
    assert info["CFBundleName"] == info["CFBundleDisplayName"] == info["CFBundleExecutable"] == "Apple Flow"
    assert info["LSUIElement"] is True and info["CFBundlePackageType"] == "APPL"
    assert "Messages" in info["NSAppleEventsUsageDescription"]  # without it Apple events are refused unasked
    executable = bundle / "Contents" / "MacOS" / "Apple Flow"
    assert os.access(executable, os.X_OK)
    assert executable.read_bytes().startswith(launcher_bin.read_bytes())  # the launcher, then the signature
    (call,) = mac["codesign"].calls()
    assert call[:-1] == ["--force", "--sign", "-", "--identifier", "com.apple-flow.launcher"]
    assert call[-1].endswith("/Apple Flow.app")  # signed whole, before it took the place of the old one
    assert sorted(p.name for p in bundle.parent.iterdir()) == ["Apple Flow.app", "installed.json"]
    assert "Installed ~/Library/Application Support/Apple Flow/Apple Flow.app (code hash " in " ".join(
        result.output.split()
    )
    assert "new, so it has no permissions yet" in " ".join(result.output.split())
    assert mac["tccutil"].calls() == []  # nothing was granted to a build before it


def test_a_reinstall_leaves_an_unchanged_app_alone_so_its_grants_stay(
    mac: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, launcher_bin: Path
) -> None:
    runner = CliRunner()
    assert runner.invoke(app, ["service", "install"]).exit_code == 0
    executable = mac["app"] / "Contents" / "MacOS" / "Apple Flow"
    before = executable.stat()
    again = runner.invoke(app, ["service", "install"])
    assert again.exit_code == 0, again.output
    assert "is unchanged (code hash " in " ".join(again.output.split())
    assert "): the permissions you gave it stay" in " ".join(again.output.split())
    assert len(mac["codesign"].calls()) == 1
    after = executable.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)

    # A new launcher build: the app is built and signed anew.
    rebuilt = tmp_path / "rebuilt" / "apple-flow-launcher"
    rebuilt.parent.mkdir()
    rebuilt.write_bytes(launcher_bin.read_bytes() + b"\0changed")
    monkeypatch.setattr(service_cli, "built_launcher", lambda: rebuilt)
    third = runner.invoke(app, ["service", "install"])
    assert third.exit_code == 0, third.output
    assert len(mac["codesign"].calls()) == 2
    assert executable.read_bytes().startswith(rebuilt.read_bytes())

    # An app changed or removed by hand is put back.
    executable.write_bytes(b"something else")
    assert runner.invoke(app, ["service", "install"]).exit_code == 0
    assert len(mac["codesign"].calls()) == 3 and executable.read_bytes().startswith(rebuilt.read_bytes())


def test_a_codesign_failure_keeps_the_old_app_and_installs_nothing(mac: dict[str, Any], tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    assert CliRunner().invoke(app, ["service", "install"]).exit_code == 0
    executable = mac["app"] / "Contents" / "MacOS" / "Apple Flow"
    old = executable.read_bytes()
    changed = tmp_path / "changed-launcher"
    changed.write_bytes(b"new build")
    monkeypatch.setattr(service_cli, "built_launcher", lambda: changed)
    mac["codesign"].fail()
    mac["launchctl"].clear_calls()
    result = CliRunner().invoke(app, ["service", "install"])
    assert result.exit_code == 1
    shown = " ".join(result.output.split())
    assert "Apple Flow.app was not installed: codesign could not sign" in shown
    assert "internal error in Code Signing subsystem" in shown
    assert executable.read_bytes() == old
    assert sorted(p.name for p in mac["app"].parent.iterdir()) == ["Apple Flow.app", "installed.json"]
    assert mac["launchctl"].calls() == []


def test_a_launcher_that_was_never_built_is_named_with_what_to_run(
    mac: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(service_cli, "built_launcher", lambda: tmp_path / "no-build" / "apple-flow-launcher")
    result = CliRunner().invoke(app, ["service", "install"])
    assert result.exit_code == 1
    shown = " ".join(result.output.split())
    assert "cannot be read" in shown and "run ./scripts/setup.sh" in shown
    assert mac["launchctl"].calls() == [] and not (mac["home"] / "Library" / "LaunchAgents").exists()


def test_restart_runs_the_service_with_the_current_env_file(
    mac: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each daemon reports which chat.db it read: after a restart, the one .env names now.
    mac["launchctl"].configure(run=True)
    FakeOsascript(tmp_path / "osascript", monkeypatch)
    first, second = ChatDbWriter(tmp_path / "one" / "chat.db"), ChatDbWriter(tmp_path / "two" / "chat.db")
    state = tmp_path / "state" / "relay.db"
    env = mac["project"] / ".env"

    def write_env(chat: Path) -> None:
        # With a web token of its own: a daemon without one writes one into this .env, and the first daemon doing
        # so after the test wrote the second .env put the first chat.db back (the restart then read it).
        env.write_text(
            "APPLE_FLOW_ALLOWED_SENDERS=+15551234567\n" + f"APPLE_FLOW_WEB_TOKEN={'t' * 40}\n"
            f"APPLE_FLOW_MESSAGES_DB_PATH={chat}\nAPPLE_FLOW_DB_PATH={state}\n"
            f"APPLE_FLOW_AFM_COMMAND={tmp_path / 'no-apple-code'}\n"
            f"FAKE_OSASCRIPT_LOG={tmp_path / 'osascript' / 'calls.jsonl'}\n"
        )

    def chat_db_read() -> str:
        report = read_report(state)
        found = {f.name: f.detail for f in report.findings} if report else {}
        return found.get("chat.db (Full Disk Access)", "")

    write_env(first.path)
    assert CliRunner().invoke(app, ["service", "install"]).exit_code == 0
    wait_for(lambda: str(first.path) in chat_db_read(), 30, "the first daemon's report")
    write_env(second.path)
    restart = CliRunner().invoke(app, ["service", "restart"])
    assert restart.exit_code == 0, restart.output
    wait_for(lambda: str(second.path) in chat_db_read(), 30, "the restarted daemon's report")
    first.close()
    second.close()


def test_a_new_build_of_the_app_says_the_old_grants_no_longer_apply_and_how_to_give_them_again(
    mac: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, launcher_bin: Path
) -> None:
    runner = CliRunner()
    assert runner.invoke(app, ["service", "install"]).exit_code == 0
    executable = mac["app"] / "Contents" / "MacOS" / "Apple Flow"
    old_hash = hashlib.sha256(executable.read_bytes()).hexdigest()
    rebuilt = tmp_path / "rebuilt" / "apple-flow-launcher"
    rebuilt.parent.mkdir()
    rebuilt.write_bytes(launcher_bin.read_bytes() + b"\0another toolchain")
    monkeypatch.setattr(service_cli, "built_launcher", lambda: rebuilt)

    result = runner.invoke(app, ["service", "install"])
    assert result.exit_code == 0, result.output
    new_hash = hashlib.sha256(executable.read_bytes()).hexdigest()
    shown = " ".join(result.output.split())
    assert (
        f"Installed a new build of ~/Library/Application Support/Apple Flow/Apple Flow.app (code hash {new_hash[:12]}, "
        f"was {old_hash[:12]}): macOS keys its permissions on that hash, so those given to the old build no longer "
        "apply, although System Settings may still show Apple Flow switched on." in shown
    )
    assert (
        "chat.db (Full Disk Access): remove Apple Flow from System Settings > Privacy & Security > Full Disk Access "
        "(select it, then the - button) and add it again (the + button, then Cmd+Shift+G and ~/Library/Application "
        "Support/Apple Flow/Apple Flow.app)." in shown
    )
    assert "Messages (Automation): reset (`tccutil reset AppleEvents com.apple-flow.launcher`)" in shown
    assert "The service texts you the same once it can send." in shown
    assert mac["tccutil"].calls() == [["reset", "AppleEvents", "com.apple-flow.launcher"]]
    # docs/mac-first-run.md shows these lines as printed (with a Mac's hashes).
    printed = [re.sub(r"code hash \w{12}, was \w{12}", "HASHES", line) for line in result.output.splitlines()]
    doc = re.sub(r"code hash \w{12}, was \w{12}", "HASHES", (PROJECT_ROOT / "docs" / "mac-first-run.md").read_text())
    assert "\n".join(printed[:4]) in doc
    record = json.loads((mac["app"].parent / "installed.json").read_text())
    assert record["executable"] == new_hash and record["replaced"] == old_hash

    # The same build again: nothing to give again, nothing reset.
    again = runner.invoke(app, ["service", "install"])
    assert "is unchanged (code hash" in " ".join(again.output.split())
    assert len(mac["tccutil"].calls()) == 1

    # The record lost, the same bytes put back: still the same grants, nothing reset.
    (mac["app"].parent / "installed.json").unlink()
    put_back = " ".join(runner.invoke(app, ["service", "install"]).output.split())
    assert f"is unchanged (code hash {new_hash[:12]}): the permissions you gave it stay" in put_back
    assert len(mac["tccutil"].calls()) == 1

    # tccutil refusing is said, with the command to run.
    rebuilt.write_bytes(launcher_bin.read_bytes() + b"\0a third build")
    mac["tccutil"].fail()
    third = " ".join(runner.invoke(app, ["service", "install"]).output.split())
    assert "`tccutil reset AppleEvents com.apple-flow.launcher` failed (tccutil: Failed to reset" in third
    assert "run it, then `apple-flow service restart`" in third


def test_status_says_when_the_service_was_switched_off_under_login_items_and_how_to_switch_it_on(
    mac: dict[str, Any]
) -> None:
    runner = CliRunner()
    assert runner.invoke(app, ["service", "install"]).exit_code == 0
    target = f"gui/{os.getuid()}/com.apple-flow.daemon"
    mac["launchctl"].switch_off(target)  # after macOS's "Background Items Added" notice, or under Login Items
    mac["launchctl"].clear_calls()
    status = runner.invoke(app, ["service", "status"])
    assert status.exit_code == 1
    shown = " ".join(status.output.split())
    assert (
        f"installed but switched off: launchd keeps {target} disabled, so it never runs. To switch it back on: open "
        "System Settings > General > Login Items & Extensions, switch on \u201cApple Flow\u201d under Allow in the "
        "Background, then run `apple-flow service install`." in shown
    )
    assert f"print-disabled gui/{os.getuid()}" in mac["launchctl"].calls()

    # Loaded, but disabled for the next login (`launchctl disable`): it runs now, and status says what will not.
    mac["launchctl"].configure(disabled=[], background_off=False)
    assert runner.invoke(app, ["service", "install"]).exit_code == 0
    mac["launchctl"].configure(disabled=[target])
    status = runner.invoke(app, ["service", "status"])
    assert status.exit_code == 0 and "running" in status.stdout
    assert "switched off: it runs now, but launchd will not start it at the next login" in " ".join(
        status.output.split()
    )

    # Installed and enabled, but not loaded (booted out by hand).
    mac["launchctl"].configure(disabled=[])
    subprocess.run(["launchctl", "bootout", target], check=True, capture_output=True)
    status = runner.invoke(app, ["service", "status"])
    assert status.exit_code == 1
    assert "installed but not loaded: `apple-flow service install` loads it again." in status.output


def test_a_bootstrap_refused_as_disabled_says_how_to_switch_the_service_on(
    mac: dict[str, Any]
) -> None:
    mac["launchctl"].configure(busy=1, busy_code=119)
    result = CliRunner().invoke(app, ["service", "install"])
    assert result.exit_code == 1
    shown = " ".join(result.output.split())
    assert "exit 119" in shown and "The service is switched off: open System Settings > General > Login Items" in shown
    assert mac["launchctl"].verbs().count("bootstrap") == 1  # not the race of errors 5 and 37: no retry
