"""`apple-flow run` and `apple-flow chat`: the daemon and the console channel."""

from __future__ import annotations

import logging
import os
import platform
import signal
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

import typer
from dotenv import dotenv_values
from rich.markup import escape

from apple_flow.channels.base import Egress, Ingress
from apple_flow.cli.common import err, print_error, settings_or_exit
from apple_flow.config import ENV_FILE, Settings, SettingsError
from apple_flow.daemon.running.lock import InstanceLock, LockError
from apple_flow.daemon.running.runtime import Runtime, StartError
from apple_flow.daemon.store import Store, StoreError
from apple_flow.filelimit import raise_open_files
from apple_flow.handles import normalize_handle

RELAUNCH_EXIT = 75  # = permissions.RELAUNCH_EXIT (not imported here: that module loads the iMessage channel)

if TYPE_CHECKING:
    from apple_flow.channels.imessage.permissions import PermissionMonitor
    from apple_flow.daemon.running.owner_notices import Rebuilt
    from apple_flow.web.server import WebServer



class ChannelChoice(StrEnum):
    auto = "auto"
    imessage = "imessage"
    console = "console"


def resolve_channel(choice: str) -> str:
    """`auto` is iMessage on macOS (where Messages is) and the console anywhere else."""
    if choice == "auto":
        return "imessage" if platform.system() == "Darwin" else "console"
    return choice


def startup_notes(settings: Settings) -> list[str]:
    """What the user should know about how this daemon is set up: the demo profile's limits."""
    line = settings.profile_line() if settings.connector == "afm" else None
    return [line] if line else []


def startup_warnings(settings: Settings, channel: str) -> list[str]:
    """What a user starting the daemon should know before it goes quiet: set-up that makes it answer nobody, or
    that puts its own folder inside a workspace."""
    from apple_flow.daemon.running.own_folders import own_folder_warnings

    warnings = own_folder_warnings(settings)
    if channel == "imessage" and not settings.allowed_senders:
        warnings.append(
            "APPLE_FLOW_ALLOWED_SENDERS is empty, so no message will be answered. Add your own phone number or "
            "email (comma-separated) to .env, e.g. APPLE_FLOW_ALLOWED_SENDERS=+15551234567, then restart."
        )
    return warnings


# Builds a channel on the store's records it uses (the iMessage channel: sent texts, and the copies it took).
Channel = Callable[[Store], tuple[Ingress, Egress]]


@dataclass(frozen=True)
class ServiceRun:
    """How the login service started the daemon (``apple-flow service install`` writes the arguments)."""

    installed_at: float | None  # the quick permission checks last a few minutes after it


def _serve(
    settings: Settings, channel: str, build_channel: Channel, channel_key: str, service: ServiceRun | None = None,
    env_file: Path = Path(ENV_FILE),
) -> int:
    """Opens the store under the single-instance lock, builds the channel and the connector, runs the daemon until
    it ends. As the service, it also texts the owner about its permissions (``OwnerNotices``)."""
    from apple_flow.connectors import build_connector  # the connector package decides which agent CLI runs

    raise_open_files()  # launchd's 256 would let the web page's clients starve the agent of descriptors
    lock = InstanceLock(settings.db_path)
    try:
        lock.acquire()
        store = Store(settings.db_path)
    except (LockError, StoreError) as exc:
        lock.release()
        print_error(exc)
        return 1
    checks = None
    daemon: Runtime | None = None

    def relaunch() -> None:
        if daemon is not None:
            daemon.request_stop()

    if channel == "imessage":
        from apple_flow.channels.imessage.permissions import PermissionMonitor

        # First, so that the Automation prompt shows at once (a service just installed asks the user now).
        checks = PermissionMonitor(
            settings, store.meta, installed_at=service.installed_at if service else None,
            relaunch=relaunch if service else None,
        )
        checks.start()
    try:
        ingress, egress = build_channel(store)
        connector = build_connector(settings)
        escalation = build_connector(settings, settings.escalate_connector) if settings.escalate_connector else None
        local: tuple[str, ...] = ()
        if channel == "console":
            from apple_flow.channels.console import CONSOLE_SENDER

            local = (CONSOLE_SENDER,)
        daemon = Runtime(settings, store, connector, ingress, egress, channel_key, local_senders=local,
                         readiness=checks, escalation_connector=escalation)
        if checks is not None:
            _watch_permissions(settings, store, checks, ingress, daemon, service)

        def stop(signum: int, frame: FrameType | None) -> None:
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
        return RELAUNCH_EXIT if checks is not None and checks.relaunching else status
    except SettingsError as exc:
        print_error(exc)
        return 2
    except StartError as exc:
        print_error(f"Cannot read messages: {exc}")
        return 1
    finally:
        if checks is not None:
            checks.close()
        store.close()
        lock.release()


