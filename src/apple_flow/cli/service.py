"""`apple-flow service install|uninstall|status|restart|logs`: the launchd agent."""

from __future__ import annotations

import subprocess
import time
from collections import deque
from pathlib import Path

import typer
from rich.markup import escape

from apple_flow import host
from apple_flow.app_bundle import (
    APP_NAME,
    AUTOMATION_RESET,
    AppBundleError,
    InstalledApp,
    app_path,
    full_disk_access_regrant,
    install_app,
    reset_automation,
    shown,
)
from apple_flow.channels.imessage.permissions import (
    AUTOMATION,
    CHAT_DB,
    PermissionReport,
    Responsible,
    full_disk_access_fix,
    launcher_app,
    read_report,
)
from apple_flow.channels.imessage.probe import AUTOMATION_SETTINGS
from apple_flow.check_result import CheckStatus
from apple_flow.cli.common import err, print_error, settings_or_exit
from apple_flow.config import Settings
from apple_flow.login_service import SWITCH_ON, Launchd, ServiceError, build_plist, service_files, systemd_unit
from apple_flow.paths import built_launcher
from apple_flow.times import moment

service_app = typer.Typer(help="Run the daemon at login (a launchd agent on macOS).", no_args_is_help=True)

EnvOption = typer.Option(
    Path(".env"), "--env-file", help="The .env the service reads (its folder is the working folder)."
)
REPORT_POLL_SECONDS = 0.5
EXIT_MISSING_PERMISSION = 3  # `service status`: running, but its own check found a permission missing
REPORT_WAIT_SECONDS = 60.0  # the first Automation check waits on the user's answer to the prompt


def _launchd_or_exit(settings: Settings, env_file: Path) -> Launchd:
    """On macOS the launchd agent; elsewhere says so, prints the systemd user unit on stdout, and exits 1."""
    if host.is_macos():
        return Launchd(settings)
    err.print(
        "launchd agents are macOS-only. On Linux, the equivalent systemd user unit follows; save it as "
        "~/.config/systemd/user/apple-flow.service, then run: systemctl --user daemon-reload && "
        "systemctl --user enable --now apple-flow"
    )
    typer.echo(systemd_unit(settings, env_file.resolve()), nl=False)
    raise typer.Exit(1)


def _fail(exc: ServiceError) -> typer.Exit:
    print_error(exc)
    return typer.Exit(1)


@service_app.command()
def install(
    env_file: Path = EnvOption,
    wait: float | None = typer.Option(
        None, "--wait", min=0, show_default=f"{REPORT_WAIT_SECONDS:g}",
        help="Seconds to wait for the service to report its permissions (0: do not wait).",
    ),
) -> None:
    """Install Apple Flow.app (the app macOS asks about) in ~/Library/Application Support/Apple Flow, write
    ~/Library/LaunchAgents/<label>.plist and load it (starts now and at every login); the service then checks its
    own permissions (macOS asks you about Apple Flow now) and this command shows what it found."""
    install_service(env_file, REPORT_WAIT_SECONDS if wait is None else wait)


def install_service(env_file: Path, wait: float) -> PermissionReport | None:
    """``service install``: returns the service's own permission report (None when it has not reported within
    ``wait`` seconds); raises ``typer.Exit`` when the service could not be installed."""
    settings = settings_or_exit(env_file)  # the same .env the service will read
    launchd = _launchd_or_exit(settings, env_file)
    files = service_files(settings)
    env_path = env_file.resolve()
    if not env_path.is_file():
        err.print(f"[yellow]No {env_path}: the service runs with default settings.[/yellow]")
    try:
        app = install_app(built_launcher(), Path.home())
    except AppBundleError as exc:
        print_error(f"Apple Flow.app was not installed: {exc}")
        raise typer.Exit(1) from exc
    _say_app(app)
    since = time.time()
    try:
        launchd.install(files.plist, build_plist(settings, env_path, files, app.executable, since),
                        settings.service.log_dir)
    except ServiceError as exc:
        raise _fail(exc) from exc
    err.print(f"[green]Installed and started[/green] {launchd.target} ({files.plist}). Logs: {files.stderr_log}")
    _explain_permissions(launcher_app(str(app.executable)))
    if wait <= 0:
        return None
    report = _wait_for_report(settings, since, wait)
    if report is None:
        err.print(
            f"[yellow]The service has not reported its permissions yet.[/yellow] Run `apple-flow service status` "
            f"in a minute, or look at its log: {files.stderr_log}", soft_wrap=True,
        )
        return None
    _print_report(report, report.job_pid)
    if not report.settled:
        err.print("Still checking (is a macOS prompt waiting for you?): `apple-flow service status` shows the rest.")
    return report


