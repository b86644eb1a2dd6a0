"""Running AppleScript through ``osascript``: the script on stdin (``osascript -``), data never spliced into source:
only as ``on run argv`` arguments, and a reply's handle and text not even there (``run_osascript_private``: argv
holds only the paths of files only this user can read), in its own process group, killed whole on timeout."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass

_DRAIN_SECONDS = 2.0


@dataclass(frozen=True)
class ScriptResult:
    returncode: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0


class ScriptTimeout(TimeoutError):
    """osascript did not finish in time (often: waiting on an Automation permission prompt)."""


class OsascriptMissing(FileNotFoundError):
    """No osascript: AppleScript exists only on macOS."""


def argv_safe(text: str) -> str:
    """``text`` as an argv item can carry it: without NUL bytes (argv strings end at one), surrogates paired into
    their character and lone ones as U+FFFD (they have no UTF-8 encoding)."""
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace").replace("\x00", "")


def run_osascript(command: str, script: str, args: list[str], timeout: float) -> ScriptResult:
    executable = shutil.which(command)
    if executable is None:
        raise OsascriptMissing(f"'{command}' not found: sending iMessages needs macOS (osascript)")
    process = subprocess.Popen(
        [executable, "-", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,  # its own process group, so a timeout kills everything it started
    )
    try:
        stdout, stderr = process.communicate(script.encode("utf-8"), timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(process)
        raise ScriptTimeout(f"osascript did not finish within {timeout:g}s") from None
    return ScriptResult(process.returncode, stdout.decode("utf-8", "replace"), stderr.decode("utf-8", "replace"))


# The prefix of the files ``run_osascript_private`` hands over (tests/support/fake_osascript.py reads them back).
ARGUMENT_PREFIX = "apple-flow-osascript-"


def run_osascript_private(command: str, script: str, values: list[str], timeout: float) -> ScriptResult:
    """``run_osascript`` with each value written to a file only this user can read (0600, in a 0700 folder removed
    after), its argv holding only their paths: a process's arguments are visible to every local user (``ps``), and
    a reply may hold a one-time login link. The script reads item N with ``read_argument(N)``."""
    folder = tempfile.mkdtemp(prefix=ARGUMENT_PREFIX)
    try:
        paths = []
        for number, value in enumerate(values, start=1):
            path = os.path.join(folder, f"{ARGUMENT_PREFIX}{number}")
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "wb") as file:
                file.write(argv_safe(value).encode("utf-8"))
            paths.append(path)
        return run_osascript(command, script, paths, timeout)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def read_argument(number: int) -> str:
    """The AppleScript expression for the text of ``run_osascript_private``'s value ``number`` (from 1)."""
    return f"(read (POSIX file (item {number} of argv)) as «class utf8»)"


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            break
        try:
            process.communicate(timeout=_DRAIN_SECONDS)  # bounded: a grandchild may hold the pipes open
            break
        except subprocess.TimeoutExpired:
            continue
