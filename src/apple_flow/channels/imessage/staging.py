"""Where a file to send waits for Messages: a fresh copy under Messages' own attachments folder.

Messages is sandboxed and reads only a few folders of its own; a file sent by AppleScript from anywhere else is
accepted (osascript exits 0) and then fails to send (anthropics/claude-plugins-official#1113; openclaw/imsg#35
stages under ``~/Library/Messages/Attachments/imsg/`` for the same reason). So each file is copied into
``<attachments folder>/apple-flow/<random>/<name>`` first, read without following links, within the size limit.
Copies older than a day are removed at the next send (Messages reads them after osascript has returned).
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time
from pathlib import Path

from apple_flow.channels.base import SendError
from apple_flow.regularfile import FileTooLarge, NotRegularFile, UnreadableFile, open_regular

log = logging.getLogger(__name__)

FOLDER = "apple-flow"
KEEP_SECONDS = 24 * 3600
_CHUNK = 1 << 20


def stage(path: Path, attachments_root: Path, max_bytes: int) -> Path:
    """A copy of the file at ``path`` where Messages can read it. Raises ``SendError`` saying why not."""
    try:
        reader, _ = open_regular(path, max_bytes)
    except UnreadableFile as exc:
        raise SendError(f"cannot read {path.name} ({exc.strerror})") from None
    except NotRegularFile:
        raise SendError(f"{path.name} is not a regular file") from None
    except FileTooLarge:
        raise SendError(f"{path.name} is larger than {max_bytes} bytes") from None
    try:
        outbox = attachments_root.expanduser() / FOLDER
        try:
            outbox.mkdir(mode=0o700, parents=True, exist_ok=True)
            _sweep(outbox)
            folder = Path(tempfile.mkdtemp(dir=outbox))
            target = folder / path.name
            writer = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        except OSError as exc:
            raise SendError(f"cannot prepare {path.name} for Messages in {outbox} ({exc.strerror})") from None
        try:
            copied = 0
            while chunk := os.read(reader, _CHUNK):
                copied += len(chunk)
                if copied > max_bytes:
                    raise SendError(f"{path.name} grew past {max_bytes} bytes while being copied")
                view = memoryview(chunk)
                while view:
                    view = view[os.write(writer, view):]
        except BaseException:
            os.close(writer)
            shutil.rmtree(folder, ignore_errors=True)
            raise
        os.close(writer)
        return target
    finally:
        os.close(reader)


def _sweep(outbox: Path) -> None:
    """Removes staged copies older than a day."""
    cutoff = time.time() - KEEP_SECONDS
    for entry in outbox.iterdir():
        try:
            if entry.is_dir() and not entry.is_symlink() and entry.stat().st_mtime < cutoff:
                shutil.rmtree(entry, ignore_errors=True)
        except OSError as exc:
            log.debug("could not sweep %s: %s", entry, exc)
