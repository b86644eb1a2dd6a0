"""The running daemon's health, as the web page's health view shows it: the agent and its model, the message
channel (chat.db and Full Disk Access on a Mac), sending, and the last error the daemon recorded. Cheap enough to run
on every page view: no model request, no AppleScript (the doctor does those; here sending is judged by the last
send)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from apple_flow.channels.registry import REGISTRY as CHANNELS
from apple_flow.check_result import CheckResult, CheckStatus
from apple_flow.config import Settings
from apple_flow.connectors.afm import AfmConnector, Backend
from apple_flow.connectors.registry import REGISTRY
from apple_flow.daemon.store import Store
from apple_flow.health.doctor import check_chat_db, check_full_disk_access, check_sms
from apple_flow.times import moment

ERROR_KINDS = ("ingress_error", "send_failed", "dispatch_error")
RECENT_SECONDS = 3600  # a send failure this recent makes "sending replies" a warning


@dataclass(frozen=True)
class DaemonState:
    """What the running daemon knows about itself."""

    channel: str  # its name in ``channels.registry``
    connector: str
    connector_status: str  # "ready", or "not ready: <why>"
    started_at: float


def health_checks(settings: Settings, store: Store, state: DaemonState) -> list[CheckResult]:
    checks = [_agent(settings, state)]
    channel = CHANNELS.get(state.channel)
    if channel is not None and channel.reads_chat_db:
        chat, error = check_chat_db(settings.imessage.messages_db_path, given=False)
        checks += [chat, check_full_disk_access(error, chat)]
    else:
        checks.append(CheckResult("messages", CheckStatus.NA, f"{state.channel} channel (no chat.db)"))
    checks += [check_sms(settings, store.events), _sending(store), _last_error(store)]
    return checks


def _agent(settings: Settings, state: DaemonState) -> CheckResult:
    model = ""
    connector = REGISTRY.get(settings.connector)
    if connector is not None and issubclass(connector, AfmConnector):  # afm, and ollama (afm on Ollama's server)
        backend = connector.backend_of(settings)  # what the connector runs on, not a second reading of the settings
        model = f", backend {backend.name}{_on(backend)}"
        tasks = connector.task_backend_of(settings)
        if tasks is not None:
            model += f"; approved tasks: backend {tasks.name}{_on(tasks)}"
    detail = f"{state.connector}{model}: {state.connector_status}"
    if state.connector_status == "ready":
        return CheckResult("agent and model", CheckStatus.OK, detail)
    return CheckResult("agent and model", CheckStatus.FAIL, detail, "run `apple-flow doctor` for what to do")


def _on(backend: Backend) -> str:
    model = f", model {backend.model}" if backend.model else ""
    return model + (f" at {backend.base_url}" if backend.base_url else "")


def _sending(store: Store, now: float | None = None) -> CheckResult:
    sent, failed = store.messages.count_messages("sent"), store.messages.count_messages("send_failed")
    counts = f"{sent} replies sent, {failed} could not be sent"
    newest = store.events.recent_events(1, kind="send_failed")
    if newest and (now or time.time()) - newest[-1].at < RECENT_SECONDS:
        return CheckResult("sending replies", CheckStatus.WARN,
                           f"{counts}; the last failure ({moment(newest[-1].at)}): {newest[-1].detail}",
                           "on a Mac: allow Messages in Privacy & Security > Automation; `apple-flow doctor` checks it")
    return CheckResult("sending replies", CheckStatus.OK, counts)


def _last_error(store: Store) -> CheckResult:
    newest = None
    for kind in ERROR_KINDS:
        found = store.events.recent_events(1, kind=kind)
        if found and (newest is None or found[-1].at > newest.at):
            newest = found[-1]
    if newest is None:
        return CheckResult("last error", CheckStatus.OK, "none recorded")
    return CheckResult("last error", CheckStatus.WARN, f"{moment(newest.at)} {newest.kind}: {newest.detail}")
