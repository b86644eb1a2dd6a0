"""File events for a few names in one folder, waited for without polling: inotify on Linux, kqueue on macOS (what
imsg uses for chat.db). The wait blocks in the kernel until one of the names changes, the timeout passes or
``wake()`` is called, so an idle watcher costs no CPU at all.

Only what the standard library and libc offer: inotify through ``ctypes`` (three libc calls), kqueue through
``select.kqueue``.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import os
import select
import struct
import sys
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Protocol


class Notifier(Protocol):
    def wait(self, timeout: float) -> bool:
        """True as soon as one of the names changed (created, written, removed, renamed); False after ``timeout``
        seconds, after ``wake()``, or when only other files of the folder changed. Raises ``OSError`` when the
        folder can no longer be watched (e.g. it was removed)."""
        ...

    def wake(self) -> None:
        """Ends a ``wait`` in progress now (from any thread)."""
        ...

    def close(self) -> None: ...


def watch_names(folder: Path, names: Iterable[str]) -> Notifier:
    """A notifier for ``names`` in ``folder``. Raises ``OSError`` when the folder cannot be watched (missing, no
    permission, out of inotify watches) or the platform has neither inotify nor kqueue."""
    if sys.platform.startswith("linux"):
        return InotifyNotifier(folder, names)
    if hasattr(select, "kqueue"):
        return KqueueNotifier(folder, names)
    raise OSError(errno.ENOSYS, "no file events on this platform (neither inotify nor kqueue)")


class _WakePipe:
    """A pipe whose read end becomes readable when ``wake()`` is called; safe to call from any thread and after
    ``close()`` (then it does nothing, so a late wake never writes into a reused descriptor)."""

    def __init__(self) -> None:
        self.read_fd, self._write_fd = os.pipe()
        os.set_blocking(self.read_fd, False)
        os.set_blocking(self._write_fd, False)
        self._lock = threading.Lock()
        self._closed = False

    def wake(self) -> None:
        with self._lock:
            if not self._closed:
                with contextlib.suppress(BlockingIOError):  # already full of wake-ups: one is enough
                    os.write(self._write_fd, b"\0")

    def drain(self) -> None:
        try:
            while os.read(self.read_fd, 512):
                pass
        except BlockingIOError:
            pass

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                os.close(self.read_fd)
                os.close(self._write_fd)


# <sys/inotify.h>
IN_MODIFY = 0x002
IN_ATTRIB = 0x004
IN_CLOSE_WRITE = 0x008
IN_MOVED_FROM = 0x040
IN_MOVED_TO = 0x080
IN_CREATE = 0x100
IN_DELETE = 0x200
IN_DELETE_SELF = 0x400
IN_MOVE_SELF = 0x800
IN_Q_OVERFLOW = 0x4000
IN_IGNORED = 0x8000
IN_ONLYDIR = 0x01000000
_FOLDER_MASK = (IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE
                | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR)
_EVENT = struct.Struct("iIII")  # struct inotify_event: wd, mask, cookie, len; then len bytes of name


class InotifyNotifier:
    """inotify on the folder (one watch, whatever the files do: Messages creates and deletes ``-wal``/``-shm``)."""

    def __init__(self, folder: Path, names: Iterable[str]) -> None:
        self._names = {os.fsencode(name) for name in names}
        libc = _libc()
        fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if fd < 0:
            raise _errno_error("inotify_init1", folder)
        if libc.inotify_add_watch(fd, os.fsencode(folder), _FOLDER_MASK) < 0:
            error = _errno_error("inotify_add_watch", folder)
            os.close(fd)
            raise error
        self._fd = fd
        self._wake = _WakePipe()
        self._poll = select.poll()
        self._poll.register(fd, select.POLLIN)
        self._poll.register(self._wake.read_fd, select.POLLIN)

    def wait(self, timeout: float) -> bool:
        ready = {fd for fd, _ in self._poll.poll(max(0, round(timeout * 1000)))}
        if self._wake.read_fd in ready:
            self._wake.drain()
        return self._fd in ready and self._read()

    def _read(self) -> bool:
        changed = False
        while True:
            try:
                data = os.read(self._fd, 64 * 1024)
            except BlockingIOError:
                return changed
            offset = 0
            while offset + _EVENT.size <= len(data):
                _, mask, _, length = _EVENT.unpack_from(data, offset)
                name = data[offset + _EVENT.size: offset + _EVENT.size + length].rstrip(b"\0")
                offset += _EVENT.size + length
                if mask & (IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF):
                    raise OSError(errno.ENOENT, "the watched folder was removed or moved")
                if mask & IN_Q_OVERFLOW or name in self._names:
                    changed = True  # an overflow may have hidden one of ours: look

    def wake(self) -> None:
        self._wake.wake()

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        self._wake.close()


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    libc.inotify_init1.argtypes = [ctypes.c_int]
    libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
    return libc


def _errno_error(call: str, folder: Path) -> OSError:
    code = ctypes.get_errno()
    hint = " (out of inotify watches: raise fs.inotify.max_user_watches)" if code == errno.ENOSPC else ""
    return OSError(code, f"{call}: {os.strerror(code)}{hint}", str(folder))


class KqueueNotifier:
    """kqueue vnode events: on the folder (a name created, removed or renamed) and on each of the names that
    exists (written, extended, removed, renamed; a file removed or replaced is watched again from the folder's
    event). The wake pipe is in the same queue. ``-shm`` is written through ``mmap``, which raises no event; the
    ``-wal`` write of the same commit does. ``kq`` is the ``select`` module (a stand-in in tests on Linux)."""

    def __init__(self, folder: Path, names: Iterable[str], kq: Any = select) -> None:
        self._folder = folder
        self._names = sorted(set(names))
        self._kq_module = kq
        self._add = kq.KQ_EV_ADD | kq.KQ_EV_CLEAR
        self._gone = kq.KQ_NOTE_DELETE | kq.KQ_NOTE_RENAME
        folder_notes = kq.KQ_NOTE_WRITE | self._gone
        self._file_notes = folder_notes | kq.KQ_NOTE_EXTEND | kq.KQ_NOTE_ATTRIB
        self._kq = kq.kqueue()
        self._files: dict[str, tuple[int, tuple[int, int]]] = {}  # name -> (fd, (device, inode))
        self._wake = _WakePipe()
        self._folder_fd = -1
        try:
            self._folder_fd = os.open(folder, os.O_RDONLY | _EVTONLY)
            self._kq.control([
                kq.kevent(self._folder_fd, kq.KQ_FILTER_VNODE, self._add, folder_notes),
                kq.kevent(self._wake.read_fd, kq.KQ_FILTER_READ, self._add),
            ], 0, 0)
            self._watch_files()
        except OSError:
            self.close()
            raise

    def _watch_files(self) -> bool:
        """Watches each name that exists now (again, when it was replaced); True when one appeared or went."""
        changed = False
        for name in self._names:
            try:
                stat = os.stat(self._folder / name)
                identity: tuple[int, int] | None = (stat.st_dev, stat.st_ino)
            except FileNotFoundError:
                identity = None
            held = self._files.get(name)
            if held is not None and held[1] == identity:
                continue
            if held is not None:
                os.close(held[0])  # closing the descriptor removes its kevent
                del self._files[name]
                changed = True
            if identity is None:
                continue
            try:
                fd = os.open(self._folder / name, os.O_RDONLY | _EVTONLY)
            except FileNotFoundError:
                continue
            self._files[name] = (fd, identity)
            kq = self._kq_module
            self._kq.control([kq.kevent(fd, kq.KQ_FILTER_VNODE, self._add, self._file_notes)], 0, 0)
            changed = True
        return changed

    def wait(self, timeout: float) -> bool:
        events = self._kq.control(None, 16, max(0.0, timeout))
        changed = False
        for event in events:
            if event.ident == self._wake.read_fd:
                self._wake.drain()
            elif event.ident == self._folder_fd:
                if event.fflags & self._gone:
                    raise OSError(errno.ENOENT, "the watched folder was removed or moved", str(self._folder))
                changed = self._watch_files() or changed
            else:
                changed = True
                if event.fflags & self._gone:
                    self._watch_files()
        return changed

    def wake(self) -> None:
        self._wake.wake()

    def close(self) -> None:
        for fd, _ in self._files.values():
            os.close(fd)
        self._files.clear()
        if self._folder_fd >= 0:
            os.close(self._folder_fd)
            self._folder_fd = -1
        self._kq.close()
        self._wake.close()


_EVTONLY = getattr(os, "O_EVTONLY", 0)  # macOS: a descriptor for events only, which does not keep a volume busy
