"""scripts/run.sh's decisions and the exact commands they run, on a copy of the scripts. The platform comes from a
fake `uname` on PATH; what run.sh calls (setup.sh, local-model.sh, .venv/bin/apple-flow, apple-code --check) are
stand-ins that record their argv, since what they do has tests of its own."""

from __future__ import annotations

import os
import pty
import select
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from apple_flow.paths import PROJECT_ROOT

RECORDER = """#!/bin/sh
printf '%s %s\\n' "$(basename "$0")" "$*" >> "$RUN_SH_CALLS"
"""
APPLE_FLOW = RECORDER + """[ "$1" != run ] || printf 'profile=%s\\n' "${APPLE_FLOW_PROFILE:-}" >> "$RUN_SH_CALLS"
[ "$1" != run ] || [ -z "${APPLE_FLOW_AFM_TASK_BASE_URL:-}" ] ||
    printf 'task server=%s\\n' "$APPLE_FLOW_AFM_TASK_BASE_URL" >> "$RUN_SH_CALLS"
case "$1" in
  service) [ -z "${FAKE_SERVICE_REPORT:-}" ] || printf '%s\n' "$FAKE_SERVICE_REPORT" >&2
           exit "${FAKE_SERVICE_STATUS:-1}" ;;
  setup) [ -z "${FAKE_SETUP_WRITES:-}" ] || printf '%s\\n' "$FAKE_SETUP_WRITES" > .env; exit "${FAKE_SETUP_EXIT:-0}" ;;
esac
"""
APPLE_CODE = RECORDER + 'exit "${FAKE_FM_CHECK:-3}"\n'
# `start --tasks` prints the task model's URL, or nothing when tasks use the chat model (FAKE_TASK_URL unset).
LOCAL_MODEL = RECORDER + '[ "$1 $2" != "start --tasks" ] || printf "%s" "${FAKE_TASK_URL:-}"\n'


@dataclass
class Run:
    code: int
    output: str
    calls: list[str]


@pytest.fixture
def fake_checkout(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "scripts").mkdir(parents=True)
    for name in ("run.sh", "lib.sh"):
        shutil.copy(PROJECT_ROOT / "scripts" / name, root / "scripts" / name)
    for path, text in (
        (root / "scripts" / "setup.sh", RECORDER),
        (root / "scripts" / "local-model.sh", LOCAL_MODEL),
        (root / ".venv" / "bin" / "apple-flow", APPLE_FLOW),
        (root / "apple_code" / ".build" / "debug" / "apple-code", APPLE_CODE),
    ):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        path.chmod(0o755)
    (root / "examples" / "workspace").mkdir(parents=True)
    return root


def run_sh(fake_checkout: Path, tmp_path: Path, *args: str, mac: bool = True, tty: bool = False, **env: str) -> Run:
    calls = tmp_path / "calls.log"
    calls.unlink(missing_ok=True)
    path = os.environ["PATH"]
    if mac:
        fake_bin = tmp_path / "uname-bin"
        fake_bin.mkdir(exist_ok=True)
        (fake_bin / "uname").write_text("#!/bin/sh\necho Darwin\n")
        (fake_bin / "uname").chmod(0o755)
        path = f"{fake_bin}{os.pathsep}{path}"
    environ = {**os.environ, "PATH": path, "RUN_SH_CALLS": str(calls), "HOME": str(tmp_path / "home"), **env}
    command = ["bash", str(fake_checkout / "scripts" / "run.sh"), *args]
    if tty:
        code, output = _in_a_terminal(command, environ)
    else:
        done = subprocess.run(command, env=environ, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=60)
        code, output = done.returncode, done.stdout + done.stderr
    return Run(code, output, calls.read_text().splitlines() if calls.exists() else [])


