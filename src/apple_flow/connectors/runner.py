"""One subprocess runner for every agent CLI: a run that can never hang the daemon.

Each child gets its own session (so its process group can be killed whole), the prompt on stdin which is then
closed (never a terminal, never left open), stdout read line by line in a thread (no 64 KiB line limit: plain
``readline`` on a binary pipe), stderr kept as a bounded tail, and a wall-clock deadline after which the whole
tree is killed and the pipes are drained for a bounded time only. Stdout lines are yielded to the caller as they
arrive (a generator: the caller pulls, nothing calls back into it). Live children are registered by an owner (the
sender) so they can be cancelled one conversation at a time, or all at shutdown.
"""

from __future__ import annotations

import contextlib
import errno
import os
import queue
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import psutil

# How long the output pipes may still be read once the child is gone or has been killed: a grandchild that
# inherited the pipes must not keep a turn open.
DEFAULT_DRAIN_SECONDS = 1.0
# Between SIGTERM and SIGKILL when a tree is killed.
DEFAULT_KILL_GRACE_SECONDS = 1.0
STDERR_TAIL_CHARS = 8192
# Prompts up to this size are written on the calling thread: a pipe buffer holds at least 16 KiB everywhere.
INLINE_STDIN_BYTES = 8192
# stdout kept in the result (every line is still yielded): a runaway child cannot exhaust memory.
MAX_KEPT_STDOUT_CHARS = 32 * 1024 * 1024
# One stdout line is read whole up to this size (far above any real event); beyond it the line is cut and the
# rest of it skipped, so a child that never prints a newline cannot grow one line without bound.
MAX_LINE_BYTES = 64 * 1024 * 1024

_EOF = object()


class SpawnError(OSError):
    """The command could not be started; ``reason`` is ``"not_found"``, ``"not_executable"``, ``"bad_cwd"`` or
    ``"no_files"`` (the daemon is out of file descriptors)."""

    def __init__(self, command: str, reason: str, detail: str) -> None:
        super().__init__(f"{command}: {detail}")
        self.command = command
        self.reason = reason


@dataclass(frozen=True)
class RunResult:
    """How one child run ended. ``exit_code`` is negative when the child died of a signal."""

    exit_code: int | None
    stdout_lines: list[str]
    stderr_tail: str
    timed_out: bool
    cancelled: bool
    duration_seconds: float
    stdout_truncated: bool = False

    @property
    def stdout(self) -> str:
        return "\n".join(self.stdout_lines)

    @property
    def last_stderr_line(self) -> str:
        lines = [line.strip() for line in self.stderr_tail.splitlines() if line.strip()]
        return lines[-1] if lines else ""


