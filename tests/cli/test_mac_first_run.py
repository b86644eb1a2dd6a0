"""docs/mac-first-run.md shows the first run on a Mac as the code prints it. This test runs that first run on the
fake Mac of the service tests (the fake launchd really starts the service through Apple Flow.app's launcher; fake
osascript, codesign and an apple-code whose Apple model is ready) in a home folder that looks like a Mac's, and
compares what `apple-flow setup` and `apple-flow service status` print with the doc's transcripts.

``UPDATE_FIRST_RUN_DOC=1`` writes the transcripts into the doc instead (between its ``<!-- transcript:NAME -->``
markers). Paths, pids, the uid and times are shown as on a Mac (``/Users/you``, ``gui/501``)."""

from __future__ import annotations

import os
import re
import secrets
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from apple_flow import host, local_name
from apple_flow import login_service as launchd_module
from apple_flow.channels.imessage.chatdb import ChatDBError, ChatDBProblem
from apple_flow.channels.imessage.permissions import (
    REPORT_KEY,
    PermissionReport,
    Responsible,
    automation_finding,
    chat_db_finding,
    full_disk_access_fix,
)
from apple_flow.channels.imessage.probe import ProbeResult, ProbeState
from apple_flow.cli import app
from apple_flow.cli import service as service_cli
from apple_flow.cli import setup as setup_cli
from apple_flow.daemon.running.owner_notices import chat_db_lost_text, ready_text
from apple_flow.daemon.store import Store
from apple_flow.paths import PROJECT_ROOT
from support.chatdb import ChatDbWriter
from support.daemon_process import wait_for
from support.fake_codesign import FakeCodesign
from support.fake_launchctl import FakeLaunchctl
from support.fake_osascript import FakeOsascript
from support.install import FAKE_APPLE_CODE, install_script

DOC = PROJECT_ROOT / "docs" / "mac-first-run.md"
ANSWERS = ["(555) 123-4567", "", "y", "", "y"]  # number, workspace (default), create it, agent (afm), service
OWNER = "+15551234567"
MAC_HOME = "/Users/you"
APP = Path("Library") / "Application Support" / "Apple Flow" / "Apple Flow.app"


def short_home() -> Path:
    """A home folder of a new temporary folder whose path is as long as ``/Users/you``: rich sizes the doctor's
    table and wraps lines by the real path, so the one shown in its place must take the same room."""
    for _ in range(100):
        path = Path("/tmp") / secrets.token_hex(3)[:5]
        try:
            path.mkdir(mode=0o700)
        except FileExistsError:
            continue
        return path
    raise RuntimeError("no free /tmp/xxxxx folder")


@pytest.fixture
def fake_mac(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, launcher_bin: Path) -> Iterator[dict[str, object]]:
    home = short_home()
    assert len(str(home)) == len(MAC_HOME)
    checkout = home / "apple-flow"
    (home / "Library" / "Messages").mkdir(parents=True)
    apple_code = install_script(FAKE_APPLE_CODE, _folder(checkout / "apple_code" / ".build" / "debug") / "apple-code")
    launchctl = FakeLaunchctl(tmp_path / "fakes", monkeypatch)
    FakeCodesign(tmp_path / "fakes" / "codesign", monkeypatch)
    chat = home / "Library" / "Messages" / "chat.db"
    osascript = FakeOsascript(tmp_path / "fakes" / "osascript", monkeypatch, chat_db=chat)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setenv("APPLE_FLOW_AFM_COMMAND", str(apple_code))
    monkeypatch.setenv("APPLE_FLOW_OSASCRIPT_COMMAND", str(osascript.path))
    monkeypatch.chdir(checkout)
    monkeypatch.setattr(host, "is_macos", lambda: True)
    monkeypatch.setattr(setup_cli, "PROJECT_ROOT", checkout)
    monkeypatch.setattr(launchd_module, "POLL_SECONDS", 0.05)
    # A new Mac: the page is on (as setup leaves it), and Safari's resolver knows only the bare localhost.
    monkeypatch.setenv("APPLE_FLOW_WEB_ENABLED", "true")
    monkeypatch.setattr(local_name, "RESOLVE", macos_resolver)
    # What launchd's bare environment does not give the service: where the fakes are.
    (checkout / ".env").write_text(
        f"APPLE_FLOW_AFM_COMMAND={apple_code}\nAPPLE_FLOW_OSASCRIPT_COMMAND={osascript.path}\n"
        f"FAKE_OSASCRIPT_LOG={osascript.log}\nFAKE_OSASCRIPT_CHATDB={chat}\n"
    )
    yield {"home": home, "chat": chat, "launchctl": launchctl, "osascript": osascript, "tmp": tmp_path}
    launchctl.kill_all()
    shutil.rmtree(home, ignore_errors=True)


def macos_resolver(name: str, port: object) -> list[object]:
    """macOS's system resolver, as Safari meets it: no name under .localhost resolves, without an /etc/hosts line."""
    raise socket.gaierror(8, "nodename nor servname provided, or not known")