def print_readiness(report: PermissionReport | None) -> bool:
    """The last word on a first run, from the service's own report: "Ready" only when it can read chat.db and
    Messages lets it send (which also says iMessage is signed in); else each missing grant and where to give it.
    True when ready."""
    if report is not None and report.ok:
        err.print("[bold green]Ready:[/bold green] text yourself `help` from your phone.")
        return True
    err.print("[bold yellow]Not ready yet:[/bold yellow]")
    if report is None:
        err.print("  the service has not reported its permissions yet: `apple-flow service status` shows them.")
    else:
        for finding in report.findings:
            if finding.ok:
                continue
            err.print(f"  {escape(finding.name)}: {escape(finding.detail)}", soft_wrap=True)
            if finding.fix:
                err.print(f"    [bold]fix:[/bold] {escape(finding.fix)}", soft_wrap=True)
    err.print(
        "The service looks for the grants by itself (it restarts once to use a new Full Disk Access grant) and "
        "texts you once it is ready; `apple-flow service status` shows where it stands.", soft_wrap=True,
    )
    return False


def _say_app(app: InstalledApp) -> None:
    """What the install did to the app the grants belong to, and, for a new build, how to give them again."""
    where = shown(app.path)
    code = f"code hash {app.code_hash[:12]}"
    if not app.changed:
        err.print(f"{escape(where)} is unchanged ({code}): the permissions you gave it stay.", soft_wrap=True)
        return
    if not app.replaced_hash:
        err.print(f"Installed {escape(where)} ({code}): new, so it has no permissions yet (below).", soft_wrap=True)
        return
    err.print(
        f"[bold yellow]Installed a new build of {escape(where)}[/bold yellow] ({code}, was "
        f"{app.replaced_hash[:12]}): macOS keys its permissions on that hash, so those given to the old build no "
        f"longer apply, although System Settings may still show {APP_NAME} switched on. Give them again:",
        soft_wrap=True,
    )
    err.print(f"  {CHAT_DB}: {escape(full_disk_access_regrant(app.path))}.", soft_wrap=True)
    problem = reset_automation()
    command = " ".join(AUTOMATION_RESET)
    if problem is None:
        err.print(f"  {AUTOMATION}: reset (`{command}`): macOS asks again, below.", soft_wrap=True)
    else:
        err.print(
            f"  {AUTOMATION}: `{command}` failed ({escape(problem)}): run it, then `apple-flow service restart`.",
            soft_wrap=True,
        )
    err.print("The service texts you the same once it can send.", soft_wrap=True)


def _explain_permissions(app: Responsible) -> None:
    """What the user must allow for the service, and where: macOS asks about the service's own app."""
    name = Path(app.name).name
    err.print(f"The service runs as {app.name}: macOS asks about it, not about this terminal.", soft_wrap=True)
    err.print(
        f"  {AUTOMATION}: macOS asks now whether \u201c{name}\u201d may control \u201cMessages\u201d: click Allow "
        f"(later: {AUTOMATION_SETTINGS} > {name} > Messages).", soft_wrap=True,
    )
    err.print(f"  {CHAT_DB}: {full_disk_access_fix(app)}.", soft_wrap=True)


def _wait_for_report(settings: Settings, since: float, seconds: float) -> PermissionReport | None:
    """The report of the daemon started at ``since`` or later, once settled or when ``seconds`` are up."""
    deadline = time.monotonic() + seconds
    report = None
    try:
        with err.status("Waiting for the service to check its permissions (answer the macOS prompt if one shows)"):
            while True:
                found = read_report(settings.db_path)
                if found is not None and found.started_at >= since - 1:
                    report = found
                    if found.settled:
                        break
                if time.monotonic() >= deadline:
                    break
                time.sleep(REPORT_POLL_SECONDS)
    except KeyboardInterrupt:
        err.print("Stopped waiting; the service keeps running.")
    return report


_MARK = {CheckStatus.OK: "[green]ok[/green]", CheckStatus.CHECKING: "[yellow]checking[/yellow]"}