def _in_a_terminal(command: list[str], environ: dict[str, str]) -> tuple[int, str]:
    """Runs ``command`` with a pseudo-terminal as stdin and stdout, as when a person starts it."""
    controller, terminal = pty.openpty()
    process = subprocess.Popen(command, env=environ, stdin=terminal, stdout=terminal, stderr=terminal)
    os.close(terminal)
    output = b""
    while True:
        ready, _, _ = select.select([controller], [], [], 60)
        if not ready:
            process.kill()
            break
        try:
            chunk = os.read(controller, 4096)
        except OSError:  # the terminal closed: the script ended
            break
        if not chunk:
            break
        output += chunk
    os.close(controller)
    return process.wait(30), output.decode(errors="replace")


def test_on_a_mac_without_env_and_a_terminal_it_runs_the_setup_first(fake_checkout: Path, tmp_path: Path) -> None:
    result = run_sh(fake_checkout, tmp_path, "--verbose", tty=True, FAKE_FM_CHECK="0",
                    FAKE_SETUP_WRITES="APPLE_FLOW_ALLOWED_SENDERS=+15551234567")
    assert result.code == 0, result.output
    assert result.calls == [
        "setup.sh ",
        "apple-flow setup",
        "apple-flow service status",
        "apple-code --check --backend fm",
        "apple-flow run --verbose",
        "profile=",  # Apple's model: the standard limits
    ]


def test_a_setup_stopped_with_ctrl_c_stops_run_sh(fake_checkout: Path, tmp_path: Path) -> None:
    result = run_sh(fake_checkout, tmp_path, tty=True, FAKE_SETUP_EXIT="1")
    assert result.code == 1
    assert result.calls == ["setup.sh ", "apple-flow setup"]


@pytest.mark.parametrize(
    "env", [None, "# nothing yet\n", "APPLE_FLOW_ALLOWED_SENDERS=\n", "APPLE_FLOW_ALLOWED_SENDERS=''\n"]
)
def test_on_a_mac_without_a_sender_and_no_terminal_it_says_exactly_what_to_run(
    fake_checkout: Path, tmp_path: Path, env: str | None
) -> None:
    if env is not None:
        (fake_checkout / ".env").write_text(env)
    result = run_sh(fake_checkout, tmp_path)
    assert result.code == 1
    text = " ".join(result.output.split())
    assert "no allowed sender" in text
    assert "Run .venv/bin/apple-flow setup in a terminal" in text
    assert ".venv/bin/apple-flow setup --sender" in text and "--yes" in text
    assert result.calls == ["setup.sh "]  # nothing else: no wizard without a terminal, no daemon answering nobody


def test_on_a_mac_with_a_sender_it_runs_the_imessage_daemon(fake_checkout: Path, tmp_path: Path) -> None:
    (fake_checkout / ".env").write_text("# mine\nexport APPLE_FLOW_ALLOWED_SENDERS=+15551234567  # me\n")
    result = run_sh(fake_checkout, tmp_path, FAKE_FM_CHECK="0")
    assert result.code == 0, result.output
    assert result.calls[-2:] == ["apple-flow run", "profile="]
    assert "apple-flow setup" not in result.calls


def test_a_sender_in_the_environment_counts_too(fake_checkout: Path, tmp_path: Path) -> None:
    result = run_sh(fake_checkout, tmp_path, FAKE_FM_CHECK="0", APPLE_FLOW_ALLOWED_SENDERS="me@example.com")
    assert result.code == 0, result.output
    assert result.calls[-2:] == ["apple-flow run", "profile="]


def test_when_the_service_runs_the_daemon_it_starts_no_second_one_and_shows_its_status(
    fake_checkout: Path, tmp_path: Path
) -> None:
    (fake_checkout / ".env").write_text("APPLE_FLOW_ALLOWED_SENDERS=+15551234567\n")
    report = "gui/501/com.apple-flow.daemon: running, pid 812\n  chat.db (Full Disk Access): ok"
    result = run_sh(fake_checkout, tmp_path, FAKE_FM_CHECK="0", FAKE_SERVICE_STATUS="0", FAKE_SERVICE_REPORT=report)
    assert result.code == 0, result.output
    assert result.calls[-1] == "apple-flow service status"
    assert report in result.output
    assert "The login service runs the daemon already" in " ".join(result.output.split())


