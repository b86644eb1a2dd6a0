"""What macOS must allow the iMessage daemon: reading chat.db (Full Disk Access) and controlling Messages
(Automation), checked by the daemon itself.

macOS charges both to the process's *responsible* app: run from a terminal, the terminal app; run by launchd, the
job's own executable: ``Apple Flow.app``, whose launcher starts the daemon (``app_bundle``), or the virtualenv's
resolved ``python3`` for a job that runs Python directly. A check made from a terminal says nothing about the
service, so every result names the app it applies to, and the daemon checks for itself at start. Its findings go
to its log, to ``health``, and to the store, where ``apple-flow service status`` (another process) reads them.

While chat.db cannot be read the daemon waits and tries again with a growing pause, instead of exiting into
launchd's KeepAlive restart every 10 s. macOS decides Full Disk Access when a process starts, so a refused service
stays refused after the grant: at each try it also reads chat.db in a new process (``fresh_read``), and when that
works while its own read does not, the service exits once with ``RELAUNCH_EXIT`` for launchd to start it again with
the grant (never sooner than ``THROTTLE_INTERVAL`` after its start, and once: a relaunch that did not help is
remembered until chat.db was readable again). Automation is probed in the background, because the first probe waits on
the permission prompt until the user answers it, and again later while Messages refuses. For the first minutes
after ``service install`` both are checked every few seconds (the owner is in System Settings right then).

Listeners (``listen``) get the report at every change; the daemon's ``OwnerNotices``, which texts the owner, gets
it as the channel interface's ``Access`` (``on_access``).
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Protocol

from apple_flow.app_bundle import LAUNCHER_VARIABLE, app_of_executable, shown
from apple_flow.channels.base import Access
from apple_flow.channels.imessage.chatdb import ChatDB, ChatDBError, ChatDBProblem, python_app_bundle, python_binary
from apple_flow.channels.imessage.fresh_read import readable_in_new_process
from apple_flow.channels.imessage.probe import ProbeResult, ProbeState, probe_messages_automation
from apple_flow.check_result import CheckResult, CheckStatus
from apple_flow.config import Settings
from apple_flow.login_service import THROTTLE_INTERVAL

log = logging.getLogger(__name__)

REPORT_KEY = "permissions"
CHAT_DB = "chat.db (Full Disk Access)"
AUTOMATION = "Messages (Automation)"
FULL_DISK_ACCESS_SETTINGS = "System Settings > Privacy & Security > Full Disk Access"
# The first probe may wait on the permission prompt; AppleScript itself gives up on an event after 120 s (-1712).
PROBE_TIMEOUT_SECONDS = 150.0
MAX_PAUSE_SECONDS = 300.0
QUICK_WINDOW_SECONDS = 600.0  # after `service install`: the owner is granting permissions right now
QUICK_PAUSE_SECONDS = 3.0
# The service's exit status when only a restart gives it a grant the owner has just given (launchd's KeepAlive starts
# it again; EX_TEMPFAIL). The launcher passes it on.
RELAUNCH_EXIT = 75
RELAUNCH_KEY = "relaunched_for_grant"  # set before such an exit; cleared once chat.db was read
GRANT_SEEN = "the grant is there, but this process started before it"

# TERM_PROGRAM of the terminal apps people use, and the name System Settings lists them under.
TERMINAL_APPS = {
    "Apple_Terminal": "Terminal",
    "iTerm.app": "iTerm",
    "vscode": "Visual Studio Code",
    "WarpTerminal": "Warp",
    "ghostty": "Ghostty",
    "WezTerm": "WezTerm",
    "Hyper": "Hyper",
    "tmux": "the terminal app that started tmux",
}


@dataclass(frozen=True)
class Responsible:
    """The app macOS asks about for this process."""

    name: str
    terminal: bool  # a terminal app (GUI), rather than this process's own binary (a launchd job)
    app: str = ""  # the .app to add with the + button when System Settings does not list it yet


def launcher_app(executable: str) -> Responsible:
    """The app whose launcher started this process (``APPLE_FLOW_LAUNCHER``): named as System Settings lists it."""
    bundle = app_of_executable(executable)
    if bundle is None:
        return Responsible(executable, False)
    return Responsible(bundle.stem, False, str(bundle))


def responsible_app(environ: Mapping[str, str] | None = None) -> Responsible:
    env = os.environ if environ is None else environ
    program = env.get("TERM_PROGRAM", "")
    if program:
        return Responsible(TERMINAL_APPS.get(program, program), True)
    launcher = env.get(LAUNCHER_VARIABLE, "")  # the service: Apple Flow.app started this Python
    if launcher:
        return launcher_app(launcher)
    bundle = env.get("__CFBundleIdentifier", "")  # set by macOS for everything an app (e.g. an IDE) starts
    if bundle:
        return Responsible(bundle, True)
    return Responsible(str(python_binary()), False)


@dataclass(frozen=True)
class PermissionReport:
    app: str
    pid: int
    started_at: float
    findings: tuple[CheckResult, ...]
    service_pid: int = 0  # the launchd job's process (Apple Flow.app's launcher, the daemon's parent); 0: ``pid``

    @property
    def job_pid(self) -> int:
        """The pid launchd reports for the job that made this report."""
        return self.service_pid or self.pid

    @property
    def ok(self) -> bool:
        return all(f.ok for f in self.findings)

    @property
    def settled(self) -> bool:
        return all(f.status is not CheckStatus.CHECKING for f in self.findings)

    def access(self) -> Access:
        """What the report allows, as the daemon is told of it: sending is Automation, reading is chat.db (still
        checking, or a problem other than a refusal: not known)."""
        states = {finding.name: finding for finding in self.findings}
        chat_db, automation = states.get(CHAT_DB), states.get(AUTOMATION)
        can_send = None if automation is None or automation.status is CheckStatus.CHECKING else automation.ok
        can_read = None
        if chat_db is not None and chat_db.status in (CheckStatus.OK, CheckStatus.DENIED):
            can_read = chat_db.ok
        return Access(self.app, can_send, can_read, chat_db.fix if chat_db is not None else "")

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> PermissionReport:
        data = json.loads(text)
        findings = tuple(CheckResult(f["name"], _status(f), f["detail"], f["fix"]) for f in data["findings"])
        return cls(
            data["app"], int(data["pid"]), float(data["started_at"]), findings, int(data.get("service_pid", 0))
        )


def _status(result: dict[str, str]) -> CheckStatus:
    """A stored result's status; a report written before the results shared one type says ``state``, and
    ``problem`` for what is now FAIL (a daemon still running the older version writes such a report)."""
    value = result["status"] if "status" in result else result["state"]
    return CheckStatus.FAIL if value == "problem" else CheckStatus(value)


def full_disk_access_fix(app: Responsible) -> str:
    if app.terminal:
        return (
            f"grant Full Disk Access to {app.name} in {FULL_DISK_ACCESS_SETTINGS}, then quit and reopen {app.name} "
            "(a terminal's grant does not cover the service: it is checked as itself, Apple Flow)"
        )
    if app.app:
        return (
            f"switch on {app.name} in {FULL_DISK_ACCESS_SETTINGS} (not listed? the + button, then Cmd+Shift+G and "
            f"{shown(Path(app.app))}); the service sees the grant and restarts itself to use it (or run "
            "`apple-flow service restart`)"
        )
    bundle = python_app_bundle()
    also = f" (and {bundle}, for this framework build of Python)" if bundle is not None else ""
    return (
        f"grant Full Disk Access to {app.name}{also} in {FULL_DISK_ACCESS_SETTINGS} (the + button; Cmd+Shift+G "
        "to type the path), then run `apple-flow service restart` (a process keeps the access it started with)"
    )


def chat_db_finding(read: Callable[[], int], path: Path, app: Responsible) -> CheckResult:
    try:
        newest = read()
    except ChatDBError as exc:
        if exc.problem is ChatDBProblem.NO_PERMISSION:
            return CheckResult(CHAT_DB, CheckStatus.DENIED, f"{app.name} may not read {path}",
                               full_disk_access_fix(app))
        return CheckResult(CHAT_DB, CheckStatus.FAIL, exc.what, exc.fix)
    return CheckResult(CHAT_DB, CheckStatus.OK, f"{path} readable by {app.name} (newest message {newest})")


def automation_finding(result: ProbeResult) -> CheckResult:
    if result.ok:
        return CheckResult(AUTOMATION, CheckStatus.OK, result.detail)
    status = CheckStatus.DENIED if result.state is ProbeState.DENIED else CheckStatus.FAIL
    return CheckResult(AUTOMATION, status, result.detail, result.fix)


def read_report(db_path: Path) -> PermissionReport | None:
    """The daemon's last report, read-only from another process; None when there is none (yet)."""
    if not db_path.is_file():
        return None
    try:
        connection = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=2)
        try:
            row = connection.execute("SELECT value FROM meta WHERE key = ?", (REPORT_KEY,)).fetchone()
        finally:
            connection.close()
    except sqlite3.Error:
        return None  # no meta table yet, or the file is being created
    return PermissionReport.from_json(row[0]) if row else None


