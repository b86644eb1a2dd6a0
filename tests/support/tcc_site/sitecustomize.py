"""macOS's Full Disk Access as a test's service meets it: decided once per process, when the process starts.

On the PYTHONPATH of a service the fake launchd starts (``FakeLaunchctl.configure(extra_env=...)``). It acts only in
apple-flow's own processes (``python -m apple_flow...``: the daemon and the new process it reads chat.db in), not in
the fakes (osascript stands in for Messages, which writes chat.db itself): one started before the file
``$FAKE_TCC_GRANTED`` exists (the owner's grant) cannot open ``$FAKE_TCC_CHATDB``, answered as macOS answers (EPERM
for open, "unable to open database file" from SQLite); one started after it can, for its whole life.
"""

from __future__ import annotations

import os
import sys
from urllib.parse import unquote


def _module() -> str:
    argv = list(getattr(sys, "orig_argv", []))
    if "-m" not in argv or argv.index("-m") + 1 >= len(argv):
        return ""
    return str(argv[argv.index("-m") + 1])


def _refuse_chat_db(chat_db: str) -> None:
    import builtins
    import errno
    import sqlite3

    target = os.path.realpath(chat_db)
    real_open, real_connect = builtins.open, sqlite3.connect

    def refused(name: str) -> bool:
        if name.startswith("file:"):
            name = unquote(name[len("file:"):].split("?", 1)[0])
        return os.path.realpath(name) == target

    def guarded_open(file, *args, **kwargs):  # type: ignore[no-untyped-def]
        if isinstance(file, (str, bytes, os.PathLike)) and refused(os.fsdecode(file)):
            raise PermissionError(errno.EPERM, "Operation not permitted", os.fsdecode(file))
        return real_open(file, *args, **kwargs)

    def guarded_connect(database, *args, **kwargs):  # type: ignore[no-untyped-def]
        if isinstance(database, (str, bytes, os.PathLike)) and refused(os.fsdecode(database)):
            raise sqlite3.OperationalError("unable to open database file")
        return real_connect(database, *args, **kwargs)

    builtins.open = guarded_open
    sqlite3.connect = guarded_connect


_chat_db, _granted = os.environ.get("FAKE_TCC_CHATDB"), os.environ.get("FAKE_TCC_GRANTED")
if _chat_db and _granted and _module().startswith("apple_flow") and not os.path.exists(_granted):
    _refuse_chat_db(_chat_db)
