"""The iMessage channel: chat.db ingress and AppleScript egress, sharing the daemon's record of sent texts so that
the ingress drops the echoes of the daemon's own replies.

The daemon gets it whole from ``channel.build`` (through ``channels.registry``); ``build_imessage_channel(settings,
sent)`` makes the ingress and egress alone (the doctor, the tests). The ingress also offers ``scanned_rowid`` and
``last_error`` (the current ``ChatDBError``, with the fix in its message); see ``ingress.py``.
"""

from __future__ import annotations

from apple_flow.channels.base import CopyRecord, SentTexts, Skipped
from apple_flow.channels.imessage.chatdb import ChatDBError, ChatDBProblem
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


def build_imessage_egress(settings: Settings, sent: SentTexts | None = None) -> IMessageEgress:
    return IMessageEgress(
        osascript_command=settings.imessage.osascript_command,
        timeout_seconds=settings.imessage.send_timeout_seconds,
        retries=settings.imessage.send_retries,
        retry_backoff_seconds=settings.imessage.send_retry_backoff_seconds,
        chunk_chars=settings.imessage.reply_chunk_chars,
        default_region=settings.default_region,
        sent=sent,
        chat_db=settings.imessage.messages_db_path,
        confirm_seconds=settings.imessage.send_confirm_seconds,
        attachments_root=settings.imessage.messages_attachments_path,
        file_max_bytes=settings.imessage.send_file_max_bytes,
    )


def build_imessage_channel(
    settings: Settings, sent: SentTexts | None, copies: CopyRecord | None = None
) -> tuple[IMessageIngress, IMessageEgress]:
    """The ingress and egress for ``settings``; the egress notes what it sends in ``sent`` (the daemon's store,
    keeping ``settings.imessage.echo_window_seconds``) and the ingress skips their echoes (None: no echo skipping). The
    ingress keeps what it took in ``copies`` (the daemon's store; None: in memory)."""
    ingress = IMessageIngress(
        settings.imessage.messages_db_path,
        default_region=settings.default_region,
        sent=sent,
        poll_seconds=settings.imessage.poll_interval_seconds,
        max_message_age_seconds=settings.imessage.max_message_age_seconds,
        catch_up_seconds=settings.imessage.catch_up_hours * 3600,
        group_replies=settings.imessage.group_replies,
        attachments_root=settings.imessage.messages_attachments_path,
        attachment_wait_seconds=settings.imessage.attachment_wait_seconds,
        copies=copies,
        allow_sms=settings.allow_sms,
    )
    return ingress, build_imessage_egress(settings, sent)
