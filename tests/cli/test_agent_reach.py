"""What the daemon tells apple-code to keep from the agent is what it actually uses: the .env file it read
(`run --env-file FILE`, which the login service passes) and the port its web page actually listens on (with
APPLE_FLOW_WEB_PORT=0, the one the system chose). A real `apple-flow run` on the console channel, with the fake
apple-code recording the argv it was given."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from apple_flow.config import load_settings
from apple_flow.connectors import AfmConnector
from apple_flow.daemon.running.own_folders import own_folder_warnings
from apple_flow.login_service import launchd_arguments
from apple_flow.paths import PROJECT_ROOT

TOKEN = "reach-test-token-0123456789-0123456789"
WEB_LINE = re.compile(r"Web page: http://[^:\s]+:(\d+)")


def flags(argv: list[str], name: str) -> list[str]:
    return [argv[i + 1] for i, flag in enumerate(argv) if flag == name]


def write_env(path: Path, fake_apple_code: Path, workspace: Path, state: Path, port: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f"APPLE_FLOW_AFM_COMMAND={fake_apple_code}\nAPPLE_FLOW_DEFAULT_WORKSPACE={workspace}\n"
        f"APPLE_FLOW_DB_PATH={state / 'relay.db'}\nAPPLE_FLOW_WEB_PORT={port}\nAPPLE_FLOW_WEB_TOKEN={TOKEN}\n",
        encoding="utf-8",
    )
    return path


def run_console(argv: list[str], cwd: Path, record: Path) -> tuple[str, list[dict[str, Any]]]:
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT / "src"), "FAKE_APPLE_CODE_RECORD": str(record),
           "APPLE_FLOW_WEB_ENABLED": "true"}
    done = subprocess.run([sys.executable, "-m", "apple_flow", *argv], cwd=cwd, env=env, input="hello\n",
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    runs = [json.loads(line) for line in record.read_text().splitlines()] if record.exists() else []
    return done.stderr, runs


def test_run_with_env_file_hides_that_file_and_denies_the_port_the_system_chose(
    tmp_path: Path, fake_apple_code: Path, workspace: Path
) -> None:
    env_file = write_env(tmp_path / "config" / "flow.env", fake_apple_code, workspace, tmp_path / "state", 0)
    elsewhere = tmp_path / "elsewhere"  # the folder it runs in holds no .env: hiding only ./.env misses the file
    elsewhere.mkdir()
    stderr, runs = run_console(["run", "--channel", "console", "--env-file", str(env_file)], elsewhere,
                               tmp_path / "runs.jsonl")
    (run,) = [r for r in runs if "--cwd" in r["argv"]]
    assert str(env_file) in flags(run["argv"], "--hide")
    match = WEB_LINE.search(stderr)
    assert match is not None, stderr
    port = match.group(1)
    assert port != "0"
    assert flags(run["argv"], "--deny-port") == [port]


def test_the_login_services_arguments_hide_the_env_file_it_reads(
    tmp_path: Path, fake_apple_code: Path, workspace: Path
) -> None:
    """The arguments `service install` writes into the launchd job, as the launcher starts them (its first
    argument is the launcher, which runs the rest), on the console channel here (iMessage needs a Mac)."""
    project = tmp_path / "project"
    env_file = write_env(project / ".env", fake_apple_code, workspace, tmp_path / "state", 0)
    arguments = launchd_arguments(tmp_path / "Apple Flow", env_file.resolve(), 0)
    assert arguments[1:6] == [sys.executable, "-m", "apple_flow", "run", "--channel"]
    command = [*arguments[4:5], "--channel", "console", *arguments[7:]]  # run --channel console --env-file ...
    assert "--service" in command and "--env-file" in command
    service_home = tmp_path / "launchd-cwd"  # launchd's working folder is the .env's; any other shows the file wins
    service_home.mkdir()
    stderr, runs = run_console(command, service_home, tmp_path / "runs.jsonl")
    (run,) = [r for r in runs if "--cwd" in r["argv"]]
    assert str(env_file.resolve()) in flags(run["argv"], "--hide")
    match = WEB_LINE.search(stderr)
    assert match is not None and flags(run["argv"], "--deny-port") == [match.group(1)]


def test_the_connector_hides_the_file_the_settings_came_from(tmp_path: Path, fake_apple_code: Path,
                                                             workspace: Path) -> None:
    env_file = write_env(tmp_path / "conf" / "other.env", fake_apple_code, workspace, tmp_path / "state", 8791)
    settings = load_settings(env_file)
    assert settings.env_file_read == env_file.absolute()
    hidden = flags(AfmConnector(settings).reach_flags(), "--hide")
    assert str(env_file.absolute()) in hidden and str(Path(".env").absolute()) in hidden
    # The page listening on another port than configured (port 0: the system's choice): that one is denied.
    settings = load_settings(env_file, web_enabled=True)
    connector = AfmConnector(settings)
    assert flags(connector.reach_flags(), "--deny-port") == ["8791"]
    settings.note_web_port(40123)  # after the connector was built, as the page starts after it
    assert flags(connector.reach_flags(), "--deny-port") == ["40123"]
    assert load_settings(None).env_file_read is None


def test_the_daemon_warns_when_its_own_folder_is_inside_a_workspace(tmp_path: Path, fake_apple_code: Path) -> None:
    """Its .env's folder or its state's inside a workspace the agent's commands run in: said at start. The home
    folder as a workspace is not (apple-code runs no command there)."""
    home = tmp_path / "home"
    code = home / "code"
    daemon = code / "apple-flow"
    daemon.mkdir(parents=True)
    env_file = write_env(daemon / ".env", fake_apple_code, code, home / ".apple-flow", 0)
    (warning,) = own_folder_warnings(load_settings(env_file), home=home)
    assert str(daemon) in warning and "its .env" in warning and f"the workspace {code}" in warning
    apart = write_env(home / "apple-flow" / ".env", fake_apple_code, code, home / ".apple-flow", 0)
    assert own_folder_warnings(load_settings(apart), home=home) == []
    at_home = write_env(home / "apple-flow" / ".env", fake_apple_code, home, home / ".apple-flow", 0)
    assert own_folder_warnings(load_settings(at_home), home=home) == []
    state_inside = write_env(home / "apple-flow" / ".env", fake_apple_code, code, code / "state", 0)
    (warning,) = own_folder_warnings(load_settings(state_inside), home=home)
    assert str(code / "state") in warning and "its state" in warning