class ReportRecord(Protocol):
    """Where the daemon keeps its report for other processes (the store's ``meta`` table)."""

    def set_meta(self, key: str, value: str) -> None: ...

    def get_meta(self, key: str) -> str | None: ...


class PermissionMonitor:
    """The daemon's own check of its permissions; see the module docstring."""

    def __init__(
        self,
        settings: Settings,
        record: ReportRecord,
        app: Responsible | None = None,
        clock: Callable[[], float] = time.time,
        installed_at: float | None = None,
        relaunch: Callable[[], None] | None = None,
        fresh_read: Callable[[Path], bool] = readable_in_new_process,
    ) -> None:
        """``relaunch`` (the service: the daemon's stop) ends this process for launchd to start it again, when only a
        new process would get a new grant; None (run by hand): it never does."""
        self._settings = settings
        self._record_to = record
        self.app = app or responsible_app()
        self._path = settings.imessage.messages_db_path
        self._first_pause = settings.imessage.poll_interval_seconds
        self._clock = clock
        self._started_at = clock()
        self._quick_until = (installed_at + QUICK_WINDOW_SECONDS) if installed_at is not None else 0.0
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._listeners: list[Callable[[PermissionReport], None]] = []
        self._relaunch = relaunch
        self._fresh_read = fresh_read
        self.relaunching = False  # the daemon's exit status is then RELAUNCH_EXIT
        self._watching_grant = False
        self._stuck: CheckResult | None = None  # a relaunch for the grant did not help: what to do instead
        self._findings = {
            CHAT_DB: CheckResult(CHAT_DB, CheckStatus.CHECKING, f"not read yet by {self.app.name}"),
            AUTOMATION: CheckResult(
                AUTOMATION, CheckStatus.CHECKING,
                f"asking Messages as {self.app.name} (macOS may ask you to allow it: click Allow)",
            ),
        }

    def start(self) -> None:
        """Reads chat.db once now and starts the Automation probe (whose prompt shows right away)."""
        self._record(self._findings[AUTOMATION])
        self._check_chat_db()
        threading.Thread(target=self._probe_automation, name="automation-probe", daemon=True).start()

    def close(self) -> None:
        self._closed.set()

    def listen(self, listener: Callable[[PermissionReport], None]) -> None:
        """``listener`` gets the report now and at every change (on the thread that made it)."""
        self._listeners.append(listener)
        listener(self.report())

    def on_access(self, listener: Callable[[Access], None]) -> None:
        """``listen``, with the report as the channel interface's ``Access`` (``channels.base.Permissions``)."""
        self.listen(lambda report: listener(report.access()))

    def chat_db_state(self, error: ChatDBError | None) -> None:
        """The reader's news: chat.db unreadable (``error``) or readable again (None), e.g. Full Disk Access
        switched off while the daemon runs. Only a refusal is a permission's business: a passing lock is not."""
        if error is None:
            if not self._findings[CHAT_DB].ok:
                self._check_chat_db()
            return
        if error.problem is not ChatDBProblem.NO_PERMISSION:
            return

        def failed() -> int:
            raise error

        self._record(chat_db_finding(failed, self._path, self.app))
        with self._lock:
            watching, self._watching_grant = self._watching_grant, True
        if not watching and self._relaunch is not None:
            threading.Thread(target=self._watch_grant, name="grant-watch", daemon=True).start()

    def _watch_grant(self) -> None:
        """While the reader is refused at run time: looks for the grant in a new process, as at start."""
        pause = self._first_pause
        while not self._closed.wait(self._pause(pause)) and not self._findings[CHAT_DB].ok:
            if self._grant_needs_relaunch():
                return
            pause = min(pause * 2, MAX_PAUSE_SECONDS)
        with self._lock:
            self._watching_grant = False

    def wait_until_ready(self, stop: threading.Event) -> bool:
        """Returns once chat.db can be read (True), or when ``stop`` is set (False). Tries again after a pause
        that doubles up to five minutes (every few seconds just after an install)."""
        pause = self._first_pause
        while not self._findings[CHAT_DB].ok:
            wait = self._pause(pause)
            log.warning("cannot read messages yet; trying again in %g s", wait)
            if stop.wait(wait):
                return False
            pause = min(pause * 2, MAX_PAUSE_SECONDS)
            self._check_chat_db()
            if not self._findings[CHAT_DB].ok and self._grant_needs_relaunch():
                return False
        return True

    def _grant_needs_relaunch(self) -> bool:
        """When this process is refused chat.db and a new one is not: relaunches (once, and not sooner than
        launchd's throttle after the start) and returns True."""
        if self._relaunch is None or self.relaunching or self._stuck is not None:
            return False
        if self._findings[CHAT_DB].status is not CheckStatus.DENIED:
            return False
        if self._clock() - self._started_at < THROTTLE_INTERVAL or not self._fresh_read(self._path):
            return False
        if self._record_to.get_meta(RELAUNCH_KEY):
            # The last start was such a relaunch and it did not help: exiting again would loop. Said once.
            self._stuck = CheckResult(
                CHAT_DB, CheckStatus.DENIED,
                f"a new process can read {self._path}, but {self.app.name}, restarted for the grant, still cannot",
                f"run `apple-flow service restart`; if that does not help, remove {self.app.name} from "
                f"{FULL_DISK_ACCESS_SETTINGS} and add it again",
            )
            self._record(self._stuck)
            return False
        self._record_to.set_meta(RELAUNCH_KEY, f"{self._clock():.0f}")
        self._record(CheckResult(CHAT_DB, CheckStatus.CHECKING, f"{GRANT_SEEN}: {self.app.name} restarts to use it"))
        log.warning("Full Disk Access was granted after this process started; exiting for launchd to restart it")
        self.relaunching = True
        self._relaunch()
        return True

    def _pause(self, backoff: float) -> float:
        """``backoff``, or the quick pause while the install's first minutes last."""
        return QUICK_PAUSE_SECONDS if self._clock() < self._quick_until else backoff

    def report(self) -> PermissionReport:
        with self._lock:
            findings = tuple(self._findings.values())
        # Under Apple Flow.app the job launchd runs is the launcher, this process's parent.
        job = os.getppid() if os.environ.get(LAUNCHER_VARIABLE) else os.getpid()
        return PermissionReport(self.app.name, os.getpid(), self._started_at, findings, job)

    def summary(self) -> str:
        """One paragraph for ``health``."""
        report = self.report()
        parts = [f.line() for f in report.findings]
        return f"Permissions of {report.app}: " + "; ".join(parts)

    def _check_chat_db(self) -> None:
        db = ChatDB(self._path)
        try:
            finding = chat_db_finding(db.latest_rowid, self._path, self.app)
        finally:
            db.close()
        if finding.ok:
            self._stuck = None
            if self._record_to.get_meta(RELAUNCH_KEY):
                self._record_to.set_meta(RELAUNCH_KEY, "")
        elif self._stuck is not None and finding.status is CheckStatus.DENIED:
            finding = self._stuck  # what the owner must do is still that
        self._record(finding)

    def _probe_automation(self) -> None:
        pause = self._first_pause
        while not self._closed.is_set():
            result = probe_messages_automation(
                self._settings.imessage.osascript_command, PROBE_TIMEOUT_SECONDS, self.app.name)
            self._record(automation_finding(result))
            if result.ok or result.state is ProbeState.UNAVAILABLE or self._closed.wait(self._pause(pause)):
                return
            pause = min(pause * 2, MAX_PAUSE_SECONDS)

    def _record(self, finding: CheckResult) -> None:
        with self._lock:
            changed = self._findings.get(finding.name) != finding
            self._findings[finding.name] = finding
        if changed:
            (log.info if finding.status in (CheckStatus.OK, CheckStatus.CHECKING) else log.error)("%s", finding.line())
        report = self.report()
        try:
            self._record_to.set_meta(REPORT_KEY, report.to_json())
        except Exception:  # the report is for people; it must not stop the daemon
            log.exception("could not record the permission report")
        for listener in list(self._listeners) if changed else []:
            try:
                listener(report)
            except Exception:  # a listener's failure (e.g. a text not sent) must not stop the check
                log.exception("a permission listener failed")
