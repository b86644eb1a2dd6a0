"""A fake ``osascript`` (AppleScript cannot run here): it records every call, argv (each private file the daemon
named there read back, as the script reads it; ``raw_argv`` the arguments as given) and the script read from stdin,
as one JSON line in ``$FAKE_OSASCRIPT_LOG``, then answers as Messages would, as the environment says:

FAKE_OSASCRIPT_MODE   ok (default) | fail | fail-participant (the participant form fails, others work) |
                      fail-participant-once | fail-any-guid (``chat id "any;…"`` fails, as on macOS 26) | deny (no
                      Automation permission) | hang | fail-once (the first call fails) | fail-after-first (only the
                      first call works) | no-imessage (no iMessage account: Messages is not signed in)
FAKE_OSASCRIPT_ACCOUNT_ID  the answer to ``get id of 1st account whose service type = iMessage``
FAKE_OSASCRIPT_ACCOUNT_STATE  that account's state, for a script that asks it (``enabled``, ``connection status``):
                      ok (enabled, connected; default) | disabled (listed, switched off) | offline (enabled,
                      disconnected)
FAKE_OSASCRIPT_FAIL   texts containing this are refused (exit 1), as Messages refuses a send
FAKE_OSASCRIPT_HANG   a send whose text (or file path) contains this hangs (a minute) before Messages stores it:
                      a test kills the daemon in the middle of that send
FAKE_OSASCRIPT_DELAY  seconds to wait before answering
FAKE_OSASCRIPT_LINGER seconds to wait after the send's row is in chat.db, before exiting
FAKE_OSASCRIPT_CHATDB a chat.db where each send that succeeds leaves its row, as Messages does: ``is_from_me = 1``
                      in the recipient's chat (the group's for ``chat id``; service SMS for the SMS account); a file
                      (``send POSIX file``) leaves U+FFFC and an attachment row naming the file
FAKE_OSASCRIPT_ROW    that row: sent (default: is_sent = 1) | queued (not sent yet) | error (error = 22) | none
                      (no row: exit 0, nothing delivered) | none-for-buddy (only the buddy form delivers nothing) |
                      none-for-files (texts go, a file send exits 0 and delivers nothing)
FAKE_OSASCRIPT_OWNER  the owner's address: the row's destination_caller_id
FAKE_OSASCRIPT_SELF_COPY  "1": a send to the owner also stores the received copy (texting yourself, one device)
"""

from __future__ import annotations

import itertools
import json
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from support.waiting import wait_for

TESTS = Path(__file__).resolve().parents[1]

SCRIPT = """#!{python}
import json, os, re, sys, time
script = sys.stdin.read()
log = os.environ["FAKE_OSASCRIPT_LOG"]
# The values the daemon hands over in private files (run_osascript_private), as the script reads them: "argv" holds
# them, "raw_argv" what the process table showed; "modes" each file's permission bits.
raw = sys.argv[1:]
private = [os.path.basename(a).startswith("apple-flow-osascript-") and os.path.isfile(a) for a in raw]
argv = [open(a, encoding="utf-8", newline="").read() if p else a for a, p in zip(raw, private)]
modes = [oct(os.stat(a).st_mode & 0o777) if p else None for a, p in zip(raw, private)]
with open(log, "a", encoding="utf-8") as f:
    f.write(json.dumps({{"argv": argv, "raw_argv": raw, "modes": modes, "stdin": script}}) + "\\n")
sys.argv = [sys.argv[0], *argv]
delay = float(os.environ.get("FAKE_OSASCRIPT_DELAY", "0"))
if delay:
    time.sleep(delay)
mode = os.environ.get("FAKE_OSASCRIPT_MODE", "ok")
# Like the real osascript, `tell application "Messages" to get name` (or version) is answered by AppleScript
# itself, without an Apple event to Messages, so it succeeds whatever the mode (never -1743).
if re.search(r'tell application "Messages" to get (name|version)\\s*$', script, re.MULTILINE):
    print("Messages")
    sys.exit(0)
account_query = "get id of 1st account whose service type = iMessage" in script
if mode == "no-imessage" and account_query:
    sys.stderr.write("execution error: Messages got an error: Can't get account 1 whose service type = iMessage. "
                     "Invalid index. (-1719)\\n")
    sys.exit(1)
calls = sum(1 for _ in open(log, encoding="utf-8"))
if mode == "hang":
    time.sleep(120)
hang = os.environ.get("FAKE_OSASCRIPT_HANG")
if hang and len(sys.argv) > 3 and hang in sys.argv[3]:
    time.sleep(60)
refused = os.environ.get("FAKE_OSASCRIPT_FAIL")
failing = (
    mode == "fail"
    or (mode == "fail-participant" and "participant" in script)
    or (mode == "fail-participant-once" and "participant" in script and calls == 1)
    or (mode == "fail-any-guid" and len(sys.argv) > 2 and sys.argv[2].startswith("any;"))
    or (mode == "fail-once" and calls == 1)
    or (mode == "fail-after-first" and calls > 1)
)
if refused and len(sys.argv) > 3 and refused in sys.argv[3]:
    sys.stderr.write("execution error: Messages got an error: Can't send this message. (-1708)\\n")
    sys.exit(1)
if failing:
    sys.stderr.write("execution error: Messages got an error: Can't get participant. (-1728)\\n")
    sys.exit(1)
if mode == "deny":
    sys.stderr.write("execution error: Not authorized to send Apple events to Messages. (-1743)\\n")
    sys.exit(1)
if account_query:
    account = os.environ.get("FAKE_OSASCRIPT_ACCOUNT_ID", "8D5E0A7B-3F1C-4B9E-9C11-2A7E5D40F6B3")
    if "connection status of" in script and "enabled of" in script:
        state = os.environ.get("FAKE_OSASCRIPT_ACCOUNT_STATE", "ok")
        enabled, connection = {{"disabled": ("false", "disconnected"), "offline": ("true", "disconnected")}}.get(
            state, ("true", "connected"))
        account = "\t".join((account, enabled, connection))
    print(account)
chat_db = os.environ.get("FAKE_OSASCRIPT_CHATDB")
row = os.environ.get("FAKE_OSASCRIPT_ROW", "sent")
dropped = (row == "none" or (row == "none-for-buddy" and "buddy" in script)
           or (row == "none-for-files" and "send theFile" in script))
if chat_db and len(sys.argv) > 3 and not dropped:
    sys.path.insert(0, {tests!r})
    from pathlib import Path
    from support.chatdb import ChatDbWriter
    target, text = sys.argv[2], sys.argv[3]
    owner = os.environ.get("FAKE_OSASCRIPT_OWNER")
    service = "SMS" if "service type = SMS" in script else "iMessage"
    db = ChatDbWriter(Path(chat_db))
    status = {{"sent": dict(is_sent=1), "queued": dict(is_sent=0), "error": dict(is_sent=0, error=22)}}
    extra = status.get(row, dict(is_sent=1))
    if "send theFile" in script:  # a file: Messages stores a message of that file alone
        sent = Path(text)
        extra = dict(extra, files=[dict(filename=text, transfer_name=sent.name, is_outgoing=1,
                                        total_bytes=sent.stat().st_size if sent.exists() else -1)])
        text = "\ufffc"
    if "chat id" in script:
        group = target.rsplit(";", 1)[-1]
        db.message(text, sender=None, chat=group, is_from_me=True, destination_caller_id=owner, **extra)
    else:
        db.message(text, sender=target, is_from_me=True, service=service, destination_caller_id=owner, **extra)
        if target == owner and os.environ.get("FAKE_OSASCRIPT_SELF_COPY") == "1":
            db.message(text, sender=target, destination_caller_id=owner, files=extra.get("files"))
    db.close()
time.sleep(float(os.environ.get("FAKE_OSASCRIPT_LINGER", "0")))
"""


