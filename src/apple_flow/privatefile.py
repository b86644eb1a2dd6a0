"""Writing a file that holds secrets (``.env``, the launchd plist with its values): readable by its owner only
(0600, whatever the umask or the old file's mode) and atomic, so an interruption leaves the old file whole."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

PRIVATE_MODE = 0o600


def write_private(path: Path, data: bytes) -> None:
    """Replaces ``path`` (a symlink's target, not the link) with ``data`` at mode 0600."""
    target = path.resolve() if path.is_symlink() else path
    fd, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")  # mode 0600
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, PRIVATE_MODE)
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise


PRIVATE_DIR_MODE = 0o700


def private_folder(folder: Path, tighten: bool) -> None:
    """Creates ``folder`` (and missing parents) readable by its owner only, whatever the umask. An existing folder is
    tightened to 0700 when ``tighten`` says it is one of apple-flow's own (a folder the user chose may be shared on
    purpose; the files in it are private anyway)."""
    missing = []
    current = folder
    while not current.exists():
        missing.append(current)
        current = current.parent
    folder.mkdir(mode=PRIVATE_DIR_MODE, parents=True, exist_ok=True)
    for created in missing:  # mkdir's mode is cut by the umask; these are ours
        os.chmod(created, PRIVATE_DIR_MODE)
    if tighten and not missing and folder.stat().st_mode & 0o077:
        os.chmod(folder, PRIVATE_DIR_MODE)


def private_files(database: Path, *others: Path) -> None:
    """Makes these files readable by their owner only: ``database`` is created at 0600 when missing (before SQLite
    writes into it; SQLite gives its -wal and -shm files the database's mode), the ``others`` that exist are
    tightened. A symlink is left alone (its target is whatever the user pointed it at)."""
    fd = os.open(database, os.O_RDWR | os.O_CREAT, PRIVATE_MODE)
    try:
        if os.fstat(fd).st_mode & 0o077:
            os.fchmod(fd, PRIVATE_MODE)
    finally:
        os.close(fd)
    for path in others:
        with contextlib.suppress(FileNotFoundError):
            if not path.is_symlink() and path.stat().st_mode & 0o077:
                os.chmod(path, PRIVATE_MODE)
