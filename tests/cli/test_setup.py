"""`apple-flow setup`, driven through its prompts (typed answers on stdin) and through its flags, with the real
apple-code binary and the scripted OpenAI-compatible server for the agent check. macOS-only steps run here by
injecting the platform check, with the fake launchctl recording what the service install runs."""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dotenv import dotenv_values
from typer.testing import CliRunner

from apple_flow import host
from apple_flow import login_service as launchd_module
from apple_flow.cli import app
from apple_flow.cli import service as service_cli
from apple_flow.cli import setup as setup_cli
from apple_flow.paths import PROJECT_ROOT
from support.chatdb import ChatDbWriter
from support.fake_codesign import FakeCodesign
from support.fake_launchctl import FakeLaunchctl
from support.fake_osascript import FakeOsascript
from support.install import FAKE_CLI, install_script
from support.scripted_server import MODEL_ID, ScriptedServer


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def flat(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture
def setup_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, apple_code_bin: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    folder = tmp_path / "project"
    folder.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setenv("APPLE_FLOW_AFM_COMMAND", str(apple_code_bin))
    monkeypatch.setenv("APPLE_FLOW_MESSAGES_DB_PATH", str(tmp_path / "no-messages" / "chat.db"))
    monkeypatch.setenv("APPLE_FLOW_DB_PATH", str(tmp_path / "state" / "relay.db"))
    monkeypatch.chdir(folder)
    monkeypatch.setattr(host, "is_macos", lambda: False)
    return folder


@pytest.fixture
def scripted_server() -> Iterator[ScriptedServer]:
    with ScriptedServer([]) as running:
        yield running


@pytest.fixture
def fake_claude(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir = tmp_path / "cli-bin"
    bin_dir.mkdir()
    claude = install_script(FAKE_CLI, bin_dir / "claude")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return claude


def setup(*args: str, answers: list[str] | None = None) -> Any:
    stdin = "".join(f"{answer}\n" for answer in answers) if answers is not None else None
    return CliRunner().invoke(app, ["setup", *args], input=stdin)


EXISTING = (
    "# my settings\n"
    "APPLE_FLOW_REPLY_CHUNK_CHARS=900\n"
    "export APPLE_FLOW_ALLOWED_SENDERS=old@example.com   # me\n"
    "this line is not a setting\n"
    "OTHER_TOOL_KEY='keep me'\n"
)


def test_flags_write_the_answers_in_place_keeping_every_other_line(
    setup_project: Path, scripted_server: ScriptedServer
) -> None:
    env = setup_project / ".env"
    env.write_text(EXISTING)
    env.chmod(0o644)
    workspace = setup_project / "work"
    result = setup(
        "--sender", "(555) 123-4567, Me@iCloud.com", "--workspace", str(workspace), "--connector", "afm",
        "--base-url", scripted_server.url, "--model", MODEL_ID, "--yes",
    )
    assert result.exit_code == 0, result.output
    token = dotenv_values(env)["APPLE_FLOW_WEB_TOKEN"]
    assert env.read_text() == (
        "# my settings\n"
        "APPLE_FLOW_REPLY_CHUNK_CHARS=900\n"
        "APPLE_FLOW_ALLOWED_SENDERS=+15551234567,me@icloud.com\n"
        "this line is not a setting\n"
        "OTHER_TOOL_KEY='keep me'\n"
        f"APPLE_FLOW_DEFAULT_WORKSPACE={workspace}\n"
        "APPLE_FLOW_CONNECTOR=afm\n"
        "APPLE_FLOW_AFM_BACKEND=openai\n"
        f"APPLE_FLOW_AFM_BASE_URL={scripted_server.url}\n"
        f"APPLE_FLOW_AFM_MODEL={MODEL_ID}\n"
        f"APPLE_FLOW_WEB_TOKEN={token}\n"
    )
    assert mode(env) == 0o600 and workspace.is_dir()
    out = flat(result.output)
    assert "The daemon will answer +15551234567, me@icloud.com" in out
    assert "The server answers" in out
    assert "apple-flow doctor" in out and "allowed senders" in out and "+15551234567" in out
    assert "./scripts/run.sh" in out  # not macOS: no service offered


def test_the_wizard_refuses_bad_answers_with_a_sentence_and_asks_again(
    setup_project: Path, scripted_server: ScriptedServer
) -> None:
    (setup_project / "notes.txt").write_text("not a folder")
    code = Path(os.environ["HOME"]) / "code"
    result = setup(answers=[
        "12",  # too short for a phone number
        "me@icloud",  # no domain
        "+44 20 7946 0958",
        str(setup_project / "notes.txt"),
        "~/code",
        "y",  # create it
        "gpt",  # not an agent
        "afm",  # apple-code --check: no model on this machine
        "y",  # use an OpenAI-compatible server
        "127.0.0.1:11434",  # not a URL
        "http://127.0.0.1:9/v1",  # nothing listens there
        "",  # the first model
        scripted_server.url,
        MODEL_ID,
    ])
    assert result.exit_code == 0, result.output
    out = flat(result.output)
    assert "'12' is not a phone number: write it with its country code, e.g. +1 555 123 4567" in out
    assert "'me@icloud' is not an email address" in out
    assert "The daemon will answer +442079460958" in out
    assert f"{setup_project / 'notes.txt'} is a file, not a folder" in out
    assert f"{code} does not exist. Create it?" in out and code.is_dir()
    known = "afm, ollama, codex-cli, claude-cli, gemini-cli, cline, kilo-cli"
    assert f"'gpt' is not an agent apple-flow knows; choose one of: {known}" in out
    assert "no model available" in out and "Use an OpenAI-compatible server instead" in out
    assert "'127.0.0.1:11434' is not a server URL" in out
    assert "http://127.0.0.1:9/v1 did not answer as an OpenAI-compatible server" in out
    assert "Traceback" not in result.output
    values = dotenv_values(setup_project / ".env")
    assert values["APPLE_FLOW_ALLOWED_SENDERS"] == "+442079460958"
    assert values["APPLE_FLOW_DEFAULT_WORKSPACE"] == "~/code"
    assert (values["APPLE_FLOW_AFM_BACKEND"], values["APPLE_FLOW_AFM_BASE_URL"]) == ("openai", scripted_server.url)


def test_a_missing_agent_binary_gets_a_second_chance(
    setup_project: Path, fake_claude: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("APPLE_FLOW_AFM_COMMAND", str(setup_project / "no-apple-code"))
    result = setup(answers=["+15551234567", str(setup_project), "afm", "claude-cli"])
    assert result.exit_code == 0, result.output
    out = flat(result.output)
    assert "To use afm, run ./scripts/setup.sh (it builds apple-code); or choose another agent" in out
    assert "claude-cli is ready" in out
    assert dotenv_values(setup_project / ".env")["APPLE_FLOW_CONNECTOR"] == "claude-cli"


def test_with_yes_a_bad_or_missing_answer_is_exit_2_and_writes_nothing(
    setup_project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = setup("--workspace", str(setup_project), "--yes")
    assert missing.exit_code == 2 and "--sender is needed with --yes" in flat(missing.output)
    bad = setup("--sender", "call me", "--workspace", str(setup_project), "--yes")
    assert bad.exit_code == 2 and "'call me' is neither a phone number nor an email address" in flat(bad.output)
    monkeypatch.setenv("APPLE_FLOW_AFM_COMMAND", str(setup_project / "no-apple-code"))
    no_agent = setup("--sender", "+15551234567", "--workspace", str(setup_project), "--yes")
    assert no_agent.exit_code == 2 and "run ./scripts/setup.sh" in flat(no_agent.output)
    assert "Nothing was written" in flat(no_agent.output)
    assert not (setup_project / ".env").exists()


def test_ctrl_c_leaves_the_old_env_untouched(setup_project: Path) -> None:
    env = setup_project / ".env"
    env.write_text(EXISTING)
    env.chmod(0o644)
    # Ctrl-C and the end of input both end a prompt with typer's Abort.
    result = setup(answers=["+15551234567", str(setup_project)])
    assert result.exit_code == 1
    assert "Enter keeps the value in [brackets]; Ctrl-C stops without changing anything" in flat(result.output)
    assert f"Stopped: {env.name} was not changed" in flat(result.output)
    assert env.read_text() == EXISTING and mode(env) == 0o644
    assert sorted(p.name for p in setup_project.iterdir()) == [".env"]


def test_running_it_again_edits_the_file_and_offers_its_values(setup_project: Path, fake_claude: Path) -> None:
    first = setup("--sender", "+15551234567", "--workspace", str(setup_project), "--connector", "claude-cli", "--yes")
    assert first.exit_code == 0, first.output
    env = setup_project / ".env"
    before = env.read_text()
    again = setup(answers=["", "", ""])  # Enter three times: keep every value
    assert again.exit_code == 0, again.output
    assert "[+15551234567]" in again.output and "[claude-cli]" in again.output
    assert env.read_text() == before
    changed = setup("--sender", "you@example.com", "--yes")
    assert changed.exit_code == 0, changed.output
    after = env.read_text()
    senders = "APPLE_FLOW_ALLOWED_SENDERS="
    assert after == before.replace(f"{senders}+15551234567", f"{senders}you@example.com")
    assert after.count("APPLE_FLOW_ALLOWED_SENDERS=") == 1


def test_a_new_env_starts_from_the_documented_example(setup_project: Path, fake_claude: Path) -> None:
    result = setup("--sender", "+15551234567", "--workspace", str(setup_project), "--connector", "claude-cli", "--yes")
    assert result.exit_code == 0, result.output
    written = (setup_project / ".env").read_text().splitlines()
    example = (PROJECT_ROOT / ".env.example").read_text().splitlines()
    changed = {"APPLE_FLOW_ALLOWED_SENDERS", "APPLE_FLOW_DEFAULT_WORKSPACE", "APPLE_FLOW_CONNECTOR"}
    kept = [line for line in example if line.split("=", 1)[0] not in changed]
    assert [line for line in written if line in kept] == kept  # every other line, in order
    index = written.index("APPLE_FLOW_ALLOWED_SENDERS=+15551234567")
    assert example[index] == "APPLE_FLOW_ALLOWED_SENDERS="  # set where the example documents it
    assert dotenv_values(setup_project / ".env")["APPLE_FLOW_CONNECTOR"] == "claude-cli"


def test_the_whole_home_folder_is_questioned(setup_project: Path, fake_claude: Path) -> None:
    result = setup(answers=["+15551234567", "~", "n", "~/projects", "y", "claude-cli"])
    assert result.exit_code == 0, result.output
    assert "holds your whole home folder" in flat(result.output)
    assert dotenv_values(setup_project / ".env")["APPLE_FLOW_DEFAULT_WORKSPACE"] == "~/projects"


@pytest.fixture
def mac_for_setup(
    setup_project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, launcher_bin: Path
) -> Iterator[FakeLaunchctl]:
    launchctl = FakeLaunchctl(tmp_path, monkeypatch)
    FakeCodesign(tmp_path / "codesign-bin", monkeypatch)
    monkeypatch.setattr(host, "is_macos", lambda: True)
    monkeypatch.setattr(launchd_module, "POLL_SECONDS", 0.05)
    monkeypatch.setattr(service_cli, "REPORT_WAIT_SECONDS", 0)
    monkeypatch.setenv("APPLE_FLOW_LOG_DIR", str(tmp_path / "logs"))
    yield launchctl
    launchctl.kill_all()


def test_on_macos_it_offers_the_service_and_installs_it(
    setup_project: Path, fake_claude: Path, mac_for_setup: FakeLaunchctl
) -> None:
    result = setup(answers=["+15551234567", str(setup_project), "claude-cli", "y"])
    assert result.exit_code == 0, result.output
    assert "Install the service now" in result.output and "Installed and started" in result.output
    uid = os.getuid()
    plist = Path(os.environ["HOME"]) / "Library" / "LaunchAgents" / "com.apple-flow.daemon.plist"
    assert mac_for_setup.calls() == [
        f"bootout gui/{uid}/com.apple-flow.daemon", f"enable gui/{uid}/com.apple-flow.daemon",
        f"bootstrap gui/{uid} {plist}",
    ]
    # No service process ran here, so there is no report: not "text yourself help".
    out = flat(result.output)
    assert "Not ready yet: the service has not reported its permissions yet" in out
    assert "text yourself `help`" not in out

    # Later runs change nothing in launchd; their doctor only asks whether the installed service may run.
    declined = setup(answers=["", "", "", "n"])
    assert declined.exit_code == 0 and "Later: apple-flow service install" in declined.output
    verbs = [v for v in mac_for_setup.verbs() if v not in ("print", "print-disabled")]
    assert verbs == ["bootout", "enable", "bootstrap"]
    skipped = setup("--yes", "--no-service")
    assert skipped.exit_code == 0
    verbs = [v for v in mac_for_setup.verbs() if v not in ("print", "print-disabled")]
    assert verbs == ["bootout", "enable", "bootstrap"]


def service_env(setup_project: Path, tmp_path: Path, chat_db: Path, osascript: FakeOsascript) -> None:
    """What the service (a separate process with launchd's bare environment) must read from .env: the same paths
    the test gives this process in its environment."""
    (setup_project / ".env").write_text(
        f"APPLE_FLOW_MESSAGES_DB_PATH={chat_db}\n"
        f"APPLE_FLOW_DB_PATH={os.environ['APPLE_FLOW_DB_PATH']}\n"
        f"APPLE_FLOW_OSASCRIPT_COMMAND={osascript.path}\n"
        f"APPLE_FLOW_AFM_COMMAND={os.environ['APPLE_FLOW_AFM_COMMAND']}\n"
        "APPLE_FLOW_POLL_INTERVAL_SECONDS=0.2\n"
        f"FAKE_OSASCRIPT_LOG={osascript.log}\nFAKE_OSASCRIPT_CHATDB={chat_db}\n"
    )


def test_with_a_service_setup_asks_nothing_about_the_terminal_and_ends_with_the_services_report(
    setup_project: Path, fake_claude: Path, mac_for_setup: FakeLaunchctl,
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    osascript = FakeOsascript(tmp_path / "osascript", monkeypatch)
    result = setup("--sender", "+15551234567", "--workspace", str(setup_project), "--connector", "claude-cli", "--yes")
    out = flat(result.output)
    assert result.exit_code == 3, result.output  # --yes: not ready is a failure a script can see
    assert osascript.calls() == []  # no Automation prompt about the terminal
    assert "the service checks this itself, as Apple Flow" in out
    assert "quit and reopen" not in out and "Terminal" not in out
    assert "Installed and started" in out
    assert "Not ready yet:" in out and "Ready:" not in out.replace("Not ready yet:", "")


def test_setup_says_ready_only_from_the_services_own_report(
    setup_project: Path, fake_claude: Path, mac_for_setup: FakeLaunchctl,
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The fake launchd runs the real service through Apple Flow.app's launcher: it reads chat.db and probes
    # Messages itself, and setup's last line is what that report says.
    mac_for_setup.configure(run=True)
    monkeypatch.setattr(service_cli, "REPORT_WAIT_SECONDS", 60)
    chat = ChatDbWriter(tmp_path / "Messages" / "chat.db")
    chat.message("hi", sender="+15551234567")
    osascript = FakeOsascript(tmp_path / "osascript", monkeypatch)
    service_env(setup_project, tmp_path, chat.path, osascript)
    result = setup("--sender", "+15551234567", "--workspace", str(setup_project), "--connector", "claude-cli", "--yes")
    chat.close()
    out = flat(result.output)
    assert result.exit_code == 0, result.output
    assert "chat.db (Full Disk Access): ok" in out and "Messages (Automation): ok" in out
    assert out.endswith("Ready: text yourself `help` from your phone.")


def test_setup_names_each_missing_grant_and_where_to_give_it(
    setup_project: Path, fake_claude: Path, mac_for_setup: FakeLaunchctl,
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No Full Disk Access: macOS's refusal cannot happen here (TCC; and root reads every file), so the service's
    # report is the one a service without the grant writes, from the same code (chat_db_finding).
    import threading

    from apple_flow.channels.imessage.chatdb import ChatDBError, ChatDBProblem
    from apple_flow.channels.imessage.permissions import (
        REPORT_KEY,
        PermissionReport,
        Responsible,
        automation_finding,
        chat_db_finding,
    )
    from apple_flow.channels.imessage.probe import ProbeResult, ProbeState
    from apple_flow.check_result import CheckResult
    from apple_flow.daemon.store import Store

    monkeypatch.setattr(service_cli, "REPORT_WAIT_SECONDS", 10)
    home = Path(os.environ["HOME"])
    bundle = home / "Library" / "Application Support" / "Apple Flow" / "Apple Flow.app"
    service = Responsible("Apple Flow", False, str(bundle))
    plist = home / "Library" / "LaunchAgents" / "com.apple-flow.daemon.plist"
    chat_path = Path(os.environ["APPLE_FLOW_MESSAGES_DB_PATH"])

    def denied() -> int:
        raise ChatDBError(ChatDBProblem.NO_PERMISSION, "authorization denied", "")

    def fake_service() -> None:
        while not plist.exists():
            threading.Event().wait(0.05)
        findings: tuple[CheckResult, ...] = (
            chat_db_finding(denied, chat_path, service),
            automation_finding(ProbeResult(ProbeState.OK, "Apple Flow may control Messages (iMessage account A1)")),
        )
        store = Store(Path(os.environ["APPLE_FLOW_DB_PATH"]))
        store.meta.set_meta(REPORT_KEY, PermissionReport("Apple Flow", 4242, time.time(), findings).to_json())
        store.close()

    writer = threading.Thread(target=fake_service)
    writer.start()
    result = setup("--sender", "+15551234567", "--workspace", str(setup_project), "--connector", "claude-cli", "--yes")
    writer.join(10)
    out = flat(result.output)
    assert result.exit_code == 3, result.output
    verdict = out[out.index("Not ready yet:"):]
    assert f"chat.db (Full Disk Access): Apple Flow may not read {chat_path}" in verdict
    assert ("fix: switch on Apple Flow in System Settings > Privacy & Security > Full Disk Access (not listed? the "
            "+ button, then Cmd+Shift+G and ~/Library/Application Support/Apple Flow/Apple Flow.app)") in verdict
    assert "Messages (Automation)" not in verdict  # granted: not listed as missing
    assert "texts you once it is ready" in verdict and "Ready:" not in verdict.replace("Not ready yet:", "")


@pytest.mark.parametrize(("checkout", "workspace", "named"), [
    ("Documents/apple-flow", "Developer/site", ["This checkout", "is in Documents, which macOS guards"]),
    ("Developer/apple-flow", "Library/Mobile Documents/com~apple~CloudDocs/site", ["is in iCloud Drive"]),
    ("Developer/apple-flow", "Desktop/site", ["The workspace", "is in Desktop"]),
])
def test_setup_names_a_checkout_or_workspace_in_a_folder_macos_guards(
    setup_project: Path, fake_claude: Path, mac_for_setup: FakeLaunchctl, monkeypatch: pytest.MonkeyPatch,
    checkout: str, workspace: str, named: list[str],
) -> None:
    home = Path(os.environ["HOME"])
    monkeypatch.setattr(setup_cli, "PROJECT_ROOT", home / checkout)
    folder = home / workspace
    result = setup("--sender", "+15551234567", "--workspace", str(folder), "--connector", "claude-cli", "--yes",
                   "--no-service")
    assert result.exit_code == 0, result.output
    out = flat(result.output)
    for text in named:
        assert text in out
    assert "Full Disk Access" in out and out.count("Note:") == 1


def test_setup_says_nothing_about_places_for_an_ordinary_layout(
    setup_project: Path, fake_claude: Path, mac_for_setup: FakeLaunchctl, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = Path(os.environ["HOME"])
    monkeypatch.setattr(setup_cli, "PROJECT_ROOT", home / "Developer" / "apple-flow")
    result = setup("--sender", "+15551234567", "--workspace", str(home / "code"), "--connector", "claude-cli",
                   "--yes", "--no-service")
    assert result.exit_code == 0, result.output
    assert "Note:" not in result.output


def test_elsewhere_no_service_is_offered(setup_project: Path, fake_claude: Path, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    launchctl = FakeLaunchctl(tmp_path, monkeypatch)
    result = setup("--sender", "+15551234567", "--workspace", str(setup_project), "--connector", "claude-cli", "--yes")
    assert result.exit_code == 0, result.output
    assert "Install the service" not in result.output and launchctl.calls() == []
    assert setup_cli.EXAMPLE.is_file()


def test_ollama_is_one_answer_its_url_and_model_checked_with_the_real_apple_code(
    setup_project: Path, scripted_server: ScriptedServer
) -> None:
    env = setup_project / ".env"
    result = setup(
        "--sender", "+15551234567", "--workspace", str(setup_project), "--connector", "ollama",
        "--base-url", scripted_server.url, "--model", MODEL_ID, "--yes",
    )
    assert result.exit_code == 0, result.output
    values = dotenv_values(env)
    assert values["APPLE_FLOW_CONNECTOR"] == "ollama"
    assert (values["APPLE_FLOW_OLLAMA_BASE_URL"], values["APPLE_FLOW_OLLAMA_MODEL"]) == (scripted_server.url, MODEL_ID)
    assert values.get("APPLE_FLOW_AFM_BACKEND") != "openai"  # the preset has the backend built in
    assert "The server answers" in flat(result.output)


def test_ollama_that_does_not_answer_is_refused_with_what_to_do(setup_project: Path) -> None:
    env = setup_project / ".env"
    result = setup(
        "--sender", "+15551234567", "--workspace", str(setup_project), "--connector", "ollama",
        "--base-url", "http://127.0.0.1:9/v1", "--yes",
    )
    assert result.exit_code == 2
    out = flat(result.output)
    assert "http://127.0.0.1:9/v1 did not answer" in out and "ollama pull qwen2.5-coder:7b" in out
    assert not env.exists()


def test_gemini_cli_is_offered_and_checked(
    setup_project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = setup("--sender", "+15551234567", "--workspace", str(setup_project), "--connector", "gemini-cli", "--yes")
    assert missing.exit_code == 2
    assert "To use gemini-cli, install Gemini CLI (npm install -g @google/gemini-cli)" in flat(missing.output)
    bin_dir = tmp_path / "gemini-bin"
    bin_dir.mkdir()
    install_script(FAKE_CLI, bin_dir / "gemini")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    result = setup("--sender", "+15551234567", "--workspace", str(setup_project), "--connector", "gemini-cli", "--yes")
    assert result.exit_code == 0, result.output
    assert dotenv_values(setup_project / ".env")["APPLE_FLOW_CONNECTOR"] == "gemini-cli"
    assert "gemini-cli is ready" in flat(result.output)


@pytest.mark.parametrize(
    ("connector", "binary", "install"),
    [("cline", "cline", "install Cline CLI (npm install -g cline), then run `cline auth`"),
     ("kilo-cli", "kilo", "install Kilo CLI (npm install -g @kilocode/cli), then run `kilo` once and /connect a "
                          "provider")],
)
def test_cline_and_kilo_are_offered_and_checked(
    setup_project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, connector: str, binary: str, install: str
) -> None:
    missing = setup("--sender", "+15551234567", "--workspace", str(setup_project), "--connector", connector, "--yes")
    assert missing.exit_code == 2
    assert f"To use {connector}, {install}" in flat(missing.output)
    bin_dir = tmp_path / f"{binary}-bin"
    bin_dir.mkdir()
    install_script(FAKE_CLI, bin_dir / binary)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    result = setup("--sender", "+15551234567", "--workspace", str(setup_project), "--connector", connector, "--yes")
    assert result.exit_code == 0, result.output
    assert dotenv_values(setup_project / ".env")["APPLE_FLOW_CONNECTOR"] == connector
    assert f"{connector} is ready" in flat(result.output)
