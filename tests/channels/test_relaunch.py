"""macOS decides a process's Full Disk Access when it starts: a service refused chat.db stays refused after the
owner grants it. The service reads chat.db in a new process too, and when that works while its own read does not, it
exits once with RELAUNCH_EXIT for launchd's KeepAlive to start it again (not sooner than launchd's ThrottleInterval
after its start, and not again when such a relaunch did not help). What cannot run here is macOS's per-process
decision: this process's own read is refused by a stand-in (``refused_here``); the new process reads the real file."""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from apple_flow import host
from apple_flow import login_service as launchd_module
from apple_flow.channels.imessage import permissions
from apple_flow.channels.imessage.chatdb import ChatDB, ChatDBError, ChatDBProblem
from apple_flow.channels.imessage.permissions import (
    CHAT_DB,
    RELAUNCH_EXIT,
    RELAUNCH_KEY,
    PermissionMonitor,
    Responsible,
    read_report,
)
from apple_flow.check_result import CheckStatus
from apple_flow.cli import app as cli_app
from apple_flow.cli import run as run_cli
from apple_flow.config import load_settings
from apple_flow.daemon.running.owner_notices import ready_text
from apple_flow.daemon.store import Store
from apple_flow.login_service import THROTTLE_INTERVAL, build_plist, service_files
from apple_flow.paths import PROJECT_ROOT
from support.chatdb import ChatDbWriter
from support.daemon_process import wait_for
from support.fake_codesign import FakeCodesign
from support.fake_launchctl import FakeLaunchctl
from support.fake_osascript import FakeOsascript
from support.fake_tccutil import FakeTccutil

OWNER = "+15551234567"
TESTS = Path(__file__).resolve().parents[1]
APPLE_FLOW = Responsible("Apple Flow", terminal=False, app="/Users/you/Library/Application Support/Apple Flow.app")


@pytest.fixture(autouse=True)
def _this_checkouts_code(monkeypatch: pytest.MonkeyPatch) -> None:
    """The new process runs this checkout's apple_flow (the venv may hold another one's)."""
    monkeypatch.setenv("PYTHONPATH", str(PROJECT_ROOT / "src"))