def _folder(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def as_on_a_mac(text: str, home: Path, tmp: Path) -> str:
    text = text.replace(str(home), MAC_HOME).replace(str(tmp), "/private/var/folders/xy")
    text = text.replace(f"gui/{os.getuid()}/", "gui/501/")
    text = re.sub(r"pid \d+", "pid 812", text)
    text = re.sub(r"code hash [0-9a-f]{12}", "code hash 5c1f0e27a9b3", text)  # a Mac build's bytes differ
    # A moment as times.moment writes it: its time today, with the date on another day.
    text = re.sub(r"started (\d{4}-\d\d-\d\d |[A-Z][a-z]{2} \d\d )?\d\d:\d\d(:\d\d)?", "started 09:12", text)
    return "\n".join(line.rstrip() for line in text.strip().splitlines())


def first_run(fake_mac: dict[str, object], monkeypatch: pytest.MonkeyPatch, granted: bool) -> str:
    home, tmp = Path(str(fake_mac["home"])), Path(str(fake_mac["tmp"]))
    launchctl = fake_mac["launchctl"]
    assert isinstance(launchctl, FakeLaunchctl)
    ChatDbWriter(Path(str(fake_mac["chat"]))).close()  # Messages' database, with no message yet
    if granted:
        launchctl.configure(run=True)
        monkeypatch.setattr(service_cli, "REPORT_WAIT_SECONDS", 60)
    else:
        # The service without Full Disk Access: macOS's refusal cannot happen here (and root reads every file), so
        # its report is the one the same code writes for it (see test_setup.py).
        monkeypatch.setattr(service_cli, "REPORT_WAIT_SECONDS", 10)
        threading.Thread(target=_service_without_full_disk_access, args=(home,), daemon=True).start()
    runner = CliRunner()
    setup = runner.invoke(app, ["setup"], input="".join(f"{answer}\n" for answer in ANSWERS))
    status = runner.invoke(app, ["service", "status"])
    transcript = (
        f"$ ./scripts/run.sh\n...\n{setup.output}\n"
        f"$ .venv/bin/apple-flow service status    # what run.sh shows next (exit {status.exit_code})\n{status.output}"
    )
    return as_on_a_mac(transcript, home, tmp)


def _service_without_full_disk_access(home: Path) -> None:
    plist = home / "Library" / "LaunchAgents" / "com.apple-flow.daemon.plist"
    wait_for(plist.exists, 60, "the plist")
    app_ = Responsible("Apple Flow", False, str(home / APP))

    def denied() -> int:
        raise ChatDBError(ChatDBProblem.NO_PERMISSION, "authorization denied", "")

    findings = (
        chat_db_finding(denied, home / "Library" / "Messages" / "chat.db", app_),
        automation_finding(ProbeResult(
            ProbeState.OK, "Apple Flow may control Messages (iMessage account 8D5E0A7B-3F1C-4B9E-9C11-2A7E5D40F6B3)"
        )),
    )
    store = Store(home / ".apple-flow" / "relay.db")
    store.meta.set_meta(REPORT_KEY, PermissionReport("Apple Flow", 4242, time.time(), findings).to_json())
    store.close()


def doc_transcript(name: str) -> str:
    text = DOC.read_text(encoding="utf-8")
    found = re.search(rf"<!-- transcript:{name} -->\n```text\n(.*?)\n```\n<!-- /transcript:{name} -->", text, re.S)
    assert found, f"{DOC} has no transcript:{name} block"
    return found.group(1)


def check_or_update(name: str, transcript: str) -> None:
    if os.environ.get("UPDATE_FIRST_RUN_DOC"):
        text = DOC.read_text(encoding="utf-8")
        text = re.sub(
            rf"(<!-- transcript:{name} -->\n```text\n).*?(\n```\n<!-- /transcript:{name} -->)",
            lambda match: match.group(1) + transcript + match.group(2), text, flags=re.S,
        )
        DOC.write_text(text, encoding="utf-8")
    assert doc_transcript(name) == transcript, (
        f"{DOC.name} no longer shows what the code prints: UPDATE_FIRST_RUN_DOC=1 pytest {__file__}"
    )


def test_the_doc_shows_the_first_run_of_a_mac_where_everything_is_granted(
    fake_mac: dict[str, object], monkeypatch: pytest.MonkeyPatch
) -> None:
    transcript = first_run(fake_mac, monkeypatch, granted=True)
    assert "Ready: text yourself `help` from your phone." in transcript
    check_or_update("granted", transcript)
    osascript = fake_mac["osascript"]
    assert isinstance(osascript, FakeOsascript)
    texts = wait_for(lambda: [c["argv"][2] for c in osascript.calls() if len(c["argv"]) > 2], 30, "the ready text")
    assert texts == [ready_text("Apple Flow")]
    assert f"> {ready_text('Apple Flow')}" in DOC.read_text(encoding="utf-8")


def test_the_doc_shows_the_first_run_of_a_mac_without_full_disk_access(
    fake_mac: dict[str, object], monkeypatch: pytest.MonkeyPatch
) -> None:
    transcript = first_run(fake_mac, monkeypatch, granted=False)
    assert "Not ready yet:" in transcript and "exit 3" in transcript
    check_or_update("no-full-disk-access", transcript)
    home = Path(str(fake_mac["home"]))
    fix = full_disk_access_fix(Responsible("Apple Flow", False, str(home / APP)))
    assert f"> {chat_db_lost_text('Apple Flow', fix)}" in DOC.read_text(encoding="utf-8")