def _watch_permissions(
    settings: Settings, store: Store, checks: PermissionMonitor, ingress: Ingress, daemon: Runtime,
    service: ServiceRun | None,
) -> None:
    """The reader tells the permission check when chat.db stops (or starts again) being readable; the service
    texts the owner what changed."""
    from apple_flow.channels.imessage import IMessageIngress
    from apple_flow.daemon.running.owner_notices import OwnerNotices

    if isinstance(ingress, IMessageIngress):
        ingress.on_error = checks.chat_db_state
    if service is None:
        return
    owner = normalize_handle(settings.allowed_senders[0], settings.default_region) if settings.allowed_senders else None
    notices = OwnerNotices(store, owner, _rebuilt())
    checks.listen(notices.update)
    notices.attach(daemon.send_notice)


def _rebuilt() -> Rebuilt | None:
    """Whether the install that started this service replaced its app with other bytes (see ``OwnerNotices``)."""
    from apple_flow.app_bundle import full_disk_access_regrant, replaced_by, running_app
    from apple_flow.daemon.running.owner_notices import Rebuilt

    app = running_app()
    replaced = replaced_by(app) if app is not None else None
    return Rebuilt(replaced.new_hash, full_disk_access_regrant(app)) if app is not None and replaced else None


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
        channel: ChannelChoice = typer.Option(  # noqa: B008
            None, "--channel", case_sensitive=False,
            help="Where messages come from: imessage (macOS), console (stdin/stdout), auto (default: "
            "APPLE_FLOW_CHANNEL, else imessage on macOS and console elsewhere).",
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
        chosen = resolve_channel(channel.value if channel is not None else settings.channel)
        _logging(verbose, quiet_default=chosen == "console")
        build: Channel
        if chosen == "console":
            key = f"console:{uuid.uuid4().hex[:12]}"  # line numbers restart with every session

            def build(store: Store) -> tuple[Ingress, Egress]:
                from apple_flow.channels.console import ConsoleIngress, PlainConsoleEgress

                return ConsoleIngress.from_stream(sys.stdin), PlainConsoleEgress(sys.stdout, sys.stderr)
        else:
            from apple_flow.channels.imessage import build_imessage_channel
            from apple_flow.channels.imessage.copies import CopyTable

            key = "imessage"

            def build(store: Store) -> tuple[Ingress, Egress]:
                sent = store.sent.for_channel(key, settings.imessage.echo_window_seconds)
                return build_imessage_channel(settings, sent, CopyTable(store.db, key))
        for note in startup_notes(settings):
            err.print(escape(note))
        for warning in startup_warnings(settings, chosen):
            err.print(f"[yellow]{escape(warning)}[/yellow]")
        raise typer.Exit(_serve(settings, chosen, build, key, ServiceRun(installed_at) if service else None, env_file))

    @app.command()
    def chat(verbose: bool = typer.Option(False, "--verbose", "-v", help="Log every step on stderr.")) -> None:
        """Chat with the agent in this terminal (the same daemon, on the console channel). Ctrl-D quits."""
        settings = settings_or_exit(ENV_FILE)
        _logging(verbose, quiet_default=True)
        from apple_flow.channels.console import RichConsoleChannel

        channel = RichConsoleChannel()
        err.print("[bold]apple-flow chat[/bold]: type a message (`help` lists commands); Ctrl-D to quit.")
        for note in startup_notes(settings):
            err.print(escape(note))
        key = f"console:{uuid.uuid4().hex[:12]}"
        raise typer.Exit(_serve(settings, "console", lambda store: (channel.ingress(), channel), key))
