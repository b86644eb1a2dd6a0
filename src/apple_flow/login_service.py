"""Running the daemon at login: a launchd agent on macOS (plist + launchctl), and the equivalent systemd user unit
to print elsewhere (launchd is macOS-only).

The launchd job runs ``Apple Flow.app`` (``app_bundle``), which starts the daemon's Python as its child, so that
macOS asks about "Apple Flow" rather than about a Python binary. launchd passes none of the shell's environment, so
the job gets an explicit PATH (with the folder of ``apple-code``) and runs in the folder of its ``.env``, whose path
it passes to the daemon: the daemon reads the file itself at every start, so ``service restart`` runs with the
current values (a plist holding them would keep a snapshot, and environment values win over the file's).
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
# 5 that lasts is not the race: launchd refuses a job that is disabled (`launchctl disable`, which `enable` before
# each bootstrap undoes) or whose "Allow in the Background" switch under Login Items is off.
BOOTSTRAP_IO_ERROR = 5
BOOTSTRAP_DISABLED = 119  # "Bootstrap failed: 119: Service is disabled"
LOGIN_ITEMS_SETTINGS = "System Settings > General > Login Items & Extensions"
SWITCH_ON = (
    f"open {LOGIN_ITEMS_SETTINGS}, switch on \u201cApple Flow\u201d under Allow in the Background, then run "
    "`apple-flow service install`"
)
# launchd starts a KeepAlive job that exited no sooner than this after its start (the daemon's own relaunch for a
# new grant waits as long).
THROTTLE_INTERVAL = 10
EXIT_TIMEOUT_MARGIN = 10  # seconds launchd waits beyond the daemon's shutdown grace before SIGKILL
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
        plist=home / "Library" / "LaunchAgents" / f"{settings.service.label}.plist",
        stdout_log=settings.service.log_dir / "daemon.out.log",
        stderr_log=settings.service.log_dir / "daemon.err.log",
    )


def program_arguments() -> list[str]:
    """The daemon's command: the Python of this environment running apple-flow."""
    return [sys.executable, "-m", "apple_flow", "run", "--channel", "imessage"]


def launchd_arguments(launcher: Path, env_file: Path, installed_at: float) -> list[str]:
    """The launchd job's command: the app's launcher, which starts the daemon as its child. ``--service`` has the
    daemon act as the login service (it texts the owner); ``--installed-at`` starts its quick permission checks."""
    return [
        str(launcher), *program_arguments(), "--env-file", str(env_file), "--service",
        "--installed-at", f"{installed_at:.0f}",
    ]


def service_path(settings: Settings) -> str:
    folders: list[str] = []
    apple_code = resolve_apple_code(settings.afm.command)
    if apple_code is not None:
        folders.append(str(apple_code.parent))
    folders.append(str(Path(sys.executable).parent))
    folders.extend(BASE_PATH)
    return ":".join(dict.fromkeys(folders))


def service_environment(settings: Settings) -> dict[str, str]:
    """No value from ``.env``: the daemon reads it at each start (see the module docstring)."""
    return {"PATH": service_path(settings), "PYTHONUNBUFFERED": "1"}


def exit_timeout(settings: Settings) -> int:
    """How long launchd waits after SIGTERM before SIGKILL: the daemon's shutdown grace and then some."""
    return int(settings.limits.shutdown_grace_seconds) + EXIT_TIMEOUT_MARGIN


def build_plist(
    settings: Settings, env_file: Path, files: ServiceFiles, launcher: Path, installed_at: float
) -> dict[str, Any]:
    return {
        "Label": settings.service.label,
        "ProgramArguments": launchd_arguments(launcher, env_file, installed_at),
        "WorkingDirectory": str(env_file.parent),
        "EnvironmentVariables": service_environment(settings),
        "RunAtLoad": True,
        "KeepAlive": True,
        "ThrottleInterval": THROTTLE_INTERVAL,
        "ExitTimeOut": exit_timeout(settings),
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
        f"TimeoutStopSec={exit_timeout(settings)}\n\n"
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
        self.target = f"{self._domain}/{settings.service.label}"

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
        """Writes the plist (mode 0600: its paths are nobody else's business) and loads it, replacing a loaded
        agent. ``enable`` first: a job disabled once (``launchctl disable``) stays disabled across bootouts, and
        bootstrap then fails with 5."""
        log_dir.mkdir(parents=True, exist_ok=True)
        plist.parent.mkdir(parents=True, exist_ok=True)
        self.bootout()
        write_private(plist, plistlib.dumps(content))
        self._call("enable", self.target)
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
                raise ServiceError(str(_failed(args, done)) + _bootstrap_hint(done.returncode))
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

    def disabled(self) -> bool:
        """Whether launchd keeps the job disabled (``launchctl disable``, or the owner switched "Apple Flow" off under
        Login Items, e.g. after macOS's "Background Items Added" notice): then it never runs, installed or not."""
        done = self._call("print-disabled", self._domain, check=False)
        if done.returncode != 0:
            return False  # an older launchctl, or none: nothing known
        label = self._settings.service.label
        for line in done.stdout.splitlines():
            name, sep, value = line.strip().partition("=>")
            if sep and name.strip().strip('"') == label:
                return value.strip() in ("disabled", "true")  # macOS 13+; before, true meant disabled
        return False


def _bootstrap_hint(code: int) -> str:
    if code == BOOTSTRAP_IO_ERROR:
        return (
            f" launchd kept refusing for {BOOTSTRAP_RETRY_SECONDS:g} s: the service is disabled, or \u201cApple "
            f"Flow\u201d is switched off under Allow in the Background. Open {LOGIN_ITEMS_SETTINGS}, switch on "
            "\u201cApple Flow\u201d under Allow in the Background, then run `apple-flow service install` again."
        )
    if code == BOOTSTRAP_DISABLED:
        return f" The service is switched off: {SWITCH_ON}."
    if code in BOOTSTRAP_BUSY:
        return (
            f" launchd was still busy with the old job after {BOOTSTRAP_RETRY_SECONDS:g} s: wait a minute, then run "
            "`apple-flow service install` again."
        )
    return ""


def _failed(args: tuple[str, ...], done: subprocess.CompletedProcess[str]) -> ServiceError:
    output = (done.stderr or done.stdout).strip()
    return ServiceError(f"launchctl {' '.join(args)} failed (exit {done.returncode}): {output}")
