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
