"""Waiting for chat.db to change: real file events from another process, no wake-ups while idle, ``stop`` ends a
long wait at once, other files in the folder do not count, a vanished folder falls back to the poll."""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from apple_flow.channels.imessage.watcher import DbChangeWaiter
from support.chatdb import ChatDbWriter
from support.waiting import wait_for

LONG = 30.0  # a poll interval no test waits out: only an event, or stop, ends these waits
TESTS = str(Path(__file__).resolve().parents[1])
WRITE_LATER = (
    "import sys; sys.path[:0] = [sys.argv[2]]\n"
    "from pathlib import Path\n"
    "from support.chatdb import ChatDbWriter\n"
    "w = ChatDbWriter(Path(sys.argv[1])); sys.stdin.readline(); w.message('from another process'); w.close()\n"
)


def waiting(waiter: DbChangeWaiter, timeout: float = LONG) -> tuple[threading.Thread, list[bool]]:
    """``waiter.wait(timeout)`` on a thread of its own; its result lands in the list."""
    result: list[bool] = []
    thread = threading.Thread(target=lambda: result.append(waiter.wait(timeout)), daemon=True)
    thread.start()
    return thread, result


def stop_relays() -> set[threading.Thread]:
    return {thread for thread in threading.enumerate() if thread.name == "chatdb-stop"}


def blocked_in_wait(relays_before: set[threading.Thread]) -> None:
    """Returns once a wait has started its stop relay, the last step before it blocks on the file events."""
    wait_for(lambda: stop_relays() - relays_before, 5, "the wait to block")


def test_a_row_committed_by_another_process_ends_the_wait(chat_db: ChatDbWriter) -> None:
    waiter = DbChangeWaiter(chat_db.path, LONG, threading.Event())
    waiter.start()
    writer = subprocess.Popen([sys.executable, "-c", WRITE_LATER, str(chat_db.path), TESTS], stdin=subprocess.PIPE)
    try:
        relays = stop_relays()
        thread, result = waiting(waiter)
        blocked_in_wait(relays)
        writer.communicate(b"write now\n", timeout=10)  # the row comes while the wait is blocked
        thread.join(10)
        assert result == [True]
        assert waiter.watching
    finally:
        writer.kill()  # if the test failed before the row was asked for; a writer that is done is left as it is
        writer.wait(10)
        waiter.close()


def test_setting_stop_ends_a_long_wait_at_once(chat_db: ChatDbWriter) -> None:
    stop = threading.Event()
    waiter = DbChangeWaiter(chat_db.path, LONG, stop)
    relays = stop_relays()
    thread, result = waiting(waiter)
    blocked_in_wait(relays)
    assert thread.is_alive()  # blocked in the wait
    stop.set()
    thread.join(5)  # far below LONG: the stop woke it
    assert result == [False]
    waiter.close()


def test_other_files_in_the_folder_do_not_end_the_wait(chat_db: ChatDbWriter) -> None:
    waiter = DbChangeWaiter(chat_db.path, LONG, threading.Event())
    thread, result = waiting(waiter, timeout=1.0)
    for index in range(20):
        (chat_db.path.parent / f"other-{index}.plist").write_text("x")
    thread.join(5)
    assert result == [False]  # ran into its timeout
    waiter.close()


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counts context switches in /proc (Linux)")
def test_an_idle_wait_does_not_wake_the_thread(chat_db: ChatDbWriter) -> None:
    # The watchfiles notifier used before returned to Python every 20 ms: about 50 wake-ups in this second.
    waiter = DbChangeWaiter(chat_db.path, LONG, threading.Event())
    waiter.wait(0.01)  # set up (threads started), so that only the wait itself is counted
    switches: list[int] = []

    def wait_and_count() -> None:
        status = Path(f"/proc/self/task/{threading.get_native_id()}/status")
        before = _voluntary_switches(status)
        waiter.wait(1.0)
        switches.append(_voluntary_switches(status) - before)

    thread = threading.Thread(target=wait_and_count)
    thread.start()
    thread.join(10)
    waiter.close()
    assert switches and switches[0] <= 5, switches


def _voluntary_switches(status: Path) -> int:
    line = next(x for x in status.read_text().splitlines() if x.startswith("voluntary_ctxt_switches"))
    return int(line.split()[1])


def test_a_folder_that_vanishes_falls_back_to_the_poll(tmp_path: Path) -> None:
    db = ChatDbWriter(tmp_path / "Messages" / "chat.db")
    db.close()
    waiter = DbChangeWaiter(db.path, 0.1, threading.Event())
    waiter.start()
    assert waiter.watching
    shutil.rmtree(db.path.parent)
    for _ in range(10):  # the files' removal is a change; then the folder's ends the watching, raising nothing
        waiter.wait(1.0)
        if not waiter.watching:
            break
    assert not waiter.watching
    assert waiter.wait() is False  # the poll interval, sleeping (nothing to watch)


def test_a_folder_that_does_not_exist_yet_is_polled_then_watched(tmp_path: Path) -> None:
    path = tmp_path / "Messages" / "chat.db"
    waiter = DbChangeWaiter(path, 0.05, threading.Event())
    assert waiter.wait() is False
    assert not waiter.watching
    ChatDbWriter(path).close()
    waiter.wait()
    assert waiter.watching
    waiter.close()
