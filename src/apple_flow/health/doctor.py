"""The doctor's checks: everything the daemon needs, each with what to do when it is missing. Used by
`apple-flow doctor` and `apple-flow setup` (which render them) and, in part, by the web page's health view."""

from __future__ import annotations

import contextlib
import sqlite3
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from apple_flow import host
from apple_flow.channels.imessage.chatdb import ChatDB, ChatDBError, ChatDBProblem
from apple_flow.channels.imessage.permissions import Responsible, full_disk_access_fix, read_report, responsible_app
from apple_flow.channels.imessage.probe import probe_messages_automation
from apple_flow.channels.imessage.watcher import DbChangeWaiter
from apple_flow.check_result import CheckResult, CheckStatus
from apple_flow.config import Settings, SettingsError, load_settings
from apple_flow.connectors.afm import AfmConnector
from apple_flow.connectors.registry import REGISTRY
from apple_flow.connectors.runner import SpawnError
from apple_flow.daemon.deciding.state_view import EventReads
from apple_flow.daemon.deciding.status_replies import FORGEABLE_EVENT, forgeable_line
from apple_flow.daemon.store import Event
from apple_flow.handles import normalize_handle
from apple_flow.times import moment

_PROBE_TIMEOUT = 30.0


def check_settings(env_file: Path = Path(".env")) -> tuple[Settings, CheckResult]:
    try:
        settings = load_settings(env_file)
    except SettingsError as exc:
        # The other checks still run, on the defaults, so one bad variable does not hide the rest.
        failed = CheckResult("settings", CheckStatus.FAIL, str(exc), "fix the variables named above")
        return Settings.model_construct(), failed
    return settings, CheckResult("settings", CheckStatus.OK, f"valid ({env_file} and APPLE_FLOW_* variables)")


def check_chat_db(path: Path, given: bool) -> tuple[CheckResult, ChatDBError | None]:
    if not host.is_macos() and not given and not path.exists():
        return CheckResult("chat.db", CheckStatus.NA, f"{path}: not on macOS (pass --db PATH to check a copy)"), None
    try:
        newest = ChatDB(path, platform="darwin" if host.is_macos() else sys.platform).latest_rowid()
    except ChatDBError as exc:
        return CheckResult("chat.db", CheckStatus.FAIL, exc.what, exc.fix), exc
    return CheckResult("chat.db", CheckStatus.OK, f"{path} readable (newest message rowid {newest})"), None


def _for(app: Responsible) -> str:
    """Which app a permission result applies to: macOS checks the responsible app, not this command."""
    if app.terminal:
        return (
            f"{app.name} (the app this command runs in; the service is checked as itself: "
            "`apple-flow service status`)"
        )
    return app.name


def check_full_disk_access(
    chat_error: ChatDBError | None, chat_check: CheckResult, app: Responsible | None = None
) -> CheckResult:
    """For ``app``, by default the app macOS charges this process's file access to."""
    app = app or responsible_app()
    if not host.is_macos():
        return CheckResult("Full Disk Access", CheckStatus.NA, "macOS only")
    if chat_error is not None and chat_error.problem is ChatDBProblem.NO_PERMISSION:
        return CheckResult("Full Disk Access", CheckStatus.FAIL, f"not granted to {_for(app)}",
                           full_disk_access_fix(app))
    if chat_check.status is CheckStatus.OK:
        return CheckResult("Full Disk Access", CheckStatus.OK, f"granted to {_for(app)}")
    return CheckResult("Full Disk Access", CheckStatus.WARN, "cannot tell until chat.db exists", "see the chat.db line")


def check_pickup(path: Path, settings: Settings, chat_check: CheckResult) -> CheckResult:
    """Whether new messages will be noticed by file events, or only by the safety-net poll."""
    name = "new-message pickup"
    if chat_check.status is CheckStatus.NA:
        return CheckResult(name, CheckStatus.NA, "no chat.db here")
    waiter = DbChangeWaiter(path, settings.imessage.poll_interval_seconds, threading.Event())
    waiter.start()
    watching = waiter.watching
    waiter.close()
    if watching:
        poll = f"poll every {settings.imessage.poll_interval_seconds:g} s"
        return CheckResult(name, CheckStatus.OK, f"file events on {path.parent} ({poll})")
    return CheckResult(
        name, CheckStatus.WARN,
        f"cannot watch {path.parent}: only the poll every {settings.imessage.poll_interval_seconds:g} s",
        "make the folder exist and readable (on Linux: raise fs.inotify.max_user_watches if it is exhausted)",
    )