@pytest.fixture
def refused_here(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process may not read chat.db (as a process started before the grant); a new one reads the file."""

    def denied(self: ChatDB) -> int:
        raise ChatDBError(ChatDBProblem.NO_PERMISSION, "authorization denied", "grant Full Disk Access")

    monkeypatch.setattr(ChatDB, "latest_rowid", denied)


class Clock:
    """The monitor's clock, moved on by each pause it waits (no real waiting)."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


class Pauses(threading.Event):
    """The wait's stop event: each pause moves the clock on; the owner grants access after ``grant_after`` pauses."""

    def __init__(self, clock: Clock, grant: Any, grant_after: int, limit: int = 50) -> None:
        super().__init__()
        self.clock, self._grant, self._after, self._limit = clock, grant, grant_after, limit
        self.pauses: list[float] = []

    def wait(self, timeout: float | None = None) -> bool:
        self.pauses.append(timeout or 0)
        self.clock.now += timeout or 0
        if len(self.pauses) == self._after:
            self._grant()
        return self.is_set() or len(self.pauses) >= self._limit


def test_a_grant_seen_by_a_new_process_relaunches_the_service_once_never_inside_the_throttle(
    tmp_path: Path, store: Store, refused_here: None, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "Messages" / "chat.db"
    settings = load_settings(env_file=None, messages_db_path=path, poll_interval_seconds=2)
    clock = Clock()
    relaunched: list[float] = []
    monitor = PermissionMonitor(settings, store.meta, app=APPLE_FLOW, clock=clock,
                                relaunch=lambda: relaunched.append(clock.now))
    started = clock.now
    # The grant comes at once (2 s after the start): a new process reads chat.db from then on.
    stop = Pauses(clock, lambda: ChatDbWriter(path).close(), grant_after=1)
    assert monitor.wait_until_ready(stop) is False
    assert len(relaunched) == 1 and monitor.relaunching
    assert relaunched[0] - started >= THROTTLE_INTERVAL  # launchd would hold back a quicker restart anyway
    assert stop.pauses == [2, 4, 8]  # 2 s: granted; 6 s: too soon; 14 s: relaunch
    assert store.meta.get_meta(RELAUNCH_KEY)
    report = read_report(store.path)
    assert report is not None
    chat = {f.name: f for f in report.findings}[CHAT_DB]
    assert chat.status is CheckStatus.CHECKING and "Apple Flow restarts to use it" in chat.detail

    # The new process is refused too (the grant did not reach it): no second exit, which would loop every 10 s.
    again = PermissionMonitor(settings, store.meta, app=APPLE_FLOW, clock=clock,
                              relaunch=lambda: relaunched.append(clock.now))
    with caplog.at_level(logging.ERROR, logger="apple_flow.channels.imessage.permissions"):
        assert again.wait_until_ready(Pauses(clock, lambda: None, grant_after=0, limit=6)) is False
    assert len(relaunched) == 1 and not again.relaunching
    stuck = [r.getMessage() for r in caplog.records if "restarted for the grant, still cannot" in r.getMessage()]
    assert len(stuck) == 1  # said once, not at every try
    assert "run `apple-flow service restart`; if that does not help, remove Apple Flow from" in stuck[0]
    report = read_report(store.path)
    assert report is not None
    chat = {f.name: f for f in report.findings}[CHAT_DB]
    assert chat.status is CheckStatus.DENIED and "still cannot" in chat.detail and "add it again" in chat.fix


def relaunch_log_in_the_doc() -> list[str]:
    text = (PROJECT_ROOT / "docs" / "mac-first-run.md").read_text(encoding="utf-8")
    found = re.search(r"<!-- relaunch-log -->\n```text\n(.*?)\n```\n<!-- /relaunch-log -->", text, re.S)
    assert found, "docs/mac-first-run.md has no relaunch-log block"
    return found.group(1).splitlines()


def test_the_doc_shows_the_relaunch_as_the_service_and_its_launcher_log_it(
    tmp_path: Path, store: Store, refused_here: None, caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch, launcher_bin: Path,
) -> None:
    warning, launcher, ready = relaunch_log_in_the_doc()
    path = tmp_path / "Library" / "Messages" / "chat.db"
    ChatDbWriter(path).close()
    settings = load_settings(env_file=None, messages_db_path=path, poll_interval_seconds=2)
    clock = Clock()
    monitor = PermissionMonitor(settings, store.meta, app=APPLE_FLOW, clock=clock, relaunch=lambda: None)
    with caplog.at_level(logging.INFO, logger="apple_flow.channels.imessage.permissions"):
        assert monitor.wait_until_ready(Pauses(clock, lambda: None, grant_after=0)) is False
    said = [r for r in caplog.records if r.levelno == logging.WARNING and "granted" in r.getMessage()]
    assert warning.endswith(f" WARNING {said[0].name}: {said[0].getMessage()}")
    # The launcher's own line for the exit (its real binary, a child that exits as the daemon does).
    done = subprocess.run([str(launcher_bin), sys.executable, "-c", f"raise SystemExit({RELAUNCH_EXIT})"],
                          capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == RELAUNCH_EXIT
    assert re.sub(r"pid \d+", "pid 812", done.stderr.strip()) == launcher
    # The new process reads (this stand-in Mac's paths shown as on a Mac).
    monkeypatch.undo()
    monitor = PermissionMonitor(settings, store.meta, app=APPLE_FLOW, clock=clock, relaunch=lambda: None)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="apple_flow.channels.imessage.permissions"):
        assert monitor.wait_until_ready(threading.Event()) is True
    line = next(r.getMessage() for r in caplog.records if "chat.db (Full Disk Access): ok" in r.getMessage())
    assert ready.endswith(" INFO apple_flow.channels.imessage.permissions: "
                          + line.replace(str(tmp_path), "/Users/you"))
    assert store.meta.get_meta(RELAUNCH_KEY) == ""  # read: a later refusal may relaunch once again


def test_no_relaunch_while_a_new_process_is_refused_too_or_when_run_by_hand(
    tmp_path: Path, store: Store, refused_here: None
) -> None:
    path = tmp_path / "Messages" / "chat.db"
    settings = load_settings(env_file=None, messages_db_path=path, poll_interval_seconds=2)
    clock = Clock()
    seen: list[Path] = []

    def still_refused(where: Path) -> bool:
        seen.append(where)
        return False

    relaunched: list[float] = []
    monitor = PermissionMonitor(settings, store.meta, app=APPLE_FLOW, clock=clock, fresh_read=still_refused,
                                relaunch=lambda: relaunched.append(clock.now))
    ChatDbWriter(path).close()
    assert monitor.wait_until_ready(Pauses(clock, lambda: None, grant_after=0, limit=5)) is False
    assert relaunched == [] and seen == [path] * 2  # asked at each try past the throttle: 14 s and 30 s

    by_hand = PermissionMonitor(settings, store.meta, app=APPLE_FLOW, clock=clock)  # no launchd to restart it
    assert by_hand.wait_until_ready(Pauses(clock, lambda: None, grant_after=0, limit=5)) is False
    assert not by_hand.relaunching


def test_the_service_exits_with_the_status_launchd_restarts_when_only_a_new_process_has_the_grant(
    tmp_path: Path, refused_here: None, monkeypatch: pytest.MonkeyPatch, chat_db: ChatDbWriter
) -> None:
    FakeOsascript(tmp_path / "bin", monkeypatch)
    monkeypatch.setattr(permissions, "THROTTLE_INTERVAL", 0)  # the throttle itself: the test above
    env = tmp_path / "project" / ".env"
    env.parent.mkdir()
    env.write_text(
        f"APPLE_FLOW_ALLOWED_SENDERS=+15551234567\nAPPLE_FLOW_MESSAGES_DB_PATH={chat_db.path}\n"
        f"APPLE_FLOW_DB_PATH={tmp_path / 'state' / 'relay.db'}\nAPPLE_FLOW_POLL_INTERVAL_SECONDS=0.1\n"
        f"APPLE_FLOW_AFM_COMMAND={tmp_path / 'no-apple-code'}\n"
    )
    result = CliRunner().invoke(
        cli_app, ["run", "--channel", "imessage", "--env-file", str(env), "--service"], catch_exceptions=False
    )
    assert result.exit_code == RELAUNCH_EXIT == run_cli.RELAUNCH_EXIT
    # The plist restarts it: KeepAlive, with its throttle.
    settings = load_settings(env_file=None)
    plist = build_plist(settings, env, service_files(settings, tmp_path), Path("/launcher"), 0.0)
    assert plist["KeepAlive"] is True and plist["ThrottleInterval"] == THROTTLE_INTERVAL


def test_a_grant_given_again_while_the_service_runs_relaunches_it_too(
    tmp_path: Path, store: Store, chat_db: ChatDbWriter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(permissions, "THROTTLE_INTERVAL", 0)
    settings = load_settings(env_file=None, messages_db_path=chat_db.path, poll_interval_seconds=0.05)
    relaunched = threading.Event()
    monitor = PermissionMonitor(settings, store.meta, app=APPLE_FLOW, relaunch=relaunched.set)
    assert monitor.wait_until_ready(threading.Event()) is True
    # Full Disk Access switched off and on again while it runs: the reader is refused from then on.
    refusal = ChatDBError(ChatDBProblem.NO_PERMISSION, "authorization denied", "grant Full Disk Access")
    monkeypatch.setattr(ChatDB, "latest_rowid", lambda self: (_ for _ in ()).throw(refusal))
    monitor.chat_db_state(refusal)
    monitor.chat_db_state(refusal)  # every poll says so; one watch
    assert relaunched.wait(20) and monitor.relaunching
    assert sum(t.name == "grant-watch" for t in threading.enumerate()) <= 1
    monitor.close()


@pytest.mark.slow
def test_the_installed_service_takes_a_grant_given_after_its_start_by_one_relaunch_and_says_it_is_ready(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chat_db: ChatDbWriter, launcher_bin: Path
) -> None:
    """End to end: the service, started by the fake launchd through Apple Flow.app's real launcher, meets macOS's
    per-process decision (tests/support/tcc_site: refused for a process started before the grant); the owner
    grants; the service exits once, launchd's KeepAlive starts it again no sooner than ThrottleInterval after its
    start, and the new process reads chat.db and texts the owner that it is ready."""
    launchctl = FakeLaunchctl(tmp_path, monkeypatch)
    monkeypatch.setattr(launchd_module, "POLL_SECONDS", 0.05)
    granted = tmp_path / "granted"
    launchctl.configure(run=True, keepalive=True, extra_env={
        "PYTHONPATH": os.pathsep.join([str(TESTS / "support" / "tcc_site"), str(PROJECT_ROOT / "src")]),
        "FAKE_TCC_CHATDB": str(chat_db.path), "FAKE_TCC_GRANTED": str(granted),
    })
    try:
        project = tmp_path / "project"
        project.mkdir()
        osascript = FakeOsascript(tmp_path / "osascript", monkeypatch, chat_db=chat_db.path)
        FakeCodesign(tmp_path / "codesign", monkeypatch)
        FakeTccutil(tmp_path / "tccutil", monkeypatch)
        state = tmp_path / "state" / "relay.db"
        (project / ".env").write_text(
            f"APPLE_FLOW_ALLOWED_SENDERS={OWNER}\nAPPLE_FLOW_MESSAGES_DB_PATH={chat_db.path}\n"
            f"APPLE_FLOW_DB_PATH={state}\nAPPLE_FLOW_OSASCRIPT_COMMAND={osascript.path}\n"
            f"APPLE_FLOW_AFM_COMMAND={tmp_path / 'no-apple-code'}\nAPPLE_FLOW_WEB_ENABLED=false\n"
            f"FAKE_OSASCRIPT_LOG={osascript.log}\nFAKE_OSASCRIPT_CHATDB={chat_db.path}\n"
        )
        monkeypatch.setenv("HOME", str(tmp_path / "home"))
        monkeypatch.setenv("APPLE_FLOW_LOG_DIR", str(tmp_path / "logs"))
        monkeypatch.chdir(project)
        monkeypatch.setattr(host, "is_macos", lambda: True)
        result = CliRunner().invoke(cli_app, ["service", "install", "--wait", "0"])
        assert result.exit_code == 0, result.output

        def chat_db_state() -> CheckStatus | None:
            report = read_report(state)
            return {f.name: f.status for f in report.findings}[CHAT_DB] if report else None

        wait_for(lambda: chat_db_state() is CheckStatus.DENIED, 30, "the service refused chat.db")
        first = read_report(state)
        assert first is not None
        granted.touch()  # the owner switches on Apple Flow under Full Disk Access

        def sends() -> list[str]:
            return [call["argv"][2] for call in osascript.calls() if len(call["argv"]) > 2]

        texts = wait_for(sends, 60, "the ready text")
        assert texts == [ready_text("Apple Flow")]
        (run,) = launchctl.runs("com.apple-flow.daemon")  # exactly one exit: the relaunch
        assert run["status"] == RELAUNCH_EXIT
        assert run["end"] - run["start"] >= THROTTLE_INTERVAL  # never faster than launchd's throttle
        report = read_report(state)
        assert report is not None and report.ok and report.pid != first.pid
        log = (tmp_path / "logs" / "daemon.err.log").read_text()
        assert log.count("exiting for launchd to restart it") == 1
        assert f"exited with status {RELAUNCH_EXIT}" in log
    finally:
        launchctl.kill_all()
