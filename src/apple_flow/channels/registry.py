"""The channels by name (``APPLE_FLOW_CHANNEL``, ``apple-flow run --channel``). Adding a channel: its module (an
ingress, an egress, its ``Senders`` if its addresses have several spellings, and a ``build(needs) -> Channel``),
and an entry here; nothing outside ``channels/`` names a channel (``config.ChannelName`` lists the names, and a
test checks the two agree).

Each entry says what the channel needs on this system: where ``auto`` picks it, whether it reads Messages' chat.db
(the health view then checks chat.db and Full Disk Access), and whether anyone can reach it without the allowlist.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from apple_flow import host
from apple_flow.channels.base import Channel, ChannelNeeds

AUTO = "auto"  # the first entry whose ``preferred`` holds on this system


def _imessage(needs: ChannelNeeds) -> Channel:
    # Imported when built: the iMessage channel loads chat.db's reader, AppleScript and the permission checks.
    from apple_flow.channels.imessage.channel import build

    return build(needs)


def _console(needs: ChannelNeeds) -> Channel:
    from apple_flow.channels.console import build

    return build(needs)


@dataclass(frozen=True)
class ChannelEntry:
    name: str
    build: Callable[[ChannelNeeds], Channel]
    preferred: Callable[[], bool]  # `auto` picks it on this system (the first entry that says so)
    reads_chat_db: bool = False  # reads Messages' chat.db: needs Full Disk Access (macOS); the health view checks it
    local_user: bool = False  # the person at this computer writes on it: it answers them without an allowlist entry


REGISTRY: dict[str, ChannelEntry] = {
    entry.name: entry
    for entry in (
        # On any system when asked for: the tests run it on a chat.db of their own and a fake osascript.
        ChannelEntry("imessage", _imessage, preferred=lambda: host.is_macos(), reads_chat_db=True),
        ChannelEntry("console", _console, preferred=lambda: True, local_user=True),
    )
}


class UnknownChannel(ValueError):
    """A channel name no entry has; the message lists the names there are."""


def entry(name: str) -> ChannelEntry:
    """The entry for ``name``; ``auto``: the channel for this system."""
    if name == AUTO:
        for candidate in REGISTRY.values():
            if candidate.preferred():
                return candidate
    found = REGISTRY.get(name)
    if found is None:
        raise UnknownChannel(f"No channel named '{name}': choose one of {', '.join([AUTO, *REGISTRY])}.")
    return found


def names() -> tuple[str, ...]:
    """The names a user may choose, ``auto`` first."""
    return (AUTO, *REGISTRY)
