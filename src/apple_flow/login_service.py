"""Running the daemon at login: a launchd agent on macOS (plist + launchctl), and the equivalent systemd user unit
to print elsewhere (launchd is macOS-only).

launchd passes none of the shell's environment, so the agent gets an explicit PATH (with the folder of
``apple-code``) and the project's ``.env`` values, and runs in the folder of that ``.env``.
"""

from __future__ import annotations

import os
import plistlib
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dotenv import dotenv_values

from apple_flow.config import Settings
from apple_flow.paths import resolve_apple_code
from apple_flow.privatefile import write_private

BASE_PATH = ("/opt/homebrew/bin", "/usr/local/bin", "/usr/bin", "/bin", "/usr/sbin", "/sbin")
LAUNCHCTL_TIMEOUT = 30
# launchctl's answers (see mac-edges.md): `bootout` returns before the job has left the domain, and a `bootstrap`
# of the same label meanwhile fails with 5 (Input/output error) or 37 (Operation already in progress) for a few
# seconds (~5 s measured on macOS 26.5). `bootout` of a job that is not loaded exits 3.
BOOTOUT_NOT_LOADED = 3
BOOTSTRAP_BUSY = frozenset({5, 37})
LEAVE_TIMEOUT_SECONDS = 15.0  # how long a booted-out job may take to leave the domain
BOOTSTRAP_RETRY_SECONDS = 20.0  # how long bootstrap is retried on 5 / 37
POLL_SECONDS = 0.5


class ServiceError(RuntimeError):
    """launchctl failed; the message has its output and what to try."""


@dataclass(frozen=True)
class ServiceFiles:
    plist: Path
    stdout_log: Path
    stderr_log: Path


def service_files(settings: Settings, home: Path | None = None) -> ServiceFiles:
    home = home or Path.home()
    return ServiceFiles(
        plist=home / "Library" / "LaunchAgents" / f"{settings.service_label}.plist",
        stdout_log=settings.log_dir / "daemon.out.log",
        stderr_log=settings.log_dir / "daemon.err.log",
    )


def program_arguments() -> list[str]:
    # The Python binary itself runs the daemon: it is the one that needs Full Disk Access for chat.db.
    return [sys.executable, "-m", "apple_flow", "run", "--channel", "imessage"]


def service_path(settings: Settings) -> str:
    folders: list[str] = []
    apple_code = resolve_apple_code(settings.afm_command)
    if apple_code is not None:
        folders.append(str(apple_code.parent))
    folders.append(str(Path(sys.executable).parent))
    folders.extend(BASE_PATH)
    return ":".join(dict.fromkeys(folders))


def service_environment(settings: Settings, env_file: Path) -> dict[str, str]:
    values = {k: v for k, v in dotenv_values(env_file).items() if v is not None} if env_file.is_file() else {}
    return {**values, "PATH": service_path(settings), "PYTHONUNBUFFERED": "1"}


def build_plist(settings: Settings, env_file: Path, files: ServiceFiles) -> dict[str, Any]:
    return {
        "Label": settings.service_label,
        "ProgramArguments": program_arguments(),
        "WorkingDirectory": str(env_file.parent),
        "EnvironmentVariables": service_environment(settings, env_file),
        "RunAtLoad": True,
        "KeepAlive": True,
        "ThrottleInterval": 10,
        "StandardOutPath": str(files.stdout_log),
        "StandardErrorPath": str(files.stderr_log),
        "ProcessType": "Interactive",
    }


def systemd_unit(settings: Settings, env_file: Path) -> str:
    """The same service as a systemd user unit (for ~/.config/systemd/user/apple-flow.service)."""
    command = " ".join(_quote(part) for part in program_arguments())
    env_line = f"EnvironmentFile=-{env_file}\n" if env_file.is_file() else ""
    return (
        "[Unit]\n"
        "Description=apple-flow daemon\n"
        "After=network.target\n\n"
        "[Service]\n"
        f"ExecStart={command}\n"
        f"WorkingDirectory={env_file.parent}\n"
        f"Environment=PATH={service_path(settings)}\n"
        f"{env_line}"
        "Restart=always\n"
        "RestartSec=10\n"
        f"TimeoutStopSec={int(settings.shutdown_grace_seconds) + 10}\n\n"
        "[Install]\n"
        "WantedBy=default.target\n"
    )


