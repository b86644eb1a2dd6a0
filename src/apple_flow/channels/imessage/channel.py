"""The iMessage channel as the daemon gets it (``registry``'s ``imessage`` entry): chat.db and Messages, its
senders in one normal form (``handles``), its macOS permissions checked first, and its own records in the
daemon's store (sent texts, the copies it took)."""

from __future__ import annotations

from apple_flow.channels.base import Channel, ChannelNeeds, Senders
from apple_flow.handles import normalize_handle

KEY = "imessage"  # what the store records its rows under


class IMessageSenders(Senders):
    """A phone number in E.164, an e-mail address in lower case (as the ingress gives them): ``+1 (555) 123-4567``,
    ``15551234567`` and ``+15551234567`` are one person."""

    def __init__(self, default_region: str = "US") -> None:
        self._region = default_region

    def normalize(self, handle: str) -> str:
        return normalize_handle(handle, self._region)


def build(needs: ChannelNeeds) -> Channel:
    """The permission check starts first, so that the Automation prompt shows at once (a service just installed
    asks the user now); the reader tells it when chat.db stops (or starts again) being readable."""
    from apple_flow.channels.imessage import build_imessage_channel
    from apple_flow.channels.imessage.permissions import PermissionMonitor

    settings, store, service = needs.settings, needs.store, needs.service
    permissions = PermissionMonitor(
        settings, store.meta, installed_at=service.installed_at if service else None,
        relaunch=service.relaunch if service else None,
    )
    permissions.start()
    try:
        sent = store.sent.for_channel(KEY, settings.imessage.echo_window_seconds)
        ingress, egress = build_imessage_channel(settings, sent, store.copies.copies_of(KEY))
    except BaseException:
        permissions.close()
        raise
    ingress.on_error = permissions.chat_db_state
    return Channel(KEY, ingress, egress, IMessageSenders(settings.default_region), permissions, carries_links=True)
