"""The files that came with a message: its ``attachment`` rows in chat.db, each checked to be a regular file inside
Messages' attachments folder (``APPLE_FLOW_MESSAGES_ATTACHMENTS_PATH``), reached without a link, and waited for
briefly while Messages is still downloading it.

``filename`` is stored as ``~/Library/Messages/Attachments/<xx>/<nn>/<guid>/<name>``; that prefix stands for the
configured folder (as imessage-exporter's custom attachment root does), any other ``~`` for the home folder.
``transfer_state`` 5 means the transfer finished (the value readers of chat.db wait for) and 6 that it failed;
anything else is still on its way.
"""

from __future__ import annotations

import logging
import os
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path, PurePosixPath

from apple_flow.channels.base import Attachment
from apple_flow.channels.imessage.chatdb import AttachmentRow, ChatDB, ChatDBError

log = logging.getLogger(__name__)

MESSAGES_PREFIX = "~/Library/Messages/Attachments"
FINISHED = 5
FAILED = 6
STILL_DOWNLOADING = "still downloading"
_POLL_SECONDS = 0.25


class AttachmentRefused(ValueError):
    """The row names no file apple-flow may read; the message says why."""


def locate(filename: str | None, root: Path) -> Path:
    """The file ``filename`` names, as a path inside ``root`` (resolved) whose every part below ``root`` is a real
    folder or, last, a regular file: no ``..``, nothing outside ``root``, no link. Raises ``AttachmentRefused``."""
    if not filename or "\x00" in filename:
        raise AttachmentRefused("chat.db names no file for it")
    if ".." in PurePosixPath(filename).parts:
        raise AttachmentRefused("its path in chat.db goes up a folder (..): refused")
    real_root = root.expanduser().resolve()
    if filename == MESSAGES_PREFIX or filename.startswith(MESSAGES_PREFIX + "/"):
        relative = filename[len(MESSAGES_PREFIX):].lstrip("/")
    else:
        given = os.path.normpath(os.path.expanduser(filename))
        if not os.path.isabs(given):
            raise AttachmentRefused("its path in chat.db is not absolute: refused")
        relative = _inside(given, [os.path.normpath(root.expanduser()), str(real_root)])
    parts = PurePosixPath(relative).parts
    if not parts:
        raise AttachmentRefused("its path in chat.db names the attachments folder itself")
    current = real_root
    for index, part in enumerate(parts):
        current = current / part
        try:
            mode = os.lstat(current).st_mode
        except OSError:
            raise AttachmentRefused("its file is not in the Messages attachments folder (deleted, or not "
                                    "downloaded)") from None
        if stat.S_ISLNK(mode):
            raise AttachmentRefused("its path in chat.db leads through a link: refused")
        last = index == len(parts) - 1
        if last and not stat.S_ISREG(mode):
            raise AttachmentRefused("it is not a regular file")
        if not last and not stat.S_ISDIR(mode):
            raise AttachmentRefused("its path in chat.db is not a folder of the attachments folder")
    return current


def _inside(path: str, roots: list[str]) -> str:
    for root in roots:
        if path == root or path.startswith(root.rstrip("/") + "/"):
            return path[len(root):].lstrip("/")
    raise AttachmentRefused("its path in chat.db is outside the Messages attachments folder: refused")


def display_name(row: AttachmentRow) -> str:
    """What the sender called the file (``transfer_name``), else the last part of ``filename``."""
    name = (row.transfer_name or "").strip() or PurePosixPath(row.filename or "").name
    return name or f"attachment {row.rowid}"


def to_attachment(row: AttachmentRow, root: Path, waited: float = 0) -> Attachment:
    name = display_name(row)
    found = Attachment(name, (row.mime_type or "").strip(), row.total_bytes)
    if row.transfer_state == FAILED:
        return _with_problem(found, "Messages could not download it")
    if row.transfer_state != FINISHED:
        return _with_problem(found, f"{STILL_DOWNLOADING} after {waited:g} s" if waited else STILL_DOWNLOADING)
    try:
        source = locate(row.filename, root)
    except AttachmentRefused as exc:
        log.warning("attachment %d (%r, filename %r) not taken: %s", row.rowid, name, row.filename, exc)
        return _with_problem(found, str(exc))
    return Attachment(found.name, found.mime_type, found.size, source)


def _with_problem(found: Attachment, problem: str) -> Attachment:
    return Attachment(found.name, found.mime_type, found.size, None, problem)


def read_attachments(
    db: ChatDB,
    rowid: int,
    root: Path,
    wait_seconds: float,
    stop: threading.Event,
    clock: Callable[[], float] = time.monotonic,
) -> tuple[Attachment, ...]:
    """The attachments of message ``rowid``. While some are still downloading it looks again, for at most
    ``wait_seconds`` (or until ``stop``); what has not arrived by then is reported as missing. Never raises."""
    started = clock()
    try:
        rows = db.attachments_of(rowid)
        while _pending(rows) and not stop.is_set():
            remaining = wait_seconds - (clock() - started)
            if remaining <= 0:
                break
            stop.wait(min(_POLL_SECONDS, remaining))
            rows = db.attachments_of(rowid)
    except ChatDBError as exc:
        log.warning("the attachments of row %d could not be read: %s", rowid, exc)
        return (Attachment("attachments", problem=f"could not be read from chat.db ({exc.what})"),)
    waited = wait_seconds if _pending(rows) else 0
    return tuple(to_attachment(row, root, waited) for row in rows)


def downloading(attachments: tuple[Attachment, ...]) -> bool:
    """Whether some were still on their way when read without waiting."""
    return any(a.problem == STILL_DOWNLOADING for a in attachments)


def _pending(rows: list[AttachmentRow]) -> bool:
    return any(row.transfer_state not in (FINISHED, FAILED) for row in rows)
