"""The composition root: the one place the daemon is built from the settings. It builds the channel (through
``channels.registry``), the connectors (through ``connectors.registry``), the deciding half's orchestrator and the
running half's parts, and hands them to ``Runtime``, which builds nothing. Policy rules that depend on which parts
there are (escalation: only an apple-code connector's failed tasks go to another connector) are decided here.

Everything that runs a daemon builds it here: ``apple-flow run`` and ``chat``, the tests' harness, the benchmarks.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from apple_flow.channels import registry as channels
from apple_flow.channels.base import Channel, ChannelNeeds, Service
from apple_flow.config import Settings
from apple_flow.connectors.base import Connector
from apple_flow.connectors.registry import APPLE_CODE_CONNECTORS
from apple_flow.daemon.deciding.approvals import Approvals
from apple_flow.daemon.deciding.conclusion import Conclusion, ReplyFileLimits
from apple_flow.daemon.deciding.escalation import Escalation
from apple_flow.daemon.deciding.orchestrator import Orchestrator
from apple_flow.daemon.deciding.policy import Policy
from apple_flow.daemon.deciding.verify_command import VerifyCommands
from apple_flow.daemon.deciding.workspaces import Workspaces
from apple_flow.daemon.running.jobs import Work
from apple_flow.daemon.running.message_jobs import MessageLedger
from apple_flow.daemon.running.owner_link import OwnerLink
from apple_flow.daemon.running.owner_notices import OwnerNotices, Rebuilt
from apple_flow.daemon.running.runtime import Parts, Runtime
from apple_flow.daemon.running.scheduler import Scheduler
from apple_flow.daemon.running.sending import ReplySender
from apple_flow.daemon.running.turn_runner import TurnRunner
from apple_flow.daemon.running.web_jobs import WebLedger
from apple_flow.daemon.running.workers import TurnWorkers
from apple_flow.daemon.store import Store


@dataclass(frozen=True)
class TurnConnectors:
    """The agents the daemon runs: ``main`` for every turn; ``escalation`` (APPLE_FLOW_ESCALATE_CONNECTOR's) only
    for the tasks the owner escalates (`escalate <run>`)."""

    main: Connector
    escalation: Connector | None = None


@dataclass(frozen=True)
class ServiceRun:
    """How the login service started the daemon (``apple-flow service install`` writes the arguments)."""

    installed_at: float | None  # the quick permission checks last a few minutes after it


def connectors_from(settings: Settings) -> TurnConnectors:
    # Looked up when called: the connector package decides which agent CLI runs (and tests put a fake in its place).
    from apple_flow import connectors

    escalation = settings.escalate_connector
    return TurnConnectors(connectors.build_connector(settings),
                      connectors.build_connector(settings, escalation) if escalation else None)


def assemble(
    settings: Settings, store: Store, channel: str | Channel, connectors: TurnConnectors | None = None,
    service: ServiceRun | None = None, terminal: bool = False,
) -> Runtime:
    """The daemon on ``channel`` (a registry name, ``auto`` included, or a channel already built) with
    ``connectors`` (None: the settings'). As the service, it also texts the owner about the channel's permissions
    (``OwnerNotices``) and may stop itself for the service to start it again with a new grant. ``terminal``: a person
    at this terminal (`apple-flow chat`). The caller closes the channel (``Runtime.channel``) after the run."""
    daemon: Runtime | None = None

    def relaunch() -> None:
        if daemon is not None:
            daemon.request_stop()

    if isinstance(channel, str):
        needs = ChannelNeeds(settings, store, Service(service.installed_at, relaunch) if service else None, terminal)
        channel = channels.entry(channel).build(needs)
    try:
        daemon = Runtime(settings, store, _parts(settings, store, channel, connectors or connectors_from(settings)))
    except BaseException:
        channel.close()
        raise
    if service is not None and channel.permissions is not None:
        notices = OwnerNotices(store, _owner(settings, channel), app_rebuilt())
        channel.permissions.on_access(notices.update)
        notices.attach(daemon.send_notice)
    return daemon


def _parts(settings: Settings, store: Store, channel: Channel, connectors: TurnConnectors) -> Parts:
    escalation = None
    if connectors.escalation is not None and settings.escalate_connector is not None \
            and settings.connector in APPLE_CODE_CONNECTORS:
        escalation = Escalation(settings.escalate_connector, settings.limits.approval_ttl_minutes * 60.0)
    policy = Policy(settings.allowed_senders, settings.limits.max_messages_per_minute, channel.senders)
    approvals = Approvals(store.approvals, settings.limits.approval_ttl_minutes)
    files_back = ReplyFileLimits(settings.imessage.send_file_max_bytes, settings.imessage.send_files_per_reply)
    orchestrator = Orchestrator(
        store, policy, approvals, Workspaces(settings), connector_name=settings.connector,
        reply_to_unknown=settings.reply_to_unknown_senders, send_files=files_back.per_reply > 0,
        chat_read_only=settings.chat_read_only, verify_commands=VerifyCommands(settings), escalation=escalation,
    )
    # What a finished turn means: asked by the turn workers.
    conclusion = Conclusion(approvals, settings.connector, settings.web.base_url if settings.web.enabled else None,
                            files_back, escalation)
    scheduler: Scheduler[Work] = Scheduler()
    stop = threading.Event()
    sender = ReplySender(channel.egress, store, settings)
    turns = TurnWorkers(settings, scheduler, TurnRunner(settings, store, sender, conclusion.conclude),
                        connectors.main, connectors.escalation, stop)
    # Agents ask the owner (the first allowed sender) through `apple-flow mcp`, over a socket by the database.
    owner_link = OwnerLink(settings, store, Approvals(store.approvals, settings.limits.approval_ttl_minutes), sender,
                           _owner(settings, channel))
    return Parts(channel, orchestrator, scheduler, stop, sender, turns,
                 MessageLedger(channel.key, store, channel.ingress, sender, settings, stop),
                 WebLedger(store, sender), owner_link)


def _owner(settings: Settings, channel: Channel) -> str | None:
    """The first allowed sender, in the form the channel gives senders in."""
    return channel.senders.normalize(settings.allowed_senders[0]) if settings.allowed_senders else None


def app_rebuilt() -> Rebuilt | None:
    """Whether the install that started this service replaced its app with other bytes (see ``OwnerNotices``)."""
    from apple_flow.app_bundle import full_disk_access_regrant, replaced_by, running_app

    app = running_app()
    replaced = replaced_by(app) if app is not None else None
    return Rebuilt(replaced.new_hash, full_disk_access_regrant(app)) if app is not None and replaced else None
