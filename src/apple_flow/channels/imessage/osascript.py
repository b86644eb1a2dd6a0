"""Running AppleScript through ``osascript``: the script on stdin (``osascript -``), data only as ``on run argv``
arguments (never spliced into source), in its own process group, killed whole on timeout."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
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
