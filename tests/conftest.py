"""The suite's shared fixtures, all here, each name used once: where the built artifacts are, a workspace and an
empty chat.db, the settings each group of tests starts from (``connector_settings``, ``daemon_settings``,
``channel_settings``), and the fakes of ``tests/support`` installed for a test (apple-code, codex and claude,
osascript) with the record of what they received."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from apple_flow.channels.base import SentTexts
from apple_flow.config import Settings, load_settings, setting_variables
from apple_flow.daemon.store import Store
from apple_flow.localmodel import LocalModelServer
from apple_flow.paths import APPLE_CODE_PACKAGE, PROJECT_ROOT, built_launcher
from support.chatdb import ChatDbWriter
from support.daemon_process import DaemonProcess, MakeDaemon, scripted_agent
from support.fake_osascript import FakeOsascript
from support.install import FAKE_APPLE_CODE, FAKE_CLI, install_script
from support.local_model import running_local_model

MakeSettings = Callable[..., Settings]
FAKE_AGENT_VARIABLES = (
    "FAKE_CLI_RECORD", "FAKE_CLI_MODE",
    "FAKE_APPLE_CODE_RECORD", "FAKE_APPLE_CODE_MODE", "FAKE_APPLE_CODE_ANSWER", "FAKE_APPLE_CODE_REASON",
    "FAKE_APPLE_CODE_UNAVAILABLE_AT",
)


def pytest_configure(config: pytest.Config) -> None:
    """rich fixes a console's size for good when COLUMNS or LINES is set as it is made, and pytest-xdist's workers
    start with COLUMNS=80: the CLI's consoles, made when a test module imports the CLI, must instead follow the
    COLUMNS each test sets."""
    for name in ("COLUMNS", "LINES"):
        os.environ.pop(name, None)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--local-model-tests", choices=("run", "skip", "only"), default="run",
        help="run the tests on the real local model (marked local_model) with the others, skip them, or run only "
             "them: scripts/test.sh runs the others in parallel, then these alone",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``--local-model-tests`` selects; under pytest-xdist the tests on a real local model share one worker
    (``--dist loadgroup``): one model server each (the session's ``fast_model_server``, the default model's)
    instead of one a worker; and the tests marked slow go first."""
    choice = config.getoption("--local-model-tests")
    kept, dropped = [], []
    for item in items:
        on_model = item.get_closest_marker("local_model") is not None
        if on_model:
            item.add_marker(pytest.mark.xdist_group("local_model"))
        (dropped if (choice == "skip" and on_model) or (choice == "only" and not on_model) else kept).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    # The slow tests first: pytest-xdist hands tests out in this order, and one of them started last would keep
    # the whole run waiting on it alone.
    items[:] = sorted(kept, key=lambda item: item.get_closest_marker("slow") is None)


@pytest.fixture(autouse=True)
def _no_developer_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """The suite must not depend on the developer's APPLE_FLOW_* / APPLE_CODE_* variables (a shell that sets
    APPLE_FLOW_AFM_BACKEND=openai, as the README suggests on Linux, would change what every test runs)."""
    settings = {f"APPLE_FLOW_{name.upper()}" for name in setting_variables()}
    for name in list(os.environ):  # test switches such as APPLE_FLOW_REQUIRE_LOCAL_MODEL stay
        if name.upper() in settings or name.upper().startswith("APPLE_CODE_"):
            monkeypatch.delenv(name)
    # Daemons started by tests (in-process or as children) serve no web page unless the test asks for one: parallel
    # runs would all want port 8787, and a page wants a token in the test's .env.
    monkeypatch.setenv("APPLE_FLOW_WEB_ENABLED", "false")
    # The fake agents of tests/support are told what to do by these; an agent gets no variable it is not given.
    monkeypatch.setenv("APPLE_FLOW_AGENT_ENVIRONMENT", ",".join(FAKE_AGENT_VARIABLES))