def install(folder: Path) -> Path:
    """Writes the fake as ``folder/osascript`` (run by this interpreter) and returns its path."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "osascript"
    path.write_text(SCRIPT.format(python=sys.executable, tests=str(TESTS)), encoding="utf-8")
    path.chmod(0o755)
    return path


class FakeOsascript:
    """tests/support/fake_osascript.py on PATH, leaving each sent text in ``chat_db`` as Messages does."""

    def __init__(self, folder: Path, monkeypatch: pytest.MonkeyPatch, chat_db: Path | None = None) -> None:
        self.log = folder / "calls.jsonl"
        self.path = install(folder)
        self._monkeypatch = monkeypatch
        monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ.get('PATH', '')}")
        monkeypatch.setenv("FAKE_OSASCRIPT_LOG", str(self.log))
        if chat_db is not None:
            monkeypatch.setenv("FAKE_OSASCRIPT_CHATDB", str(chat_db))
        self.mode("ok")

    def mode(self, mode: str) -> None:
        self._monkeypatch.setenv("FAKE_OSASCRIPT_MODE", mode)

    def account(self, state: str) -> None:
        """The iMessage account's state: ok, disabled or offline (see the fake)."""
        self._monkeypatch.setenv("FAKE_OSASCRIPT_ACCOUNT_STATE", state)

    def rows(self, row: str) -> None:
        """What a send leaves in chat.db: sent, queued, error, none, none-for-buddy (see the fake)."""
        self._monkeypatch.setenv("FAKE_OSASCRIPT_ROW", row)

    def owner(self, address: str, received_copy: bool = False) -> None:
        """The Mac's own address; with ``received_copy``, a text sent to it is also stored as received."""
        self._monkeypatch.setenv("FAKE_OSASCRIPT_OWNER", address)
        self._monkeypatch.setenv("FAKE_OSASCRIPT_SELF_COPY", "1" if received_copy else "0")

    def calls(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text(encoding="utf-8").splitlines()]

    def wait_for_calls(self, count: int, timeout: float = 10) -> None:
        """Returns once the fake has been called ``count`` times."""
        wait_for(lambda: len(self.calls()) >= count, timeout, f"{count} osascript calls")


def switches_between_two_replies(send: Callable[[str, str], object], osascript: FakeOsascript) -> tuple[int, int]:
    """Sends two long replies (alice's, bob's) to one recipient from two threads at once with ``send``; returns how
    many parts Messages was asked to send and how often consecutive parts changed reply (1: all of one reply, then
    all of the other)."""
    texts = [" ".join(f"{who} sentence {i}." for i in range(20)) for who in ("alice", "bob")]
    threads = [threading.Thread(target=send, args=("+15551234567", text)) for text in texts]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    owners = ["alice" if "alice" in call["argv"][2] else "bob" for call in osascript.calls()]
    return len(owners), sum(1 for a, b in itertools.pairwise(owners) if a != b)
