"""One daemon per database: an exclusive ``flock`` on ``<db>.lock`` (released by the OS even after kill -9)."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from types import TracebackType

from apple_flow.paths import is_state_folder
from apple_flow.privatefile import private_folder


class LockError(RuntimeError):
    """Another daemon holds the lock, or it cannot be made; the message says what to do."""


class InstanceLock:
    def __init__(self, db_path: Path) -> None:
        self.path = db_path.with_name(db_path.name + ".lock")
        self._fd: int | None = None

    def acquire(self) -> None:
        try:
            private_folder(self.path.parent, tighten=is_state_folder(self.path.parent))
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
            os.fchmod(fd, 0o600)  # one an older apple-flow left readable
        except OSError as exc:
            raise LockError(
                f"Cannot create {self.path} ({exc.strerror}). Check that folder, or set APPLE_FLOW_DB_PATH to a "
                "file in a folder you can write."
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise LockError(
                f"Another apple-flow daemon (pid {holder}) is already using {self.path.with_suffix('')}. "
                "Stop it first (`apple-flow service uninstall`, or kill that pid), or set APPLE_FLOW_DB_PATH "
                "to another file."
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> InstanceLock:
        self.acquire()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()
