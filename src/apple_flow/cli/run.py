"""`apple-flow run` and `apple-flow chat`: the daemon and the console channel."""

from __future__ import annotations

import logging
import os
import signal
import sys
import time
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

import typer
from dotenv import dotenv_values
from rich.markup import escape

from apple_flow.assemble import ServiceRun, assemble
from apple_flow.channels import registry as channels
from apple_flow.cli.common import err, print_error, settings_or_exit
from apple_flow.config import ENV_FILE, Settings, SettingsError
from apple_flow.daemon.running.lock import InstanceLock, LockError
from apple_flow.daemon.running.runtime import Runtime, StartError
from apple_flow.daemon.store import Store, StoreError
from apple_flow.filelimit import raise_open_files

RELAUNCH_EXIT = 75  # = permissions.RELAUNCH_EXIT (not imported here: that module loads the iMessage channel)
# `apple-flow chat` is the channel a person at this terminal types on, whatever the system.
CHAT_CHANNEL = next(entry.name for entry in channels.REGISTRY.values() if entry.local_user)

if TYPE_CHECKING:
    from apple_flow.web.server import WebServer


def startup_notes(settings: Settings) -> list[str]:
    """What the user should know about how this daemon is set up: the demo profile's limits."""
    line = settings.profile_line() if settings.connector == "afm" else None
    return [line] if line else []


def startup_warnings(settings: Settings, channel: channels.ChannelEntry) -> list[str]:
    """What a user starting the daemon should know before it goes quiet: set-up that makes it answer nobody, or
    that puts its own folder inside a workspace."""
    from apple_flow.daemon.running.own_folders import own_folder_warnings

    warnings = own_folder_warnings(settings)
    if not channel.local_user and not settings.allowed_senders:
        warnings.append(
            "APPLE_FLOW_ALLOWED_SENDERS is empty, so no message will be answered. Add your own phone number or "
            "email (comma-separated) to .env, e.g. APPLE_FLOW_ALLOWED_SENDERS=+15551234567, then restart."
        )
    return warnings


def _serve(
    settings: Settings, channel: str, service: ServiceRun | None = None, env_file: Path = Path(ENV_FILE),
    terminal: bool = False,
) -> int:
    """Opens the store under the single-instance lock, has ``assemble`` build the daemon on the registry's
    ``channel``, runs it until it ends."""
    raise_open_files()  # launchd's 256 would let the web page's clients starve the agent of descriptors
    lock = InstanceLock(settings.db_path)
    try:
        lock.acquire()
        store = Store(settings.db_path)
    except (LockError, StoreError) as exc:
        lock.release()
        print_error(exc)
        return 1
    daemon: Runtime | None = None
    try:
        daemon = assemble(settings, store, channel, service=service, terminal=terminal)

        def stop(signum: int, frame: FrameType | None) -> None:
            assert daemon is not None
            daemon.request_stop()

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        page = _web_page(settings, store, daemon, channel, env_file)
        try:
            status = daemon.run()
        finally:
            if page is not None:
                page.stop()
        # launchd's KeepAlive starts the service again, and the new process has the grant this one lacked.
        permissions = daemon.channel.permissions
        return RELAUNCH_EXIT if permissions is not None and permissions.relaunching else status
    except SettingsError as exc:
        print_error(exc)
        return 2
    except StartError as exc:
        print_error(f"Cannot read messages: {exc}")
        return 1
    finally:
        if daemon is not None:
            daemon.channel.close()
        store.close()
        lock.release()


def _export_other_values(env_file: Path) -> None:
    """The service's ``.env`` values that are not apple-flow settings (an agent CLI's API key) become its
    environment, as the plist's environment used to give them (systemd: ``EnvironmentFile``). The settings
    themselves are read from the file, so that the file, not a copy, decides."""
    if not env_file.is_file():
        return
    for name, value in dotenv_values(env_file).items():
        if value is not None and not name.upper().startswith("APPLE_FLOW_"):
            os.environ.setdefault(name, value)


def _web_page(
    settings: Settings, store: Store, daemon: Runtime, channel: str, env_file: Path = Path(ENV_FILE)
) -> WebServer | None:
    """Serves the web page beside the daemon. A page that cannot be served is logged and shown in the store's
    events; the daemon runs on without it."""
    if not settings.web.enabled:
        return None
    # Here, not at the top: the page's health view uses the doctor's checks, which live in this package.
    from apple_flow.health.running import DaemonState
    from apple_flow.web.server import WebError, start_page

    started = time.time()

    def state() -> DaemonState:
        return DaemonState(channel, settings.connector, daemon.connector_status, started)

    try:
        page = start_page(settings, store, daemon.run_approved, state, env_file)
    except WebError as exc:
        print_error(f"No web page: {exc}")
        store.events.log("web_error", str(exc))
        return None
    daemon.page_started(page.url)
    err.print(f"Web page: {page.url} (log in with APPLE_FLOW_WEB_TOKEN from {env_file.absolute()}, or text `web` "
              "to this Mac for a login link)")
    from apple_flow.local_name import safari_problem

    if note := safari_problem(page.url):
        err.print(f"[yellow]{escape(note)}[/yellow]", soft_wrap=True)
    return page


def _logging(verbose: bool, quiet_default: bool) -> None:
    level = logging.DEBUG if verbose else logging.WARNING if quiet_default else logging.INFO
    logging.basicConfig(level=level, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def register(app: typer.Typer) -> None:
    """Adds this module's commands to ``app``."""

    @app.command()
    def run(
        channel: str | None = typer.Option(
            None, "--channel",
            help=f"Where messages come from: {', '.join(channels.names())} (default: APPLE_FLOW_CHANNEL; auto is "
            "imessage on macOS and console elsewhere).",
        ),
        verbose: bool = typer.Option(False, "--verbose", "-v", help="Log every step on stderr."),
        env_file: Path = typer.Option(  # noqa: B008
            Path(ENV_FILE), "--env-file", help="The .env to read the settings from."
        ),
        service: bool = typer.Option(
            False, "--service", hidden=True,
            help="Started by the login service: the .env's other values become the environment, and the owner is "
            "texted about the permissions.",
        ),
        installed_at: float | None = typer.Option(
            None, "--installed-at", hidden=True, help="When the service was installed (seconds since the epoch)."
        ),
    ) -> None:
        """Run the daemon: read messages, run the agent, reply.

        On the console: one message per input line, replies on stdout; at end of input, finish and exit 0."""
        if service:
            _export_other_values(env_file)
        settings = settings_or_exit(env_file)
        try:
            chosen = channels.entry((channel or settings.channel).strip().lower())
        except channels.UnknownChannel as exc:
            print_error(exc)
            raise typer.Exit(2) from None
        _logging(verbose, quiet_default=chosen.local_user)
        for note in startup_notes(settings):
            err.print(escape(note))
        for warning in startup_warnings(settings, chosen):
            err.print(f"[yellow]{escape(warning)}[/yellow]")
        raise typer.Exit(_serve(settings, chosen.name, ServiceRun(installed_at) if service else None, env_file))

    @app.command()
    def chat(verbose: bool = typer.Option(False, "--verbose", "-v", help="Log every step on stderr.")) -> None:
        """Chat with the agent in this terminal (the same daemon, on the console channel). Ctrl-D quits."""
        settings = settings_or_exit(ENV_FILE)
        _logging(verbose, quiet_default=True)
        err.print("[bold]apple-flow chat[/bold]: type a message (`help` lists commands); Ctrl-D to quit.")
        for note in startup_notes(settings):
            err.print(escape(note))
        raise typer.Exit(_serve(settings, CHAT_CHANNEL, terminal=True))
