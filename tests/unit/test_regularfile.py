"""open_regular: a descriptor of a regular file within a size limit, or a refusal that says which of the three
reasons it is; never through a link, never blocked by a FIFO. Real files, links, folders and FIFOs in tmp_path."""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path

import pytest

from apple_flow.regularfile import FileTooLarge, NotRegularFile, UnreadableFile, open_regular


def test_a_regular_file_within_the_limit_is_opened_for_reading(tmp_path: Path) -> None:
    path = tmp_path / "note.txt"
    path.write_bytes(b"hello\n")

    fd, size = open_regular(path, 6)
    try:
        assert size == 6
        assert os.read(fd, 100) == b"hello\n"
        assert os.get_blocking(fd)  # reads wait for data as usual, whatever the open needed
    finally:
        os.close(fd)


def test_a_link_is_refused_not_followed(tmp_path: Path) -> None:
    target = tmp_path / "secret.txt"
    target.write_text("private\n")
    link = tmp_path / "link.txt"
    link.symlink_to(target)

    with pytest.raises(UnreadableFile) as refused:
        open_regular(link, 1000)
    assert refused.value.strerror  # the system's reason (ELOOP on Linux and macOS), for the caller's message


def test_a_missing_file_is_unreadable_with_the_systems_reason(tmp_path: Path) -> None:
    with pytest.raises(UnreadableFile) as refused:
        open_regular(tmp_path / "gone.txt", 1000)
    assert refused.value.strerror == os.strerror(2)  # ENOENT


def test_a_folder_is_refused(tmp_path: Path) -> None:
    with pytest.raises(NotRegularFile):
        open_regular(tmp_path, 1_000_000)


def test_a_fifo_is_refused_at_once(tmp_path: Path) -> None:
    """A FIFO with no writer would block a plain open(O_RDONLY) for ever: the daemon's thread with it."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    outcome: list[BaseException] = []

    def attempt() -> None:
        try:
            os.close(open_regular(fifo, 1000)[0])
        except BaseException as exc:  # recorded for the assertion below
            outcome.append(exc)

    worker = threading.Thread(target=attempt, daemon=True)
    worker.start()
    worker.join(timeout=60)  # generous: the machine may be busy; a correct open returns in microseconds
    if worker.is_alive():
        with contextlib.suppress(OSError):  # a writer end lets the stuck open return
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail("open_regular blocked on a FIFO")
    assert len(outcome) == 1 and isinstance(outcome[0], NotRegularFile)


def test_a_file_over_the_limit_is_refused_with_its_size(tmp_path: Path) -> None:
    path = tmp_path / "big.bin"
    path.write_bytes(b"x" * 1001)

    with pytest.raises(FileTooLarge) as refused:
        open_regular(path, 1000)
    assert refused.value.size == 1001


def test_a_refusal_leaves_no_descriptor_open(tmp_path: Path) -> None:
    path = tmp_path / "big.bin"
    path.write_bytes(b"x" * 10)
    fds = Path("/dev/fd") if Path("/dev/fd").is_dir() else None
    if fds is None:
        pytest.skip("no /dev/fd to count open descriptors")

    def ours() -> list[str]:
        # What the open descriptors point at, among this test's own files: other threads of the test process
        # open and close descriptors of their own meanwhile, so a count of all of them is not this code's.
        targets = []
        for fd in fds.iterdir():
            with contextlib.suppress(OSError):
                targets.append(os.readlink(fd))
        return [target for target in targets if target in (os.path.realpath(path), os.path.realpath(tmp_path))]

    assert ours() == []
    for _ in range(20):
        with pytest.raises(FileTooLarge):
            open_regular(path, 5)
        with pytest.raises(NotRegularFile):
            open_regular(tmp_path, 5)
    assert ours() == []