def check_automation(settings: Settings, app: Responsible) -> CheckResult:
    if not host.is_macos():
        return CheckResult("Messages automation", CheckStatus.NA, "macOS only (AppleScript)")
    result = probe_messages_automation(settings.imessage.osascript_command, _PROBE_TIMEOUT, app.name)
    status = CheckStatus.OK if result.ok else CheckStatus.FAIL
    return CheckResult("Messages automation", status, result.detail, result.fix)


def check_service_report(settings: Settings, installed: bool = False) -> CheckResult:
    """What the daemon found when it checked its own permissions (the service's differ from this terminal's). With
    the service ``installed`` its report is the check of chat.db and Messages: a missing grant fails."""
    if not host.is_macos():
        return CheckResult("service", CheckStatus.NA, "macOS only")
    if installed and (unloaded := _not_running(settings)) is not None:
        return unloaded
    report = read_report(settings.db_path)
    if report is None and installed:
        return CheckResult(
            "service", CheckStatus.WARN, "installed, but the daemon has not reported its permissions yet",
            "`apple-flow service status` says whether it runs; its log: `apple-flow service logs`",
        )
    if report is None:
        return CheckResult(
            "service", CheckStatus.NA,
            "no daemon has reported its permissions yet (`apple-flow service install` starts the service)",
        )
    started = moment(report.started_at)
    detail = f"the daemon (pid {report.pid}, started {started}) as {report.app}: " + "; ".join(
        f"{f.name}: {f.status.value}" for f in report.findings
    )
    problems = [f for f in report.findings if not f.ok]
    if not problems:
        return CheckResult("service", CheckStatus.OK, detail)
    fixes = " ".join(f"{f.name}: {f.fix or f.detail}." for f in problems)
    return CheckResult("service", CheckStatus.FAIL if installed else CheckStatus.WARN, detail, fixes)


def _not_running(settings: Settings) -> CheckResult | None:
    """An installed service that launchd does not run: switched off under Login Items, or not loaded."""
    from apple_flow.login_service import SWITCH_ON, Launchd, ServiceError

    launchd = Launchd(settings)
    try:
        if launchd.disabled():
            return CheckResult(
                "service", CheckStatus.FAIL,
                f"installed but switched off: launchd keeps {launchd.target} disabled, so it never runs", SWITCH_ON,
            )
        if not launchd.is_loaded():
            return CheckResult(
                "service", CheckStatus.FAIL, f"installed but not loaded: launchd does not know {launchd.target}",
                "run `apple-flow service install` (it loads it again)",
            )
    except ServiceError:
        return None  # launchctl missing or silent: the report below still tells what the service last found
    return None


@dataclass(frozen=True)
class AgentProbe:
    """The connector's own start-up check (``apple-code --version`` and ``--check``; ``--version`` elsewhere)."""

    ok: bool
    missing: bool  # the command is not there at all
    detail: str


def probe_agent(settings: Settings) -> AgentProbe:
    from apple_flow.connectors import build_connector
    from apple_flow.connectors.base import ConnectorError, Status
    from apple_flow.connectors.cli import CliConnector

    try:
        connector = build_connector(settings)
        where = connector.resolve_command() if isinstance(connector, CliConnector) else None
        connector.ensure_started()
    except ConnectorError as exc:
        return AgentProbe(False, exc.status is Status.BINARY_MISSING, str(exc))
    except SettingsError as exc:
        return AgentProbe(False, False, str(exc))
    how = "--check passed" if settings.connector in APPLE_CODE_CONNECTORS else "ready"
    return AgentProbe(True, False, f"{where or 'found'}: {how}")


APPLE_CODE_CONNECTORS = frozenset({"afm", "ollama"})  # the connectors that run apple-code
# How to install the agent CLI of each other connector, for a doctor that did not find it.
INSTALL = {
    "codex-cli": "install Codex CLI (npm install -g @openai/codex)",
    "claude-cli": "install Claude Code (npm install -g @anthropic-ai/claude-code)",
    "gemini-cli": "install Gemini CLI (npm install -g @google/gemini-cli)",
    "cline": "install Cline CLI (npm install -g cline), then run `cline auth`",
    "kilo-cli": "install Kilo CLI (npm install -g @kilocode/cli), then run `kilo` once and /connect a provider",
}


def install_hint(connector: str) -> str:
    """How to get a connector's missing command."""
    if connector in APPLE_CODE_CONNECTORS:
        return "run ./scripts/setup.sh (it builds apple-code)"
    return INSTALL.get(connector, "install it")