def _print_report(report: PermissionReport, service_pid: int | None) -> None:
    started = moment(report.started_at)
    whose = "this service process" if report.job_pid == service_pid else "an earlier run"
    err.print(f"Permissions of {escape(report.app)} ({whose}, pid {report.pid}, started {started}):", soft_wrap=True)
    for finding in report.findings:
        mark = _MARK.get(finding.status, f"[red]{finding.status.value}[/red]")
        err.print(f"  {escape(finding.name)}: {mark}: {escape(finding.detail)}", soft_wrap=True)
        if finding.fix:
            err.print(f"    [bold]fix:[/bold] {escape(finding.fix)}", soft_wrap=True)


@service_app.command()
def uninstall(env_file: Path = EnvOption) -> None:
    """Stop the agent and remove its plist."""
    settings = settings_or_exit(env_file)  # the same .env the service will read
    launchd = _launchd_or_exit(settings, env_file)
    files = service_files(settings)
    try:
        removed = launchd.uninstall(files.plist)
    except ServiceError as exc:
        raise _fail(exc) from exc
    err.print(f"Removed {launchd.target}." if removed else "The service was not installed.")
    bundle = app_path(Path.home())
    if bundle.exists():
        err.print(
            f"{escape(shown(bundle))} stays, with the permissions you gave it, for the next install; delete "
            f"{escape(shown(bundle.parent))} to remove it too.", soft_wrap=True,
        )


@service_app.command()
def status(env_file: Path = EnvOption) -> None:
    """Say whether the agent is installed and running, and what its own permission check found (exit 1 when it
    is not running; 3 when it runs without a permission it needs)."""
    settings = settings_or_exit(env_file)  # the same .env the service will read
    launchd = _launchd_or_exit(settings, env_file)
    files = service_files(settings)
    try:
        state = launchd.status()
    except ServiceError as exc:
        raise _fail(exc) from exc
    switched_off = files.plist.exists() and launchd.disabled()
    if not state:
        if not files.plist.exists():
            err.print("not installed")
        elif switched_off:
            err.print(
                f"[red]installed but switched off[/red]: launchd keeps {launchd.target} disabled, so it never runs. To "
                f"switch it back on: {SWITCH_ON}.", soft_wrap=True,
            )
        else:
            err.print("installed but not loaded: `apple-flow service install` loads it again.", soft_wrap=True)
        raise typer.Exit(1)
    if switched_off:
        err.print(
            f"[yellow]switched off[/yellow]: it runs now, but launchd will not start it at the next login. To switch "
            f"it back on: {SWITCH_ON}.", soft_wrap=True,
        )
    pid = f", pid {state['pid']}" if "pid" in state else ""
    typer.echo(f"{launchd.target}: {state.get('state', 'unknown')}{pid}")
    report = read_report(settings.db_path)
    running = int(state["pid"]) if state.get("pid", "").isdigit() else None
    if report is None:
        err.print("No permission report from the daemon yet.")
    else:
        _print_report(report, running)
    if state.get("state") != "running":
        raise typer.Exit(1)
    if report is not None and report.job_pid == running and any(
        f.status in (CheckStatus.DENIED, CheckStatus.FAIL) for f in report.findings
    ):
        raise typer.Exit(EXIT_MISSING_PERMISSION)


@service_app.command()
def restart(env_file: Path = EnvOption) -> None:
    """Restart the running agent (e.g. after changing .env: the daemon reads it again as it starts)."""
    settings = settings_or_exit(env_file)  # the same .env the service will read
    launchd = _launchd_or_exit(settings, env_file)
    try:
        launchd.restart()
    except ServiceError as exc:
        raise _fail(exc) from exc
    err.print(f"Restarted {launchd.target}.")


@service_app.command()
def logs(
    lines: int = typer.Option(50, "--lines", "-n", help="How many lines of each log to show."),
    follow: bool = typer.Option(False, "--follow", "-f", help="Keep printing new lines (Ctrl-C to stop)."),
) -> None:
    """Show the end of the daemon's logs."""
    settings = settings_or_exit()
    files = service_files(settings)
    existing = [path for path in (files.stderr_log, files.stdout_log) if path.is_file()]
    if not existing:
        err.print(f"No logs yet in {settings.service.log_dir}.")
        raise typer.Exit(1)
    if follow:
        raise typer.Exit(subprocess.call(["tail", "-n", str(lines), "-F", *map(str, existing)]))
    for path in existing:
        typer.echo(f"==> {path} <==")
        with path.open(encoding="utf-8", errors="replace") as handle:
            for line in deque(handle, maxlen=lines):
                typer.echo(line.rstrip("\n"))


def register(app: typer.Typer) -> None:
    """Adds this module's commands to ``app``."""
    app.add_typer(service_app, name="service")