@pytest.fixture(autouse=True)
def _restore_child_token(monkeypatch: pytest.MonkeyPatch) -> None:
    """An in-process daemon marks this process's environment for its children; undo it after each test."""
    from apple_flow.daemon.running.orphans import TOKEN_VARIABLE

    monkeypatch.setenv(TOKEN_VARIABLE, "pytest")


# --- where things are ------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def project_root() -> Path:
    return PROJECT_ROOT


@pytest.fixture(scope="session")
def apple_code_bin() -> Path:
    """The debug build of apple-code made by `scripts/setup.sh` (`swift build`). Missing is a failure, not a
    skip: the README's test command builds it first."""
    path = APPLE_CODE_PACKAGE / ".build" / "debug" / "apple-code"
    if not (path.is_file() and os.access(path, os.X_OK)):
        pytest.fail(f"{path} is missing: run scripts/setup.sh (or `cd apple_code && swift build`) first")
    return path


@pytest.fixture(scope="session")
def launcher_bin() -> Path:
    """apple-flow-launcher (the executable of Apple Flow.app) as `service install` takes it: the reproducible build
    that `scripts/setup.sh` makes with scripts/build-launcher.sh. Missing is a failure, not a skip."""
    path = built_launcher()
    if not (path.is_file() and os.access(path, os.X_OK)):
        pytest.fail(f"{path} is missing: run scripts/setup.sh (or scripts/build-launcher.sh) first")
    return path


@pytest.fixture(scope="session")
def fast_model_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalModelServer]:
    """The local model server on the fast model (SmolLM2-135M, 4,096-token context), started once for the tests that
    need any real model (it loads in a second but stays in memory) and stopped at the end; skips when the model is
    not installed."""
    with running_local_model(tmp_path_factory.mktemp("fast-model")) as server:
        yield server


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """An empty folder for the agent to work in (tests that need files put them there)."""
    path = tmp_path / "workspace"
    path.mkdir()
    return path


@pytest.fixture
def notes(workspace: Path) -> Path:
    """notes.txt ("buy milk") in the workspace: a file for the agent to read (``usefixtures("notes")``)."""
    path = workspace / "notes.txt"
    path.write_text("buy milk\n")
    return path


@pytest.fixture
def new_daemon(tmp_path: Path, chat_db: ChatDbWriter) -> Iterator[MakeDaemon]:
    """Makes the test's real `apple-flow run --channel imessage` process (not yet started) on ``chat_db`` with the
    settings (environment) given; a module names its own fixture for the settings it runs with. Stopped after the
    test, with any fake ``osascript`` of it left hanging by a test that failed before a restart."""
    made: list[DaemonProcess] = []

    def make(env: dict[str, str]) -> DaemonProcess:
        assert not made, "one daemon a test: its folder is the test's daemon/"
        made.append(DaemonProcess(tmp_path / "daemon", chat_db.path, env))
        return made[0]

    yield make
    for process in made:
        process.stop()
        for fake in psutil.process_iter(["cmdline"]):
            with contextlib.suppress(psutil.Error):
                if str(process.bin / "osascript") in (fake.info["cmdline"] or []):
                    fake.kill()


@pytest.fixture
def agent_daemon(new_daemon: MakeDaemon, workspace: Path,
                 apple_code_bin: Path) -> DaemonProcess:
    """The daemon process whose agent is the real apple-code on the scripted model, in ``workspace``, for one
    allowed sender, +15551234567."""
    return new_daemon({"APPLE_FLOW_ALLOWED_SENDERS": "+15551234567", **scripted_agent(apple_code_bin, workspace)})


@pytest.fixture
def attachments(tmp_path: Path) -> Path:
    """The Messages attachments folder of this test."""
    path = tmp_path / "Messages" / "Attachments"
    path.mkdir(parents=True)
    return path


@pytest.fixture
def chat_db(tmp_path: Path) -> Iterator[ChatDbWriter]:
    """An empty Messages database with the real schema (tables of macOS 15 and 26)."""
    writer = ChatDbWriter(tmp_path / "Messages" / "chat.db")
    yield writer
    writer.close()


