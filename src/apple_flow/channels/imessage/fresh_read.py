"""Reads chat.db in a new process: ``python -m apple_flow.channels.imessage.fresh_read PATH`` exits 0 when it can.

macOS decides a process's Full Disk Access when the process starts, so a daemon that was refused keeps being refused
after the owner switches the grant on. A child started now is decided now (and charged, like every child of the
service, to Apple Flow): its success says the grant is there and only this process lacks it, so the service exits to
be started again by launchd (``PermissionMonitor``).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

FRESH_READ_TIMEOUT_SECONDS = 30.0


def readable_in_new_process(path: Path) -> bool:
    """Whether a process started now can read ``path`` (a chat.db)."""
    try:
        done = subprocess.run(
            [sys.executable, "-m", __name__, str(path)], stdin=subprocess.DEVNULL, capture_output=True,
            timeout=FRESH_READ_TIMEOUT_SECONDS, check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def main(argv: list[str]) -> int:
    from apple_flow.channels.imessage.chatdb import ChatDB, ChatDBError

    if len(argv) != 1:
        print("usage: python -m apple_flow.channels.imessage.fresh_read CHAT_DB", file=sys.stderr)
        return 2
    db = ChatDB(Path(argv[0]))
    try:
        db.latest_rowid()
    except ChatDBError as exc:
        print(exc.what, file=sys.stderr)
        return 1
    finally:
        db.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