def check_agent(settings: Settings) -> CheckResult:
    probe = probe_agent(settings)
    name = f"agent ({settings.connector})"
    if probe.ok:
        return CheckResult(name, CheckStatus.OK, probe.detail)
    fix = (
        f"{install_hint(settings.connector)}, or set the command's path in .env"
        if probe.missing
        else "do what the detail says, then run `apple-flow doctor` again"
    )
    return CheckResult(name, CheckStatus.FAIL, probe.detail, fix)


def check_allowlist(settings: Settings) -> CheckResult:
    senders = [normalize_handle(s, settings.default_region) for s in settings.allowed_senders]
    if not senders:
        return CheckResult(
            "allowed senders", CheckStatus.FAIL, "empty: nobody can use the daemon",
            "set APPLE_FLOW_ALLOWED_SENDERS=+15551234567,you@example.com (your own handles) in .env",
        )
    return CheckResult("allowed senders", CheckStatus.OK, ", ".join(senders))


def check_workspaces(settings: Settings) -> CheckResult:
    from apple_flow.daemon.deciding.workspaces import WorkspaceError, Workspaces

    name = "workspaces"
    default = settings.workspaces.default
    if not default.is_dir():
        return CheckResult(
            name, CheckStatus.FAIL, f"the default workspace {default} is not a folder",
            "create it, or set APPLE_FLOW_DEFAULT_WORKSPACE to the folder the agent should work in",
        )
    workspaces = Workspaces(settings)
    problems = []
    for alias in sorted(settings.workspaces.aliases):
        try:
            workspaces.resolve(alias)
        except WorkspaceError as exc:
            problems.append(str(exc))
    aliases = ", ".join(f"@{alias}" for alias in sorted(settings.workspaces.aliases)) or "no aliases"
    if problems:
        return CheckResult(
            name, CheckStatus.WARN, " ".join(problems),
            "fix APPLE_FLOW_WORKSPACE_ALIASES, or add the folders to APPLE_FLOW_ALLOWED_WORKSPACES",
        )
    return CheckResult(name, CheckStatus.OK, f"default {default}; {aliases}")


def check_sms(settings: Settings, log: EventReads | None) -> CheckResult:
    """The SMS and RCS messages the daemon did not act on (their sender IDs can be forged), from its database."""
    name = "SMS and RCS"
    policy = (
        "taken, read-only (APPLE_FLOW_ALLOW_SMS=true; they never approve, deny or cancel)"
        if settings.allow_sms
        else "not acted on: their senders can be forged (APPLE_FLOW_ALLOW_SMS=false)"
    )
    count = log.count_events(FORGEABLE_EVENT) if log is not None else 0
    if not count:
        return CheckResult(name, CheckStatus.OK, f"{policy}; none refused")
    assert log is not None
    (newest,) = log.recent_events(1, FORGEABLE_EVENT)
    return CheckResult(
        name, CheckStatus.WARN, forgeable_line(count, newest),
        "ask the sender to turn on iMessage, or set APPLE_FLOW_ALLOW_SMS=true to take them read-only",
    )


class ReadOnlyEvents:
    """The events of the daemon's database (``EventReads``), opened read-only: the doctor changes nothing, creates
    nothing."""

    def __init__(self, path: Path) -> None:
        self._path = path

    def _query(self, sql: str, args: tuple[Any, ...]) -> list[Any]:
        try:
            with contextlib.closing(sqlite3.connect(f"{self._path.absolute().as_uri()}?mode=ro", uri=True)) as db:
                return db.execute(sql, args).fetchall()
        except sqlite3.Error:
            return []  # no database yet, or not one of ours: nothing recorded

    def count_events(self, kind: str) -> int:
        rows = self._query("SELECT COUNT(*) FROM events WHERE kind = ?", (kind,))
        return int(rows[0][0]) if rows else 0

    def recent_events(self, limit: int = 50, kind: str | None = None) -> list[Event]:
        rows = self._query(
            "SELECT at, kind, sender, detail FROM events WHERE kind = ? ORDER BY id DESC LIMIT ?", (kind, limit)
        )
        return [Event(*row) for row in reversed(rows)]


def check_web_name(settings: Settings) -> CheckResult:
    """Whether Safari, the Mac's default browser, opens the page under its own name (it asks the system resolver,
    which knows only the bare localhost; see ``web.local_name``)."""
    from apple_flow.local_name import hosts_fix, resolves_here

    name = "web page in Safari"
    local = settings.web.local_name
    if not host.is_macos() or not settings.web.enabled or not local or settings.web.base_url:
        return CheckResult(name, CheckStatus.NA, "only for the page's own name on a Mac")
    if resolves_here(local):
        return CheckResult(name, CheckStatus.OK, f"{local} resolves on this Mac: Safari opens the page")
    return CheckResult(
        name, CheckStatus.WARN, f"Safari cannot open {local} on this Mac (Chrome and Firefox can)",
        f"run once in Terminal: {hosts_fix(local)}",
    )


