"""The macOS watcher (kqueue) against a stand-in for ``select``'s kqueue, which Linux does not have: what it
registers (the folder, each database file that exists, the wake pipe; exact filters, flags and notes) and how it
reads the events the kernel would give. The stand-in records registrations and hands out the events a test queues;
the files and descriptors are real."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from apple_flow.channels.imessage.fileevents import KqueueNotifier

NAMES = ["chat.db", "chat.db-wal", "chat.db-shm"]


@dataclass
class KEvent:
    ident: int
    filter: int
    flags: int = 0
    fflags: int = 0


@dataclass
class FakeQueue:
    registered: list[KEvent] = field(default_factory=list)
    pending: list[KEvent] = field(default_factory=list)
    waits: list[float] = field(default_factory=list)
    closed: bool = False

    def control(self, changes: list[KEvent] | None, max_events: int, timeout: float | None = None) -> list[KEvent]:
        if changes:
            assert max_events == 0 and timeout == 0
            self.registered.extend(changes)
            return []
        assert timeout is not None
        self.waits.append(timeout)
        events, self.pending = self.pending[:max_events], self.pending[max_events:]
        return events

    def close(self) -> None:
        self.closed = True


class FakeSelect:
    """The part of the ``select`` module KqueueNotifier uses, with macOS's values."""

    KQ_FILTER_READ, KQ_FILTER_VNODE = -1, -4
    KQ_EV_ADD, KQ_EV_CLEAR = 0x1, 0x20
    KQ_NOTE_DELETE, KQ_NOTE_WRITE, KQ_NOTE_EXTEND, KQ_NOTE_ATTRIB, KQ_NOTE_RENAME = 0x1, 0x2, 0x4, 0x8, 0x20

    def __init__(self) -> None:
        self.queue = FakeQueue()

    def kqueue(self) -> FakeQueue:
        return self.queue

    @staticmethod
    def kevent(ident: int, filter: int, flags: int = 0, fflags: int = 0) -> KEvent:
        return KEvent(ident, filter, flags, fflags)


K = FakeSelect
FOLDER_NOTES = K.KQ_NOTE_WRITE | K.KQ_NOTE_DELETE | K.KQ_NOTE_RENAME
FILE_NOTES = FOLDER_NOTES | K.KQ_NOTE_EXTEND | K.KQ_NOTE_ATTRIB
ADD = K.KQ_EV_ADD | K.KQ_EV_CLEAR

pytestmark = pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="names descriptors through /proc")


def named(fd: int) -> str:
    return Path(os.readlink(f"/proc/self/fd/{fd}")).name


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    messages = tmp_path / "Messages"
    messages.mkdir()
    (messages / "chat.db").write_bytes(b"")
    (messages / "chat.db-wal").write_bytes(b"")
    return messages


def test_it_registers_the_folder_the_files_that_exist_and_the_wake_pipe(folder: Path) -> None:
    fake = FakeSelect()
    notifier = KqueueNotifier(folder, NAMES, kq=fake)
    seen = [(named(k.ident), k.filter, k.flags, k.fflags) for k in fake.queue.registered]
    assert seen[0] == ("Messages", K.KQ_FILTER_VNODE, ADD, FOLDER_NOTES)
    assert seen[1][1:] == (K.KQ_FILTER_READ, ADD, 0) and seen[1][0].startswith("pipe:")
    assert seen[2:] == [("chat.db", K.KQ_FILTER_VNODE, ADD, FILE_NOTES), ("chat.db-wal", K.KQ_FILTER_VNODE, ADD,
                                                                       FILE_NOTES)]
    notifier.close()
    assert fake.queue.closed


def test_a_write_to_a_database_file_is_a_change_and_the_wait_has_its_timeout(folder: Path) -> None:
    fake = FakeSelect()
    notifier = KqueueNotifier(folder, NAMES, kq=fake)
    wal = fake.queue.registered[3].ident
    assert notifier.wait(2.5) is False and fake.queue.waits == [2.5]  # nothing pending: the timeout
    fake.queue.pending.append(KEvent(wal, K.KQ_FILTER_VNODE, fflags=K.KQ_NOTE_WRITE | K.KQ_NOTE_EXTEND))
    assert notifier.wait(2.5) is True
    notifier.close()


def test_a_file_created_in_the_folder_is_watched_from_then_on_and_others_do_not_count(folder: Path) -> None:
    fake = FakeSelect()
    notifier = KqueueNotifier(folder, NAMES, kq=fake)
    folder_fd = fake.queue.registered[0].ident
    (folder / "Attachments").mkdir()
    fake.queue.pending.append(KEvent(folder_fd, K.KQ_FILTER_VNODE, fflags=K.KQ_NOTE_WRITE))
    assert notifier.wait(1) is False  # another name in the folder: nothing to read
    (folder / "chat.db-shm").write_bytes(b"")
    fake.queue.pending.append(KEvent(folder_fd, K.KQ_FILTER_VNODE, fflags=K.KQ_NOTE_WRITE))
    assert notifier.wait(1) is True
    assert named(fake.queue.registered[-1].ident) == "chat.db-shm"
    notifier.close()


def test_a_file_removed_is_a_change_and_its_descriptor_is_let_go(folder: Path) -> None:
    fake = FakeSelect()
    notifier = KqueueNotifier(folder, NAMES, kq=fake)
    wal = fake.queue.registered[3].ident
    (folder / "chat.db-wal").unlink()
    fake.queue.pending.append(KEvent(wal, K.KQ_FILTER_VNODE, fflags=K.KQ_NOTE_DELETE))
    assert notifier.wait(1) is True
    with pytest.raises(OSError):
        os.fstat(wal)  # closed: its kevent is gone with it
    notifier.close()


def test_wake_ends_the_wait_and_a_removed_folder_is_an_error(folder: Path) -> None:
    fake = FakeSelect()
    notifier = KqueueNotifier(folder, NAMES, kq=fake)
    pipe, folder_fd = fake.queue.registered[1].ident, fake.queue.registered[0].ident
    notifier.wake()
    fake.queue.pending.append(KEvent(pipe, K.KQ_FILTER_READ))
    assert notifier.wait(1) is False
    with pytest.raises(BlockingIOError):
        os.read(pipe, 10)  # the wake-up was read: the next wait blocks again
    fake.queue.pending.append(KEvent(folder_fd, K.KQ_FILTER_VNODE, fflags=K.KQ_NOTE_RENAME))
    with pytest.raises(OSError, match="removed or moved"):
        notifier.wait(1)
    notifier.close()