# --- settings ------------------------------------------------------------------------------------------------


@pytest.fixture
def connector_settings(fake_apple_code: Path, workspace: Path) -> MakeSettings:
    """Settings for a connector: the fake apple-code, the workspace; keyword arguments override."""

    def make(**overrides: Any) -> Settings:
        values: dict[str, Any] = {"afm_command": str(fake_apple_code), "default_workspace": workspace}
        values.update(overrides)
        return load_settings(env_file=None, **values)

    return make


@pytest.fixture
def daemon_settings(tmp_path: Path, workspace: Path) -> MakeSettings:
    """Settings for an in-process daemon: its database in the test's folder, the workspace (also the one allowed
    workspace), two allowed senders, progress at once; keyword arguments override."""

    def make(**overrides: Any) -> Settings:
        values: dict[str, Any] = {
            "db_path": tmp_path / "state" / "relay.db",
            "default_workspace": workspace,
            "allowed_workspaces": [workspace],
            "allowed_senders": ["+15551234567", "ana@example.com"],
            "progress_interval_seconds": 0,
            "shutdown_grace_seconds": 2,
        }
        values.update(overrides)
        return Settings(_env_file=None, **values)  # type: ignore[call-arg]

    return make


@pytest.fixture
def channel_settings(tmp_path: Path) -> MakeSettings:
    """Settings for the iMessage channel: chat.db in the test's folder, quick polls, no retry pauses."""

    def make(**overrides: Any) -> Settings:
        values: dict[str, Any] = {
            "messages_db_path": tmp_path / "Messages" / "chat.db",
            "poll_interval_seconds": 0.2,
            "send_retry_backoff_seconds": 0,
            "send_timeout_seconds": 5,
            "send_confirm_seconds": 1,
        }
        values.update(overrides)
        return load_settings(env_file=None, **values)

    return make


# --- fakes ---------------------------------------------------------------------------------------------------


@pytest.fixture
def fake_apple_code(tmp_path: Path) -> Path:
    """tests/support/fake_apple_code.py installed as ``bin/apple-code``."""
    (tmp_path / "bin").mkdir(exist_ok=True)
    return install_script(FAKE_APPLE_CODE, tmp_path / "bin" / "apple-code")


@pytest.fixture
def fake_cli_bin(tmp_path: Path) -> Path:
    """A folder with fake ``codex``, ``claude``, ``gemini``, ``cline`` and ``kilo`` executables
    (tests/support/fake_cli.py)."""
    folder = tmp_path / "fakes"
    folder.mkdir()
    for name in ("codex", "claude", "gemini", "cline", "kilo"):
        install_script(FAKE_CLI, folder / name)
    return folder


@pytest.fixture
def record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[], list[dict[str, Any]]]:
    """Every run of a fake agent CLI appends what it received here; call the fixture's value to read the runs."""
    path = tmp_path / "runs.jsonl"
    monkeypatch.setenv("FAKE_APPLE_CODE_RECORD", str(path))
    monkeypatch.setenv("FAKE_CLI_RECORD", str(path))

    def runs() -> list[dict[str, Any]]:
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]

    return runs


@pytest.fixture
def fake_osascript(tmp_path: Path, chat_db: ChatDbWriter, monkeypatch: pytest.MonkeyPatch) -> FakeOsascript:
    """tests/support/fake_osascript.py first on PATH, leaving each text it sends in ``chat_db`` as Messages does."""
    return FakeOsascript(tmp_path / "bin", monkeypatch, chat_db.path)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    """The daemon's store (real SQLite) in the test's folder, closed after the test."""
    opened = Store(tmp_path / "state" / "relay.db")
    yield opened
    opened.close()


@pytest.fixture
def sent_texts(tmp_path: Path) -> Iterator[SentTexts]:
    """The daemon store's record of texts sent on the iMessage channel (600 s echo window)."""
    store = Store(tmp_path / "state" / "relay.db")
    yield store.sent.for_channel("imessage", 600)
    store.close()