SANDBOX_CHECK_TIMEOUT = 900.0  # its swift build of a tiny package takes a minute or more the first time


def check_sandbox(settings: Settings) -> CheckResult:
    """`apple-code --sandbox-check` with what the daemon hides and refuses: each of the sandbox's checks on this
    machine (escapes, the hidden paths, the web port, and on a Mac Apple events and launchd)."""
    name = "command sandbox"
    connector_class = REGISTRY.get(settings.connector)
    if connector_class is None or not issubclass(connector_class, AfmConnector):
        return CheckResult(name, CheckStatus.NA, f"{settings.connector} runs its commands in its own sandbox")
    connector = connector_class(settings)
    if connector.resolve_command() is None:
        return CheckResult(name, CheckStatus.NA, "no apple-code to check it with (see the agent check)")
    argv = [connector.executable(), "--sandbox-check", *connector.reach_flags()]
    try:
        result = connector.runner.run(argv, "", timeout=SANDBOX_CHECK_TIMEOUT, env=connector.environment())
    except SpawnError as exc:
        return CheckResult(name, CheckStatus.FAIL, f"cannot run {argv[0]}: {exc}", "run ./scripts/setup.sh")
    lines = result.stdout_lines
    sandbox = lines[0].removeprefix("sandbox: ") if lines and lines[0].startswith("sandbox: ") else "unknown"
    passed = [line for line in lines if line.startswith("ok    ")]
    skipped = [line for line in lines if line.startswith("skip  ")]
    failed = [line.removeprefix("FAIL  ") for line in lines if line.startswith("FAIL  ")]
    counts = f"{len(passed)} checks passed" + (f", {len(skipped)} not for this system" if skipped else "")
    if result.exit_code == 0 and not failed:
        return CheckResult(name, CheckStatus.OK, f"{sandbox}: {counts}")
    why = "; ".join(failed) or result.last_stderr_line or f"exit code {result.exit_code}"
    return CheckResult(
        name, CheckStatus.FAIL, f"{sandbox}: {why}",
        "Linux: install bubblewrap (apt-get install bubblewrap); `apple-code --sandbox-check` shows every check",
    )


SERVICE_CHECKS_ITSELF = "the service checks this itself, as Apple Flow (see the service line)"


def service_installed(settings: Settings) -> bool:
    """Whether the login service is installed here (its launchd plist exists): then the service reads messages, as
    Apple Flow, and what this terminal may do says nothing about it."""
    from apple_flow.login_service import service_files

    return host.is_macos() and service_files(settings).plist.is_file()


def run_doctor(db: Path | None, env_file: Path = Path(".env"), terminal_permissions: bool | None = None,
               sandbox: bool = True) -> list[CheckResult]:
    """Every check. Without ``terminal_permissions`` (by default: when a service is installed, as the terminal then
    never reads messages) Messages and the terminal's Full Disk Access are not tried from here, so macOS asks
    nothing about the terminal; a chat.db given as ``db`` (a copy) is still read."""
    settings, settings_check = check_settings(env_file)
    service = service_installed(settings)
    if terminal_permissions is None:
        terminal_permissions = not service
    path = (db or settings.imessage.messages_db_path).expanduser()
    if terminal_permissions:
        chat_check, chat_error = check_chat_db(path, given=db is not None)
        app = responsible_app()
        permissions = [
            chat_check,
            check_pickup(path, settings, chat_check),
            check_full_disk_access(chat_error, chat_check, app),
            check_automation(settings, app),
        ]
    else:
        permissions = []
        if db is not None:  # a copy named on the command line: reading it asks macOS about nothing
            chat_check, _ = check_chat_db(path, given=True)
            permissions = [chat_check, check_pickup(path, settings, chat_check)]
        shown = {check.name for check in permissions}
        permissions += [
            CheckResult(name, CheckStatus.NA, SERVICE_CHECKS_ITSELF)
            for name in ("chat.db", "new-message pickup", "Full Disk Access", "Messages automation")
            if name not in shown
        ]
    return [
        settings_check,
        *permissions,
        check_service_report(settings, installed=service),
        check_agent(settings),
        check_workspaces(settings),
        check_allowlist(settings),
        check_sms(settings, ReadOnlyEvents(settings.db_path)),
        check_web_name(settings),
        *([check_sandbox(settings)] if sandbox else []),
    ]
