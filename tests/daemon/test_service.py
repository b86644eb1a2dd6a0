"""`apple-flow service ...` against a fake `launchctl` on PATH that records its argv and keeps load state like
launchd; on Linux the commands print the systemd user unit."""

from __future__ import annotations

import os
import plistlib
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from apple_flow.cli import app
from apple_flow.cli import service as service_cli

FAKE_LAUNCHCTL = """#!/bin/sh
printf '%s\\n' "$*" >> "$FAKE_LAUNCHCTL_LOG"
loaded="$FAKE_LAUNCHCTL_LOG.loaded"
case "$1" in
  bootstrap) [ -f "$3" ] || { echo "no such plist: $3" >&2; exit 5; }; touch "$loaded" ;;
  bootout) [ -f "$loaded" ] || { echo "Boot-out failed: 3: No such process" >&2; exit 3; }; rm -f "$loaded" ;;
  print) [ -f "$loaded" ] || { echo "Could not find service" >&2; exit 113; }
         printf '%s = {\\n\\tstate = running\\n\\tpid = 4242\\n\\tlast exit code = 0\\n}\\n' "$2" ;;
  kickstart) [ -f "$loaded" ] || exit 113 ;;
esac
"""


@pytest.fixture
def mac(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "launchctl"
    fake.write_text(FAKE_LAUNCHCTL)
    fake.chmod(0o755)
    log = tmp_path / "launchctl.log"
    project = tmp_path / "project"
    project.mkdir()
    (project / ".env").write_text("APPLE_FLOW_ALLOWED_SENDERS=+15551234567\nAPPLE_FLOW_AFM_BACKEND=fm\n")
    apple_code = tmp_path / "tools" / "apple-code"
    apple_code.parent.mkdir()
    apple_code.write_text("#!/bin/sh\n")
    apple_code.chmod(0o755)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_LAUNCHCTL_LOG", str(log))
    monkeypatch.setenv("APPLE_FLOW_LOG_DIR", str(tmp_path / "logs"))
    monkeypatch.setenv("APPLE_FLOW_AFM_COMMAND", str(apple_code))
    monkeypatch.chdir(project)
    monkeypatch.setattr(service_cli.platform, "system", lambda: "Darwin")
    return {"log": log, "home": tmp_path / "home", "project": project, "apple_code": apple_code,
            "logs": tmp_path / "logs"}


def test_install_takes_its_settings_from_the_given_env_file(mac: dict[str, Path], tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "site.env").write_text("APPLE_FLOW_SERVICE_LABEL=com.example.site\n")
    result = CliRunner().invoke(app, ["service", "install", "--env-file", str(other / "site.env")])
    assert result.exit_code == 0, result.output
    plist_path = mac["home"] / "Library" / "LaunchAgents" / "com.example.site.plist"
    plist = plistlib.loads(plist_path.read_bytes())
    assert plist["Label"] == "com.example.site" and plist["WorkingDirectory"] == str(other.resolve())


def calls(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def test_install_writes_the_plist_and_bootstraps_it(mac: dict[str, Path]) -> None:
    result = CliRunner().invoke(app, ["service", "install"])
    assert result.exit_code == 0, result.output
    plist_path = mac["home"] / "Library" / "LaunchAgents" / "com.apple-flow.daemon.plist"
    plist = plistlib.loads(plist_path.read_bytes())
    uid = os.getuid()
    assert calls(mac["log"]) == [
        f"print gui/{uid}/com.apple-flow.daemon",
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


def test_reinstall_boots_out_the_loaded_agent_first(mac: dict[str, Path]) -> None:
    CliRunner().invoke(app, ["service", "install"])
    mac["log"].write_text("")
    result = CliRunner().invoke(app, ["service", "install"])
    assert result.exit_code == 0, result.output
    uid = os.getuid()
    assert [c.split()[0] for c in calls(mac["log"])] == ["print", "bootout", "bootstrap"]
    assert calls(mac["log"])[1] == f"bootout gui/{uid}/com.apple-flow.daemon"


def test_status_restart_uninstall(mac: dict[str, Path]) -> None:
    runner = CliRunner()
    assert runner.invoke(app, ["service", "status"]).exit_code == 1
    runner.invoke(app, ["service", "install"])
    status = runner.invoke(app, ["service", "status"])
    assert status.exit_code == 0 and "running, pid 4242" in status.stdout
    mac["log"].write_text("")
    assert runner.invoke(app, ["service", "restart"]).exit_code == 0
    assert calls(mac["log"]) == [f"kickstart -k gui/{os.getuid()}/com.apple-flow.daemon"]
    mac["log"].write_text("")
    assert runner.invoke(app, ["service", "uninstall"]).exit_code == 0
    assert [c.split()[0] for c in calls(mac["log"])] == ["print", "bootout"]
    assert not (mac["home"] / "Library" / "LaunchAgents" / "com.apple-flow.daemon.plist").exists()
    again = runner.invoke(app, ["service", "uninstall"])
    assert again.exit_code == 0 and "not installed" in again.output


def test_a_launchctl_failure_is_reported_with_its_output(mac: dict[str, Path]) -> None:
    result = CliRunner().invoke(app, ["service", "restart"])
    assert result.exit_code == 1
    assert "launchctl kickstart -k" in result.output and "exit 113" in result.output


def test_logs_show_the_end_of_each_log(mac: dict[str, Path]) -> None:
    runner = CliRunner()
    assert runner.invoke(app, ["service", "logs"]).exit_code == 1
    mac["logs"].mkdir()
    (mac["logs"] / "daemon.err.log").write_text("".join(f"line {i}\n" for i in range(100)))
    result = runner.invoke(app, ["service", "logs", "-n", "3"])
    assert result.exit_code == 0
    assert result.stdout.splitlines()[1:] == ["line 97", "line 98", "line 99"]


def test_on_linux_the_commands_print_the_systemd_unit(
    mac: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(service_cli.platform, "system", lambda: "Linux")
    for command in ("install", "uninstall", "status", "restart"):
        result = CliRunner().invoke(app, ["service", command])
        assert result.exit_code == 1
        assert "macOS-only" in result.stderr
        unit = result.stdout
        assert f"ExecStart={sys.executable} -m apple_flow run --channel imessage" in unit
        assert f"EnvironmentFile=-{mac['project'].resolve() / '.env'}" in unit
        assert "Restart=always" in unit and "WantedBy=default.target" in unit
    assert calls(mac["log"]) == []