def _quote(part: str) -> str:
    return f'"{part}"' if any(c.isspace() for c in part) else part


class Launchd:
    """The launchctl calls for one agent in the user's GUI domain."""

    def __init__(
        self,
        settings: Settings,
        launchctl: str = "launchctl",
        uid: int | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._settings = settings
        self._launchctl = launchctl
        self._clock = clock
        self._sleep = sleep
        self._domain = f"gui/{os.getuid() if uid is None else uid}"
        self.target = f"{self._domain}/{settings.service_label}"

    def _call(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        try:
            done = subprocess.run(
                [self._launchctl, *args], capture_output=True, text=True, stdin=subprocess.DEVNULL,
                timeout=LAUNCHCTL_TIMEOUT, check=False,
            )
        except FileNotFoundError as exc:
            raise ServiceError(f"{self._launchctl} not found: launchd agents need macOS.") from exc
        except subprocess.TimeoutExpired as exc:
            raise ServiceError(f"launchctl {args[0]} did not answer in {LAUNCHCTL_TIMEOUT} s.") from exc
        if check and done.returncode != 0:
            raise _failed(args, done)
        return done

    def install(self, plist: Path, content: dict[str, Any], log_dir: Path) -> None:
        """Writes the plist (mode 0600: it holds the .env values) and loads it, replacing a loaded agent."""
        log_dir.mkdir(parents=True, exist_ok=True)
        plist.parent.mkdir(parents=True, exist_ok=True)
        self.bootout()
        write_private(plist, plistlib.dumps(content))
        self._bootstrap(plist)

    def uninstall(self, plist: Path) -> bool:
        """Unloads and removes the agent; False when there was nothing to remove."""
        loaded = self.bootout()
        existed = plist.exists()
        plist.unlink(missing_ok=True)
        return loaded or existed

    def bootout(self) -> bool:
        """Unloads the agent and waits until it has left the domain; False when it was not loaded."""
        done = self._call("bootout", self.target, check=False)
        if done.returncode == BOOTOUT_NOT_LOADED:
            return False
        if done.returncode != 0:
            raise _failed(("bootout", self.target), done)
        deadline = self._clock() + LEAVE_TIMEOUT_SECONDS
        while self.is_loaded():
            if self._clock() >= deadline:
                raise ServiceError(
                    f"{self.target} is still in the launchd domain after {LEAVE_TIMEOUT_SECONDS:g} s of bootout; "
                    f"wait a little and run the command again (`launchctl print {self.target}` shows it)."
                )
            self._sleep(POLL_SECONDS)
        return True

    def _bootstrap(self, plist: Path) -> None:
        args = ("bootstrap", self._domain, str(plist))
        deadline = self._clock() + BOOTSTRAP_RETRY_SECONDS
        while True:
            done = self._call(*args, check=False)
            if done.returncode == 0:
                return
            if done.returncode not in BOOTSTRAP_BUSY or self._clock() >= deadline:
                hint = (
                    f" launchd kept refusing for {BOOTSTRAP_RETRY_SECONDS:g} s: check the plist with "
                    f"`plutil -lint {plist}`, then run the command again."
                    if done.returncode in BOOTSTRAP_BUSY else ""
                )
                raise ServiceError(str(_failed(args, done)) + hint)
            self._sleep(POLL_SECONDS)

    def is_loaded(self) -> bool:
        return self._call("print", self.target, check=False).returncode == 0

    def status(self) -> dict[str, str]:
        """``state`` and ``pid`` (when running) from ``launchctl print``; empty when not loaded."""
        done = self._call("print", self.target, check=False)
        if done.returncode != 0:
            return {}
        found: dict[str, str] = {}
        for line in done.stdout.splitlines():
            key, sep, value = line.strip().partition(" = ")
            if sep and key in ("state", "pid", "last exit code") and key not in found:
                found[key] = value.strip()
        return found

    def restart(self) -> None:
        self._call("kickstart", "-k", self.target)


def _failed(args: tuple[str, ...], done: subprocess.CompletedProcess[str]) -> ServiceError:
    output = (done.stderr or done.stdout).strip()
    return ServiceError(f"launchctl {' '.join(args)} failed (exit {done.returncode}): {output}")
