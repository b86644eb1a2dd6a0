"""Opening a file someone else named (an attachment to copy in, a file to send out) for reading, safely: never
through a link, only a regular file (a folder, FIFO, device or socket is refused; a FIFO without blocking), and
only within a size limit. Each refusal is its own exception, so each caller words it in its own terms."""

from __future__ import annotations

import os
import stat
from pathlib import Path


class RefusedFile(Exception):
    """The file was not opened; the subclass says why."""


class UnreadableFile(RefusedFile):
    """It could not be opened (missing, no permission, a link): ``strerror`` is the system's reason."""

    def __init__(self, strerror: str) -> None:
        super().__init__(strerror)
        self.strerror = strerror


class NotRegularFile(RefusedFile):
    """It is a folder, FIFO, device or socket."""


class FileTooLarge(RefusedFile):
    """It holds more than the limit: ``size`` bytes."""

    def __init__(self, size: int) -> None:
        super().__init__(f"{size} bytes")
        self.size = size


def open_regular(path: Path, cap: int) -> tuple[int, int]:
    """A blocking read-only descriptor of the regular file at ``path`` and its size (at most ``cap`` bytes); the
    caller closes it. Raises ``UnreadableFile``, ``NotRegularFile`` or ``FileTooLarge``. The size is the one
    measured at opening: a caller that copies must still stop at ``cap``, as the file may grow meanwhile."""
    try:
        # O_NONBLOCK: opening a FIFO with no writer would otherwise wait for one, for ever.
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        raise UnreadableFile(exc.strerror or str(exc)) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotRegularFile(str(path))
        if info.st_size > cap:
            raise FileTooLarge(info.st_size)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd, info.st_size
