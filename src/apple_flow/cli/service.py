"""`apple-flow service install|uninstall|status|restart|logs`: the launchd agent."""

from __future__ import annotations

import platform
import subprocess
from collections import deque
from pathlib import Path

import typer

from apple_flow.cli.common import err, print_error, settings_or_exit
from apple_flow.config import Settings
from apple_flow.daemon.service import Launchd, ServiceError, build_plist, service_files, systemd_unit

service_app = typer.Typer(help="Run the daemon at login (a launchd agent on macOS).", no_args_is_help=True)

EnvOption = typer.Option(
    Path(".env"), "--env-file", help="The .env the service reads (its folder is the working folder)."
)



def _launchd_or_exit(settings: Settings, env_file: Path) -> Launchd:
    """On macOS the launchd agent; elsewhere says so, prints the systemd user unit on stdout, and exits 1."""
    if platform.system() == "Darwin":
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
def install(env_file: Path = EnvOption) -> None:
    """Write ~/Library/LaunchAgents/<label>.plist and load it (starts now and at every login)."""
    settings = settings_or_exit(env_file)  # the same .env the service will read
    launchd = _launchd_or_exit(settings, env_file)
    files = service_files(settings)
    env_path = env_file.resolve()
    if not env_path.is_file():
        err.print(f"[yellow]No {env_path}: the service runs with default settings.[/yellow]")
    try:
        launchd.install(files.plist, build_plist(settings, env_path, files), settings.log_dir)
    except ServiceError as exc:
        raise _fail(exc) from exc
    err.print(f"[green]Installed and started[/green] {launchd.target} ({files.plist}). Logs: {files.stderr_log}")
    err.print("Grant Full Disk Access (for chat.db) and Automation for Messages to this Python if macOS asks.")


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


@service_app.command()
def status(env_file: Path = EnvOption) -> None:
    """Say whether the agent is installed and running (exit 1 when not running)."""
    settings = settings_or_exit(env_file)  # the same .env the service will read
    launchd = _launchd_or_exit(settings, env_file)
    files = service_files(settings)
    try:
        state = launchd.status()
    except ServiceError as exc:
        raise _fail(exc) from exc
    if not state:
        err.print("installed but not loaded" if files.plist.exists() else "not installed")
        raise typer.Exit(1)
    pid = f", pid {state['pid']}" if "pid" in state else ""
    typer.echo(f"{launchd.target}: {state.get('state', 'unknown')}{pid}")
    if state.get("state") != "running":
        raise typer.Exit(1)


@service_app.command()
def restart(env_file: Path = EnvOption) -> None:
    """Restart the running agent (e.g. after changing .env: reinstall to pick up new values)."""
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
        err.print(f"No logs yet in {settings.log_dir}.")
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
