"""The service texts the owner when its permissions are first complete, and once when Full Disk Access goes missing
later while it can still send; what it said is kept in the store (a restart repeats nothing). The end-to-end test
runs the installed service (the fake launchd starts it through Apple Flow.app's real launcher) and reads the text
from the fake osascript's record of what Messages was asked to send."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from apple_flow import host
from apple_flow import login_service as launchd_module
from apple_flow.channels.base import Access
from apple_flow.channels.imessage.permissions import AUTOMATION, CHAT_DB, PermissionReport
from apple_flow.check_result import CheckResult, CheckStatus
from apple_flow.cli import app
from apple_flow.cli import service as service_cli
from apple_flow.daemon.deciding.commands import HELP_TEXT
from apple_flow.daemon.running.owner_notices import CHAT_DB_LOST_KEY, READY_KEY, OwnerNotices
from apple_flow.daemon.store import Store
from apple_flow.paths import PROJECT_ROOT
from support.chatdb import ChatDbWriter
from support.daemon_process import wait_for
from support.fake_codesign import FakeCodesign
from support.fake_launchctl import FakeLaunchctl
from support.fake_osascript import FakeOsascript

OWNER = "+15551234567"
FIX = "switch on Apple Flow in System Settings > Privacy & Security > Full Disk Access"


def report(chat_db: CheckStatus, automation: CheckStatus) -> Access:
    """The iMessage channel's permission report, as the daemon's notices get it (``PermissionMonitor.on_access``)."""
    return PermissionReport("Apple Flow", 1, 0.0, (
        CheckResult(CHAT_DB, chat_db, "chat.db", FIX if chat_db is CheckStatus.DENIED else ""),
        CheckResult(AUTOMATION, automation, "Messages"),
    )).access()


class Phone:
    """Records what was sent; ``failing`` makes the next sends fail."""

    def __init__(self) -> None:
        self.texts: list[tuple[str, str]] = []
        self.failing = False

    def send(self, recipient: str, text: str) -> str | None:
        if self.failing:
            return "Messages did not answer"
        self.texts.append((recipient, text))
        return None


def test_ready_is_said_once_when_both_permissions_are_first_complete(store: Store) -> None:
    phone = Phone()
    notices = OwnerNotices(store, OWNER)
    notices.update(report(CheckStatus.CHECKING, CheckStatus.CHECKING))
    notices.attach(phone.send)  # the daemon can send only once it is built
    notices.update(report(CheckStatus.OK, CheckStatus.CHECKING))
    notices.update(report(CheckStatus.OK, CheckStatus.DENIED))
    assert phone.texts == []  # not ready yet, and it could not send anyway
    notices.update(report(CheckStatus.OK, CheckStatus.OK))
    notices.update(report(CheckStatus.OK, CheckStatus.OK))
    assert len(phone.texts) == 1
    recipient, text = phone.texts[0]
    assert recipient == OWNER
    assert text.startswith("Apple Flow is ready on your Mac") and "Text `help`" in text

    restarted = OwnerNotices(store, OWNER)  # a restart (the record is in the store)
    restarted.attach(phone.send)
    restarted.update(report(CheckStatus.OK, CheckStatus.OK))
    assert len(phone.texts) == 1


def test_a_report_that_came_before_the_daemon_could_send_is_acted_on_when_it_can(store: Store) -> None:
    phone = Phone()
    notices = OwnerNotices(store, OWNER)
    notices.update(report(CheckStatus.OK, CheckStatus.OK))
    notices.attach(phone.send)
    assert [text[:10] for _, text in phone.texts] == ["Apple Flow"]


def test_full_disk_access_lost_later_is_said_once_with_what_to_grant(store: Store) -> None:
    phone = Phone()
    notices = OwnerNotices(store, OWNER)
    notices.attach(phone.send)
    notices.update(report(CheckStatus.DENIED, CheckStatus.OK))
    assert phone.texts == []  # never ready before: setup and `service status` say what to grant, not a text
    notices.update(report(CheckStatus.OK, CheckStatus.OK))
    notices.update(report(CheckStatus.DENIED, CheckStatus.OK))
    notices.update(report(CheckStatus.DENIED, CheckStatus.OK))
    assert len(phone.texts) == 2
    lost = phone.texts[1][1]
    assert lost == f"Apple Flow can no longer read your messages (Full Disk Access is off for it). On the Mac: {FIX}."
    assert store.meta.get_meta(CHAT_DB_LOST_KEY) == "sent"

    restarted = OwnerNotices(store, OWNER)  # still missing after a restart: nothing new to say
    restarted.attach(phone.send)
    restarted.update(report(CheckStatus.DENIED, CheckStatus.OK))
    assert len(phone.texts) == 2
    restarted.update(report(CheckStatus.OK, CheckStatus.OK))  # granted again: no second welcome
    restarted.update(report(CheckStatus.DENIED, CheckStatus.OK))  # lost again: said again
    assert len(phone.texts) == 3 and phone.texts[2][1] == lost


def test_nothing_is_sent_while_messages_refuses_or_without_an_owner(store: Store) -> None:
    phone = Phone()
    notices = OwnerNotices(store, None)
    notices.attach(phone.send)
    notices.update(report(CheckStatus.OK, CheckStatus.OK))
    assert phone.texts == [] and store.meta.get_meta(READY_KEY) is None


def test_a_text_that_could_not_be_sent_is_tried_again_at_the_next_change(store: Store) -> None:
    phone = Phone()
    phone.failing = True
    notices = OwnerNotices(store, OWNER)
    notices.attach(phone.send)
    notices.update(report(CheckStatus.OK, CheckStatus.OK))
    assert store.meta.get_meta(READY_KEY) is None
    phone.failing = False
    notices.update(report(CheckStatus.OK, CheckStatus.OK))
    assert len(phone.texts) == 1 and store.meta.get_meta(READY_KEY) == "sent"


def test_the_installed_service_texts_the_owner_that_it_is_ready(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chat_db: ChatDbWriter, launcher_bin: Path
) -> None:
    launchctl = FakeLaunchctl(tmp_path, monkeypatch)
    monkeypatch.setattr(launchd_module, "POLL_SECONDS", 0.05)
    try:
        _install_and_wait_for_the_ready_text(tmp_path, monkeypatch, chat_db, launchctl)
    finally:
        launchctl.kill_all()


def _install_and_wait_for_the_ready_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chat_db: ChatDbWriter, launchctl: FakeLaunchctl
) -> None:
    launchctl.configure(run=True)
    project = tmp_path / "project"
    project.mkdir()
    osascript = FakeOsascript(tmp_path / "osascript", monkeypatch, chat_db=chat_db.path)
    FakeCodesign(tmp_path / "codesign", monkeypatch)
    state = tmp_path / "state" / "relay.db"
    (project / ".env").write_text(
        f"APPLE_FLOW_ALLOWED_SENDERS={OWNER}\n"
        f"APPLE_FLOW_MESSAGES_DB_PATH={chat_db.path}\nAPPLE_FLOW_DB_PATH={state}\n"
        f"APPLE_FLOW_OSASCRIPT_COMMAND={osascript.path}\n"
        f"APPLE_FLOW_AFM_COMMAND={tmp_path / 'no-apple-code'}\n"
        "APPLE_FLOW_POLL_INTERVAL_SECONDS=0.2\n"
        f"FAKE_OSASCRIPT_LOG={osascript.log}\nFAKE_OSASCRIPT_CHATDB={chat_db.path}\n"
    )
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("APPLE_FLOW_LOG_DIR", str(tmp_path / "logs"))
    monkeypatch.chdir(project)
    monkeypatch.setattr(host, "is_macos", lambda: True)
    monkeypatch.setattr(service_cli, "REPORT_WAIT_SECONDS", 0)
    result = CliRunner().invoke(app, ["service", "install", "--wait", "60"])
    assert result.exit_code == 0, result.output

    def sends() -> list[dict[str, Any]]:
        return [call for call in osascript.calls() if len(call["argv"]) > 2]

    sent = wait_for(sends, 30, "the ready text")
    ready = sent[0]["argv"][2]
    assert sent[0]["argv"][1] == OWNER and ready.startswith("Apple Flow is ready on your Mac")
    # Once: the owner's `help`, read after the permission reports that sent it, is answered next.
    chat_db.message("help", sender=OWNER)
    sent = wait_for(lambda: sends() if len(sends()) >= 2 else None, 30, "the answer to help")
    assert [call["argv"][2] for call in sent] == [ready, HELP_TEXT]


def test_after_a_new_build_of_the_app_the_owner_is_told_how_to_give_full_disk_access_again(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, launcher_bin: Path
) -> None:
    from apple_flow.app_bundle import install_app
    from apple_flow.assemble import app_rebuilt

    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    FakeCodesign(tmp_path / "codesign", monkeypatch)
    install_app(launcher_bin, home)
    rebuilt_launcher = tmp_path / "rebuilt"
    rebuilt_launcher.write_bytes(launcher_bin.read_bytes() + b"\0another toolchain")
    installed = install_app(rebuilt_launcher, home)
    assert installed.replaced_hash and installed.replaced_hash != installed.code_hash
    # The service, as the launcher starts it: it reads what its install replaced.
    monkeypatch.setenv("APPLE_FLOW_LAUNCHER", str(installed.executable))
    rebuilt = app_rebuilt()
    assert rebuilt is not None and rebuilt.code_hash == installed.code_hash

    phone = Phone()
    notices = OwnerNotices(store, OWNER, rebuilt)
    notices.attach(phone.send)
    notices.update(report(CheckStatus.DENIED, CheckStatus.DENIED))  # cannot send yet: the Automation answer went too
    assert phone.texts == []
    notices.update(report(CheckStatus.DENIED, CheckStatus.OK))  # Allow clicked again: it can send
    notices.update(report(CheckStatus.DENIED, CheckStatus.OK))
    assert phone.texts == [(OWNER, (
        "Apple Flow on your Mac is a new build, and macOS no longer applies the Full Disk Access given to the old one "
        "(System Settings may still show it switched on). On the Mac: remove Apple Flow from System Settings > "
        "Privacy & Security > Full Disk Access (select it, then the - button) and add it again (the + button, then "
        "Cmd+Shift+G and ~/Library/Application Support/Apple Flow/Apple Flow.app)."
    ))]
    assert f"> {phone.texts[0][1]}" in (PROJECT_ROOT / "docs" / "mac-first-run.md").read_text()
    restarted = OwnerNotices(store, OWNER, rebuilt)  # once per build, across restarts
    restarted.attach(phone.send)
    restarted.update(report(CheckStatus.DENIED, CheckStatus.OK))
    assert len(phone.texts) == 1

    monkeypatch.setenv("APPLE_FLOW_LAUNCHER", str(tmp_path / "apple-flow-launcher"))  # not an app: nothing to say
    assert app_rebuilt() is None