def test_a_service_without_its_permissions_is_never_called_running(fake_checkout: Path, tmp_path: Path) -> None:
    (fake_checkout / ".env").write_text("APPLE_FLOW_ALLOWED_SENDERS=+15551234567\n")
    report = (
        "gui/501/com.apple-flow.daemon: running, pid 812\n"
        "  chat.db (Full Disk Access): denied: Apple Flow may not read ~/Library/Messages/chat.db\n"
        "    fix: switch on Apple Flow in System Settings > Privacy & Security > Full Disk Access"
    )
    result = run_sh(fake_checkout, tmp_path, FAKE_FM_CHECK="0", FAKE_SERVICE_STATUS="3", FAKE_SERVICE_REPORT=report)
    assert result.code == 3, result.output
    assert result.calls[-1] == "apple-flow service status"  # no second daemon
    text = " ".join(result.output.split())
    assert " ".join(report.split()) in text
    assert "runs the daemon already" not in text
    assert "cannot read or answer messages yet: give it what the fix lines above say" in text


def test_a_mac_set_up_for_a_server_runs_the_imessage_daemon_on_it(fake_checkout: Path, tmp_path: Path) -> None:
    (fake_checkout / ".env").write_text(
        "APPLE_FLOW_ALLOWED_SENDERS=+15551234567\nAPPLE_FLOW_AFM_BACKEND=openai\n"
        "APPLE_FLOW_AFM_BASE_URL=http://127.0.0.1:11434/v1\n"
    )
    result = run_sh(fake_checkout, tmp_path, FAKE_FM_CHECK="3")
    assert result.code == 0, result.output
    assert result.calls[-2:] == ["apple-flow run", "profile="]  # a real server: the standard limits
    assert not any(call.startswith("local-model.sh") for call in result.calls)


def test_a_mac_without_apples_model_or_a_server_falls_back_to_the_demo(fake_checkout: Path, tmp_path: Path) -> None:
    (fake_checkout / ".env").write_text("APPLE_FLOW_ALLOWED_SENDERS=+15551234567\n")
    result = run_sh(fake_checkout, tmp_path, FAKE_FM_CHECK="3")
    assert result.code == 0, result.output
    assert result.calls[-6:] == [
        "local-model.sh start --port 8765", "local-model.sh start --tasks --port 8766",
        "apple-flow run --channel console", "profile=demo",
        "local-model.sh stop --port 8765", "local-model.sh stop --port 8766",
    ]


def test_on_linux_the_demo_path_is_unchanged(fake_checkout: Path, tmp_path: Path) -> None:
    if os.uname().sysname == "Darwin":
        pytest.skip("the real uname says Darwin")
    result = run_sh(fake_checkout, tmp_path, mac=False)
    assert result.code == 0, result.output
    assert result.calls == [
        "setup.sh --local-model",
        "local-model.sh start --port 8765",
        "local-model.sh start --tasks --port 8766",
        "apple-flow run --channel console",
        "profile=demo",  # the small model's limits
        "local-model.sh stop --port 8765",
        "local-model.sh stop --port 8766",
    ]


def test_approved_tasks_go_to_the_task_model_when_one_is_served(fake_checkout: Path, tmp_path: Path) -> None:
    if os.uname().sysname == "Darwin":
        pytest.skip("the real uname says Darwin")
    result = run_sh(fake_checkout, tmp_path, mac=False, FAKE_TASK_URL="http://127.0.0.1:8766/v1",
                    APPLE_FLOW_LOCAL_TASK_MODEL_PORT="8766")
    assert result.code == 0, result.output
    assert result.calls[2:5] == ["local-model.sh start --tasks --port 8766", "apple-flow run --channel console",
                                 "profile=demo"]
    assert "task server=http://127.0.0.1:8766/v1" in result.calls  # what the daemon was given


def test_a_profile_in_the_environment_is_kept_on_the_demo_path(fake_checkout: Path, tmp_path: Path) -> None:
    if os.uname().sysname == "Darwin":
        pytest.skip("the real uname says Darwin")
    result = run_sh(fake_checkout, tmp_path, mac=False, APPLE_FLOW_PROFILE="standard")
    assert result.code == 0, result.output
    assert "profile=standard" in result.calls
