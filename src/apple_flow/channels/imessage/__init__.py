"""The iMessage channel: chat.db ingress and AppleScript egress, sharing a record of sent texts so that the
ingress drops the echoes of the daemon's own replies.

Use ``build_imessage_channel(settings)``. The ingress also offers ``on_skip`` (called with each skipped row
before the generator moves past it: persist ``max(cursor, skipped.rowid)`` there), ``scanned_rowid`` and
``last_error`` (the current ``ChatDBError``, with the fix in its message); see ``ingress.py``.
"""

from __future__ import annotations

from apple_flow.channels.imessage.chatdb import ChatDBError, ChatDBProblem
from apple_flow.channels.imessage.classify import Skipped
from apple_flow.channels.imessage.echo import SentLog
from apple_flow.channels.imessage.egress import IMessageEgress
from apple_flow.channels.imessage.ingress import IMessageIngress
from apple_flow.config import Settings

__all__ = [
    "ChatDBError",
    "ChatDBProblem",
    "IMessageEgress",
    "IMessageIngress",
    "Skipped",
    "build_imessage_channel",
    "build_imessage_egress",
]


def build_imessage_egress(settings: Settings, sent: SentLog | None = None) -> IMessageEgress:
    return IMessageEgress(
        osascript_command=settings.osascript_command,
        timeout_seconds=settings.send_timeout_seconds,
        retries=settings.send_retries,
        retry_backoff_seconds=settings.send_retry_backoff_seconds,
        chunk_chars=settings.reply_chunk_chars,
        default_region=settings.default_region,
        sent=sent,
        chat_db=settings.messages_db_path,
        confirm_seconds=settings.send_confirm_seconds,
    )


def build_imessage_channel(settings: Settings) -> tuple[IMessageIngress, IMessageEgress]:
    """The ingress and egress for ``settings``; the egress records what it sends so the ingress suppresses its
    echoes within ``settings.echo_window_seconds``."""
    sent = SentLog(settings.echo_window_seconds)
    ingress = IMessageIngress(
        settings.messages_db_path,
        default_region=settings.default_region,
        sent=sent,
        poll_seconds=settings.poll_interval_seconds,
        max_message_age_seconds=settings.max_message_age_seconds,
        group_replies=settings.group_replies,
    )
    return ingress, build_imessage_egress(settings, sent)
