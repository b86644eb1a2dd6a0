"""A fake ``osascript`` on PATH for the iMessage egress tests: it records the argv and stdin of every call and
behaves as the test says (works, fails, hangs, Automation denied, or stores what was sent in a chat.db as Messages
does when you text yourself)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

# Records argv and stdin of every call, then behaves as FAKE_OSASCRIPT_MODE says:
#   ok | fail | fail-participant (the participant form fails, the buddy form works) | deny (no Automation
#   permission) | hang | fail-once (fails the first call only) | fail-after-first (only the first call works) |
#   no-imessage (no iMessage account: Messages is not signed in).
# Like the real osascript, `tell application "Messages" to get name` (or version) is answered by AppleScript
# itself, without an Apple event to Messages, so it succeeds whatever the mode (never -1743).
FAKE_OSASCRIPT = """#!{python}
import json, os, re, sys, time
script = sys.stdin.read()
log = os.environ["FAKE_OSASCRIPT_LOG"]
with open(log, "a", encoding="utf-8") as f:
    f.write(json.dumps({{"argv": sys.argv[1:], "stdin": script}}) + "\\n")
mode = os.environ.get("FAKE_OSASCRIPT_MODE", "ok")
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
failing = (
    mode == "fail"
    or (mode == "fail-participant" and "participant" in script)
    or (mode == "fail-once" and calls == 1)
    or (mode == "fail-after-first" and calls > 1)
)
if failing:
    sys.stderr.write("execution error: Messages got an error: Can't get participant. (-1728)\\n")
    sys.exit(1)
if mode == "deny":
    sys.stderr.write("execution error: Not authorized to send Apple events to Messages. (-1743)\\n")
    sys.exit(1)
if account_query:
    print(os.environ.get("FAKE_OSASCRIPT_ACCOUNT_ID", "8D5E0A7B-3F1C-4B9E-9C11-2A7E5D40F6B3"))
# Like Messages when you text yourself: the sent message is stored, and comes back as an incoming copy.
if len(sys.argv) > 3 and os.environ.get("FAKE_OSASCRIPT_SELF_HANDLE") == sys.argv[2]:
    sys.path.insert(0, os.environ["FAKE_OSASCRIPT_TESTS"])
    from pathlib import Path
    from support.chatdb import ChatDbWriter
    db = ChatDbWriter(Path(os.environ["FAKE_OSASCRIPT_CHATDB"]))
    db.message(sys.argv[3], sender=sys.argv[2], is_from_me=True)
    db.message(sys.argv[3], sender=sys.argv[2])
    db.close()
"""


class FakeOsascript:
    def __init__(self, folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.log = folder / "calls.jsonl"
        self.path = folder / "osascript"
        self.path.write_text(FAKE_OSASCRIPT.format(python=sys.executable), encoding="utf-8")
        self.path.chmod(0o755)
        self._monkeypatch = monkeypatch
        monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ.get('PATH', '')}")
        monkeypatch.setenv("FAKE_OSASCRIPT_LOG", str(self.log))
        self.mode("ok")

    def mode(self, mode: str) -> None:
        self._monkeypatch.setenv("FAKE_OSASCRIPT_MODE", mode)

    def store_self_messages(self, handle: str, chat_db: Path) -> None:
        """Messages sent to ``handle`` are written to ``chat_db`` twice, as Messages does for your own handle."""
        self._monkeypatch.setenv("FAKE_OSASCRIPT_SELF_HANDLE", handle)
        self._monkeypatch.setenv("FAKE_OSASCRIPT_CHATDB", str(chat_db))
        self._monkeypatch.setenv("FAKE_OSASCRIPT_TESTS", str(Path(__file__).resolve().parents[1]))

    def calls(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text(encoding="utf-8").splitlines()]