class ChildRun:
    """A started child: iterate it (once) for its stdout lines; ``result`` is set once the iteration has ended, the
    child then released. Use it in a ``with`` block, or ``close`` it, when it may be left before that."""

    def __init__(self, lines: Generator[str, None, RunResult], release: Callable[[], None]) -> None:
        self._lines = lines
        self._release = release
        self.result: RunResult | None = None

    def __iter__(self) -> Iterator[str]:
        self.result = yield from self._lines

    def __enter__(self) -> ChildRun:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Ends the run: a run left early (or never read) must not leave its child running. Once its lines are all
        read there is nothing left to end."""
        self._lines.close()
        self._release()


class _KeptLines:
    """The stdout lines kept for the result (up to a size; every line is still yielded to the caller)."""

    def __init__(self, limit: int) -> None:
        self.lines: list[str] = []
        self.truncated = False
        self._room = limit

    def add(self, line: str) -> None:
        if len(line) <= self._room:
            self.lines.append(line)
            self._room -= len(line)
        else:
            self.truncated = True
            self._room = 0


class _Live:
    """A running child and why it might have been stopped."""

    def __init__(self, process: subprocess.Popen[bytes], owner: str | None) -> None:
        self.process = process
        self.owner = owner
        self.cancelled = False
        self.reaped = False
        # Held while signalling or reaping: a pid is never signalled after it was reaped (and maybe reused).
        self.lock = threading.Lock()


def kill_tree(pid: int, grace_seconds: float = DEFAULT_KILL_GRACE_SECONDS) -> None:
    """SIGTERM then SIGKILL a child of ours, every descendant psutil can still see, and its process group (which
    also catches grandchildren already orphaned by their parent).

    The child itself is waited for without being reaped: its exit status stays for ``Popen.wait`` (psutil would
    reap it and ``Popen`` would then report exit code 0)."""
    descendants: list[psutil.Process] = []
    with contextlib.suppress(psutil.Error):
        descendants = psutil.Process(pid).children(recursive=True)
    _signal_all(pid, [pid], descendants, signal.SIGTERM)
    deadline = time.monotonic() + grace_seconds
    _, alive = psutil.wait_procs(descendants, timeout=grace_seconds)
    root_done = _wait_exited(pid, deadline)
    _signal_all(pid, [] if root_done else [pid], alive, signal.SIGKILL)
    # The group may hold members psutil never saw (reparented before we looked); SIGKILL it regardless.
    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGKILL)
    psutil.wait_procs(alive, timeout=grace_seconds)
    _wait_exited(pid, time.monotonic() + grace_seconds)


def _wait_exited(pid: int, deadline: float) -> bool:
    """Polls (1 ms, backing off to 20 ms) until the child exited or the deadline passed; does not reap it."""
    pause = 0.001
    while not _has_exited(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(pause)
        pause = min(pause * 2, 0.02)
    return True


def _signal_all(group: int, pids: Sequence[int], processes: Sequence[psutil.Process], sig: signal.Signals) -> None:
    with contextlib.suppress(OSError):
        os.killpg(group, sig)
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, sig)
    for process in processes:
        with contextlib.suppress(psutil.Error):
            process.send_signal(sig)


class ProcessRunner:
    """Runs agent CLIs; one instance per connector. Thread-safe: several turns may run at once."""

    def __init__(
        self,
        drain_seconds: float = DEFAULT_DRAIN_SECONDS,
        kill_grace_seconds: float = DEFAULT_KILL_GRACE_SECONDS,
        max_kept_stdout_chars: int = MAX_KEPT_STDOUT_CHARS,
        max_line_bytes: int = MAX_LINE_BYTES,
    ) -> None:
        self._drain_seconds = drain_seconds
        self._kill_grace = kill_grace_seconds
        self._max_kept = max_kept_stdout_chars
        self._max_line = max_line_bytes
        self._lock = threading.Lock()
        self._live: dict[int, _Live] = {}

    # --- running ---------------------------------------------------------------------------------------

    def run(
        self,
        argv: Sequence[str],
        stdin_text: str = "",
        *,
        cwd: str | Path | None = None,
        timeout: float,
        owner: str | None = None,
        env: dict[str, str] | None = None,
    ) -> RunResult:
        """Runs ``argv`` to completion or until ``timeout`` seconds (wall clock) have passed; see ``start``."""
        with self.start(argv, stdin_text, cwd=cwd, timeout=timeout, owner=owner, env=env) as child:
            for _ in child:
                pass
        assert child.result is not None
        return child.result

    def start(
        self,
        argv: Sequence[str],
        stdin_text: str = "",
        *,
        cwd: str | Path | None = None,
        timeout: float,
        owner: str | None = None,
        env: dict[str, str] | None = None,
    ) -> ChildRun:
        """Starts ``argv``; iterating the returned run yields its stdout lines as they arrive (without their
        newline) until it ends, is killed at ``timeout`` seconds (wall clock), or is cancelled; then its ``result``
        is set. Use it in a ``with`` block: leaving early kills the child. ``owner`` is what ``cancel`` stops.

        Raises ``SpawnError`` when the command cannot be started; every other failure is in the result.
        """
        started = time.monotonic()
        process = self._spawn(argv, cwd, env)
        live = _Live(process, owner)
        with self._lock:
            self._live[process.pid] = live
        return ChildRun(self._lines(live, stdin_text, started + timeout, started), lambda: self._release(live))

    def _lines(self, live: _Live, stdin_text: str, deadline: float, started: float) -> Generator[str, None, RunResult]:
        process = live.process
        try:
            assert process.stdin is not None and process.stdout is not None and process.stderr is not None
            lines: queue.Queue[object] = queue.Queue()
            stderr_tail: deque[str] = deque()
            prompt = stdin_text.encode("utf-8")
            threads = [
                threading.Thread(target=_read_lines, args=(process.stdout, lines, self._max_line), daemon=True),
                threading.Thread(target=_read_tail, args=(process.stderr, stderr_tail), daemon=True),
            ]
            if len(prompt) <= INLINE_STDIN_BYTES:
                _feed(process.stdin, prompt)  # fits the pipe buffer on every OS: cannot block
            else:  # a child that never reads stdin would block this write: only a helper thread waits on it
                threading.Thread(target=_feed, args=(process.stdin, prompt), daemon=True).start()
            for thread in threads:
                thread.start()
            kept = _KeptLines(self._max_kept)
            timed_out, at_eof = yield from self._collect(process.pid, lines, deadline, kept)
            if at_eof:  # stdout closes a moment before the process is gone
                _wait_exited(process.pid, min(deadline, time.monotonic() + self._drain_seconds))
            with live.lock:
                if timed_out or not _has_exited(process.pid):
                    kill_tree(process.pid, self._kill_grace)
                else:
                    # The child is done (not yet reaped, so its group id is still ours): grandchildren it left
                    # behind must not outlive the turn.
                    with contextlib.suppress(OSError):
                        os.killpg(process.pid, signal.SIGKILL)
            drain_until = time.monotonic() + self._drain_seconds
            if not at_eof:
                yield from _drain(lines, drain_until, kept)
            for thread in threads:
                thread.join(max(0.0, drain_until - time.monotonic()))
            return RunResult(
                exit_code=self._reap(live),
                stdout_lines=kept.lines,
                stderr_tail="".join(stderr_tail)[-STDERR_TAIL_CHARS:],
                timed_out=timed_out,
                cancelled=live.cancelled,
                duration_seconds=time.monotonic() - started,
                stdout_truncated=kept.truncated,
            )
        finally:
            self._release(live)

    def _release(self, live: _Live) -> None:
        """Ends a run for good (idempotent): a child still running (the caller stopped reading, or raised) is
        killed, reaped and forgotten, and its pipes are closed."""
        if not live.reaped:
            with live.lock:
                kill_tree(live.process.pid, self._kill_grace)
            self._reap(live)
        with self._lock:
            self._live.pop(live.process.pid, None)
        for stream in (live.process.stdin, live.process.stdout, live.process.stderr):
            if stream is not None:
                with contextlib.suppress(OSError, ValueError):
                    stream.close()

    def _reap(self, live: _Live) -> int | None:
        with live.lock:
            live.reaped = True
            try:
                return live.process.wait(timeout=self._kill_grace)
            except subprocess.TimeoutExpired:
                return None

    def _spawn(
        self, argv: Sequence[str], cwd: str | Path | None, env: dict[str, str] | None
    ) -> subprocess.Popen[bytes]:
        command = argv[0]
        try:
            return subprocess.Popen(
                list(argv),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=cwd,
                env=env,
                start_new_session=True,
                close_fds=True,
            )
        except FileNotFoundError as exc:
            # Popen reports a missing cwd the same way; say which one it was.
            if cwd is not None and not Path(cwd).is_dir():
                raise SpawnError(command, "bad_cwd", f"working directory {cwd} does not exist") from exc
            raise SpawnError(command, "not_found", "no such file") from exc
        except PermissionError as exc:
            raise SpawnError(command, "not_executable", "not executable (permission denied)") from exc
        except OSError as exc:  # e.g. ENOEXEC: a file that is no program
            if exc.errno in (errno.EMFILE, errno.ENFILE):  # the daemon's own limit, not the command's fault
                raise SpawnError(command, "no_files", exc.strerror or "too many open files") from exc
            raise SpawnError(command, "not_executable", exc.strerror or str(exc)) from exc

    def _collect(
        self, pid: int, lines: queue.Queue[object], deadline: float, kept: _KeptLines
    ) -> Generator[str, None, tuple[bool, bool]]:
        """Yields stdout lines until EOF, the deadline, or the child's exit plus the drain time.

        Returns whether the deadline passed, and whether stdout reached EOF."""
        exited_at: float | None = None
        while True:
            now = time.monotonic()
            if now >= deadline:
                return True, False
            if exited_at is None and _has_exited(pid):
                exited_at = now
            if exited_at is not None and now - exited_at >= self._drain_seconds:
                return False, False  # a grandchild holds the pipe open; stop waiting for EOF
            try:
                item = lines.get(timeout=min(0.05, deadline - now))
            except queue.Empty:
                continue
            if item is _EOF:
                return False, True
            assert isinstance(item, str)
            kept.add(item)
            yield item

    # --- stopping --------------------------------------------------------------------------------------

    def cancel(self, owner: str | None = None) -> int:
        """Kills the running children started with ``owner`` (all when None); returns how many were running."""
        with self._lock:
            targets = [live for live in self._live.values() if owner is None or live.owner == owner]
            for live in targets:
                live.cancelled = True
        for live in targets:
            with live.lock:
                if not live.reaped:
                    kill_tree(live.process.pid, self._kill_grace)
        return len(targets)

    def active_count(self) -> int:
        with self._lock:
            return len(self._live)

    def shutdown(self) -> None:
        self.cancel(None)


def _feed(stream: IO[bytes], data: bytes) -> None:
    """Writes the prompt and closes stdin. A child that exits early gives a broken pipe, which is fine."""
    with contextlib.suppress(OSError, ValueError):
        if data:
            stream.write(data)
            stream.flush()
    with contextlib.suppress(OSError, ValueError):
        stream.close()


def _read_lines(stream: IO[bytes], lines: queue.Queue[object], max_line: int) -> None:
    skipping = False  # inside the rest of a line that was cut
    try:
        for raw in iter(lambda: stream.readline(max_line), b""):
            complete = raw.endswith(b"\n")
            if not skipping:
                lines.put(raw.decode("utf-8", errors="replace").rstrip("\r\n"))
            skipping = not complete
    except (OSError, ValueError):
        pass
    finally:
        lines.put(_EOF)


def _read_tail(stream: IO[bytes], tail: deque[str]) -> None:
    """Keeps about the last ``STDERR_TAIL_CHARS`` characters of stderr, however much the child writes."""
    size = 0
    try:
        for chunk in iter(lambda: stream.read1(4096), b""):  # type: ignore[attr-defined]
            text = chunk.decode("utf-8", errors="replace")
            tail.append(text)
            size += len(text)
            while size > 2 * STDERR_TAIL_CHARS and len(tail) > 1:
                size -= len(tail.popleft())
    except (OSError, ValueError):
        pass


def _drain(lines: queue.Queue[object], until: float, kept: _KeptLines) -> Iterator[str]:
    """Yields whatever stdout lines are still queued or arrive before ``until``."""
    while True:
        remaining = until - time.monotonic()
        try:
            item = lines.get(timeout=max(0.0, min(remaining, 0.05))) if remaining > 0 else lines.get_nowait()
        except queue.Empty:
            if remaining <= 0:
                return
            continue
        if item is _EOF:
            return
        assert isinstance(item, str)
        kept.add(item)
        yield item


def _has_exited(pid: int) -> bool:
    """True once the child has exited, without reaping it (so its pid and group id stay ours)."""
    if hasattr(os, "waitid"):
        try:
            return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
        except ChildProcessError:
            return True
    try:
        return bool(psutil.Process(pid).status() == psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return True
