"""The daemon checks its own permissions (chat.db, Automation) at start, names the app macOS charges them to, and
reports them in its log, its store (for `service status`) and `health`; while chat.db cannot be read it stays up
and tries again with a growing pause instead of exiting into launchd's restart loop."""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from apple_flow.channels.base import Access
from apple_flow.channels.imessage.chatdb import ChatDBError, ChatDBProblem, python_binary
from apple_flow.channels.imessage.permissions import (
    AUTOMATION,
    CHAT_DB,
    PermissionMonitor,
    PermissionReport,
    Responsible,
    chat_db_finding,
    read_report,
    responsible_app,
)
from apple_flow.check_result import CheckResult, CheckStatus
from apple_flow.config import Settings, load_settings
from apple_flow.daemon.store import Store
from support.chatdb import ChatDbWriter
from support.daemon_process import DaemonProcess, wait_for
from support.fake_osascript import FakeOsascript

ANA = "+15551234567"
SERVICE = Responsible("/opt/venv/bin/python3.12", terminal=False)


@pytest.fixture
def probe_osascript(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeOsascript:
    """The fake osascript without a chat.db (the shared ``fake_osascript`` makes one: here it must be missing)."""
    return FakeOsascript(tmp_path / "bin", monkeypatch)


def settings_for(chat_db: Path, **overrides: Any) -> Settings:
    return load_settings(env_file=None, messages_db_path=chat_db, poll_interval_seconds=0.1, **overrides)


@pytest.mark.parametrize(
    ("environ", "name", "terminal"),
    [
        ({"TERM_PROGRAM": "Apple_Terminal"}, "Terminal", True),
        ({"TERM_PROGRAM": "iTerm.app"}, "iTerm", True),
        ({"TERM_PROGRAM": "vscode", "__CFBundleIdentifier": "com.microsoft.VSCode"}, "Visual Studio Code", True),
        ({"__CFBundleIdentifier": "com.jetbrains.pycharm"}, "com.jetbrains.pycharm", True),
        ({"XPC_SERVICE_NAME": "com.apple-flow.daemon"}, str(python_binary()), False),  # a job running Python
    ],
)
def test_the_responsible_app_is_the_terminal_or_else_the_python_binary(
    environ: dict[str, str], name: str, terminal: bool
) -> None:
    assert responsible_app(environ) == Responsible(name, terminal)


def test_under_the_launcher_the_responsible_app_is_apple_flow(tmp_path: Path) -> None:
    bundle = tmp_path / "Library" / "Application Support" / "Apple Flow" / "Apple Flow.app"
    launcher = str(bundle / "Contents" / "MacOS" / "Apple Flow")
    # launchd may also set the bundle's identifier; the launcher's own variable says which app it is.
    service = responsible_app({"APPLE_FLOW_LAUNCHER": launcher, "__CFBundleIdentifier": "com.apple-flow.launcher"})
    assert service == Responsible("Apple Flow", False, str(bundle))
    # Started from a terminal, the terminal is what macOS asks about.
    assert responsible_app({"APPLE_FLOW_LAUNCHER": launcher, "TERM_PROGRAM": "Apple_Terminal"}).name == "Terminal"
    # A launcher outside an app bundle is named by its path.
    assert responsible_app({"APPLE_FLOW_LAUNCHER": "/opt/bin/apple-flow-launcher"}) == Responsible(
        "/opt/bin/apple-flow-launcher", False
    )


def test_the_full_disk_access_fix_names_apple_flow_and_where_to_find_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    bundle = tmp_path / "Library" / "Application Support" / "Apple Flow" / "Apple Flow.app"

    def denied() -> int:
        raise ChatDBError(ChatDBProblem.NO_PERMISSION, "authorization denied", "grant Full Disk Access")

    finding = chat_db_finding(denied, tmp_path / "chat.db", Responsible("Apple Flow", False, str(bundle)))
    assert finding.status is CheckStatus.DENIED and finding.detail == f"Apple Flow may not read {tmp_path / 'chat.db'}"
    assert finding.fix == (
        "switch on Apple Flow in System Settings > Privacy & Security > Full Disk Access (not listed? the + button, "
        "then Cmd+Shift+G and ~/Library/Application Support/Apple Flow/Apple Flow.app); the service sees the grant "
        "and restarts itself to use it (or run `apple-flow service restart`)"
    )


def test_no_full_disk_access_names_the_app_and_where_to_grant_it(tmp_path: Path) -> None:
    def denied() -> int:
        raise ChatDBError(ChatDBProblem.NO_PERMISSION, "authorization denied", "grant Full Disk Access")

    service = chat_db_finding(denied, tmp_path / "chat.db", SERVICE)
    assert service.status is CheckStatus.DENIED and SERVICE.name in service.detail
    assert "System Settings > Privacy & Security > Full Disk Access" in service.fix
    assert "apple-flow service restart" in service.fix and SERVICE.name in service.fix
    terminal = chat_db_finding(denied, tmp_path / "chat.db", Responsible("Terminal", terminal=True))
    assert "grant Full Disk Access to Terminal" in terminal.fix and "quit and reopen Terminal" in terminal.fix
    assert "does not cover the service" in terminal.fix


def test_the_monitor_probes_automation_at_start_and_records_a_report(
    chat_db: ChatDbWriter, store: Store, probe_osascript: FakeOsascript
) -> None:
    chat_db.message("hello", sender=ANA)
    monitor = PermissionMonitor(settings_for(chat_db.path), store.meta, app=SERVICE)
    monitor.start()
    report = wait_for(lambda: (r := read_report(store.path)) and r.settled and r, 10, "a settled report")
    monitor.close()
    assert report.ok and report.app == SERVICE.name
    findings = {f.name: f for f in report.findings}
    assert "readable by /opt/venv/bin/python3.12 (newest message 1)" in findings[CHAT_DB].detail
    assert "may control Messages (iMessage account 8D5E0A7B" in findings[AUTOMATION].detail
    (call,) = probe_osascript.calls()
    assert call["argv"] == ["-"] and "get id of 1st account whose service type = iMessage" in call["stdin"]
    assert "Permissions of /opt/venv/bin/python3.12: chat.db (Full Disk Access): ok" in monitor.summary()


def test_a_refused_automation_is_reported_with_its_fix_and_probed_again(
    chat_db: ChatDbWriter, store: Store, probe_osascript: FakeOsascript, caplog: pytest.LogCaptureFixture
) -> None:
    probe_osascript.mode("deny")
    monitor = PermissionMonitor(settings_for(chat_db.path), store.meta, app=SERVICE)
    with caplog.at_level(logging.INFO, logger="apple_flow.channels.imessage.permissions"):
        monitor.start()
        wait_for(lambda: len(probe_osascript.calls()) >= 2, 10, "a second probe")
        probe_osascript.mode("ok")
        wait_for(lambda: (r := read_report(store.path)) and r.ok, 10, "the report to turn ok")
    monitor.close()
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert any("Messages (Automation): denied" in e and "Privacy & Security > Automation" in e for e in errors)
    assert len(errors) == 1  # one line per change, not one per probe


def test_an_offline_imessage_account_is_not_ready_until_it_connects(
    chat_db: ChatDbWriter, store: Store, probe_osascript: FakeOsascript
) -> None:
    probe_osascript.account("offline")
    monitor = PermissionMonitor(settings_for(chat_db.path), store.meta, app=SERVICE)
    monitor.start()
    report = wait_for(lambda: (r := read_report(store.path)) and r.settled and r, 10, "a settled report")
    automation = {f.name: f for f in report.findings}[AUTOMATION]
    assert not report.ok and automation.status is CheckStatus.FAIL
    assert "but the account is disconnected" in automation.detail and "signed in to iMessage" in automation.fix
    probe_osascript.account("ok")  # Messages connects again
    wait_for(lambda: (r := read_report(store.path)) and r.ok, 10, "the report to turn ok")
    monitor.close()


def test_waiting_for_chat_db_backs_off_and_ends_when_it_is_readable(
    tmp_path: Path, store: Store, probe_osascript: FakeOsascript, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "Messages" / "chat.db"
    monitor = PermissionMonitor(settings_for(path), store.meta, app=SERVICE)
    ready: list[bool] = []
    stop = threading.Event()
    with caplog.at_level(logging.INFO, logger="apple_flow.channels.imessage.permissions"):
        monitor.start()
        waiter = threading.Thread(target=lambda: ready.append(monitor.wait_until_ready(stop)))
        waiter.start()
        wait_for(lambda: "trying again in 0.4 s" in caplog.text, 10, "the third pause")
        report = read_report(store.path)
        assert report is not None
        chat = {f.name: f for f in report.findings}[CHAT_DB]
        assert chat.status is CheckStatus.FAIL and "does not exist" in chat.detail
        ChatDbWriter(path).close()
        waiter.join(10)
    assert ready == [True]
    pauses = [r.getMessage() for r in caplog.records if "trying again in" in r.getMessage()]
    assert pauses[:3] == [f"cannot read messages yet; trying again in {p} s" for p in ("0.1", "0.2", "0.4")]
    monitor.close()


class CountingStop(threading.Event):
    """A stop event that records each pause asked of it and makes chat.db readable after ``readable_after``."""

    def __init__(self, make_readable: Any, readable_after: int) -> None:
        super().__init__()
        self.pauses: list[float] = []
        self._make_readable = make_readable
        self._after = readable_after

    def wait(self, timeout: float | None = None) -> bool:
        self.pauses.append(timeout or 0)
        if len(self.pauses) == self._after:
            self._make_readable()
        return False


@pytest.mark.parametrize(("minutes_ago", "expected"), [
    (1, [3.0] * 6),  # just installed: the owner is in System Settings now
    (11, [0.1, 0.2, 0.4, 0.8, 1.6, 3.2]),  # later: the usual back-off
])
def test_just_after_an_install_a_missing_chat_db_is_checked_every_few_seconds(
    tmp_path: Path, store: Store, minutes_ago: int, expected: list[float]
) -> None:
    path = tmp_path / "Messages" / "chat.db"
    monitor = PermissionMonitor(settings_for(path), store.meta, app=SERVICE,
                                installed_at=time.time() - minutes_ago * 60)
    stop = CountingStop(lambda: ChatDbWriter(path).close(), readable_after=6)
    assert monitor.wait_until_ready(stop) is True
    assert stop.pauses == expected


def test_the_readers_news_about_chat_db_reaches_the_report_and_the_listeners(
    chat_db: ChatDbWriter, store: Store
) -> None:
    chat_db.message("hello", sender=ANA)
    monitor = PermissionMonitor(settings_for(chat_db.path), store.meta, app=SERVICE)
    heard: list[CheckStatus] = []
    monitor.listen(lambda report: heard.append({f.name: f.status for f in report.findings}[CHAT_DB]))
    monitor.wait_until_ready(threading.Event())
    monitor.chat_db_state(ChatDBError(ChatDBProblem.LOCKED, "locked", "wait"))  # Messages writing: not a permission
    monitor.chat_db_state(ChatDBError(ChatDBProblem.NO_PERMISSION, "authorization denied", "grant it"))
    report = read_report(store.path)
    assert report is not None
    chat = {f.name: f for f in report.findings}[CHAT_DB]
    assert chat.status is CheckStatus.DENIED and "System Settings > Privacy & Security > Full Disk Access" in chat.fix
    monitor.chat_db_state(None)  # readable again
    assert heard == [CheckStatus.CHECKING, CheckStatus.OK, CheckStatus.DENIED, CheckStatus.OK]


def test_the_daemon_hears_the_report_as_access_and_only_a_refusal_counts_as_unreadable(
    chat_db: ChatDbWriter, store: Store
) -> None:
    # The daemon's owner notices know nothing of findings: sending is Automation, reading is chat.db, and a problem
    # that is not a refusal (a lock) or a check still running is "not known", never "refused".
    def access(chat: CheckStatus, automation: CheckStatus) -> Access:
        findings = (CheckResult(CHAT_DB, chat, "chat.db", "grant it"), CheckResult(AUTOMATION, automation, "Messages"))
        return PermissionReport("Apple Flow", 1, 0.0, findings).access()

    assert access(CheckStatus.OK, CheckStatus.OK) == Access("Apple Flow", True, True, "grant it")
    assert access(CheckStatus.DENIED, CheckStatus.FAIL) == Access("Apple Flow", False, False, "grant it")
    assert access(CheckStatus.FAIL, CheckStatus.CHECKING) == Access("Apple Flow", None, None, "grant it")
    assert access(CheckStatus.CHECKING, CheckStatus.DENIED) == Access("Apple Flow", False, None, "grant it")
    chat_db.message("hello", sender=ANA)
    monitor = PermissionMonitor(settings_for(chat_db.path), store.meta, app=SERVICE)
    heard: list[Access] = []
    monitor.on_access(heard.append)
    monitor.wait_until_ready(threading.Event())
    assert [(a.app, a.can_read) for a in heard] == [(SERVICE.name, None), (SERVICE.name, True)]


def test_a_stop_request_ends_the_wait(tmp_path: Path, store: Store, probe_osascript: FakeOsascript) -> None:
    monitor = PermissionMonitor(settings_for(tmp_path / "nowhere.db"), store.meta, app=SERVICE)
    monitor.start()
    stop = threading.Event()
    threading.Timer(0.5, stop.set).start()
    started = time.monotonic()
    assert monitor.wait_until_ready(stop) is False
    assert time.monotonic() - started < 5
    monitor.close()


def test_a_daemon_that_cannot_read_chat_db_stays_up_says_why_and_starts_once_it_can(
    tmp_path: Path, workspace: Path
) -> None:
    missing = tmp_path / "later" / "chat.db"
    daemon = DaemonProcess(
        tmp_path / "daemon", missing,
        {"APPLE_FLOW_ALLOWED_SENDERS": ANA, "APPLE_FLOW_DEFAULT_WORKSPACE": str(workspace),
         "APPLE_FLOW_AFM_COMMAND": str(tmp_path / "no-apple-code")},
    )
    try:
        daemon.start(ready="trying again in 0.2 s")
        wait_for(lambda: daemon.log().count("trying again in") >= 2, 10, "a second try")
        assert daemon.process is not None and daemon.process.poll() is None, daemon.log()
        assert "does not exist" in daemon.log()
        report = wait_for(lambda: read_report(daemon.db_path), 10, "the report")
        assert {f.name: f.status for f in report.findings}[CHAT_DB] is CheckStatus.FAIL

        writer = ChatDbWriter(missing)
        wait_for(lambda: "apple-flow daemon ready" in daemon.log(), 20, "the daemon to start reading")
        writer.message("health", sender=ANA)
        reply = wait_for(lambda: daemon.sends_to(ANA), 20, "the health reply")[0]
        writer.close()
        assert "chat.db (Full Disk Access): ok" in reply and "Messages (Automation): ok" in reply
    finally:
        daemon.stop()


def test_under_the_launcher_the_channels_own_hints_name_apple_flow(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from apple_flow.channels.imessage.chatdb import full_disk_access_hint
    from apple_flow.channels.imessage.egress import automation_hint

    assert "from a terminal" in automation_hint()  # run by hand: the terminal's app
    bundle = tmp_path / "Apple Flow.app"
    monkeypatch.setenv("APPLE_FLOW_LAUNCHER", str(bundle / "Contents" / "MacOS" / "Apple Flow"))
    assert automation_hint() == (
        "switch on Messages under Apple Flow in System Settings > Privacy & Security > Automation"
    )
    assert full_disk_access_hint().startswith(
        "switch on Apple Flow in System Settings > Privacy & Security > Full Disk Access"
    )
    assert str(bundle) in full_disk_access_hint() and "python" not in full_disk_access_hint()


def test_a_report_keeps_the_shared_check_results_and_reads_one_written_before_them() -> None:
    denied = CheckResult(CHAT_DB, CheckStatus.DENIED, "may not read chat.db", "grant Full Disk Access")
    report = PermissionReport("Apple Flow", 42, 1.0, (denied, CheckResult(AUTOMATION, CheckStatus.OK, "allowed")))
    assert PermissionReport.from_json(report.to_json()) == report
    # A daemon still running the version before wrote "state" and called a failure "problem".
    older = json.dumps({"app": "Apple Flow", "pid": 42, "started_at": 1.0, "findings": [
        {"name": CHAT_DB, "state": "problem", "detail": "no chat.db", "fix": "open Messages once"}]})
    [result] = PermissionReport.from_json(older).findings
    assert (result.status, result.ok, result.fix) == (CheckStatus.FAIL, False, "open Messages once")
