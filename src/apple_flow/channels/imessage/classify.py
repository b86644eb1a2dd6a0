"""Which chat.db rows are requests for the daemon, and why the others are skipped.

Shared by the ingress and ``apple-flow inbox`` so users see exactly what the daemon sees.
"""

from __future__ import annotations

import logging

from apple_flow.channels.base import InboundMessage, SentTexts, Skipped
from apple_flow.channels.imessage.body import UndecodableBody, decode_attributed_body
from apple_flow.channels.imessage.chatdb import MessageRow
from apple_flow.handles import normalize_handle

log = logging.getLogger(__name__)

OBJECT_REPLACEMENT = "\ufffc"  # Messages' attachment marker inside the text


def message_text(row: MessageRow) -> str:
    """``text``, or the decoded ``attributedBody`` when ``text`` is NULL or empty. Raises ``UndecodableBody``."""
    if row.text:
        return row.text
    if row.attributed_body:
        return decode_attributed_body(row.attributed_body)
    return ""


def classify(row: MessageRow, sent: SentTexts | None, default_region: str) -> InboundMessage | Skipped:
    """The message the daemon should handle, or why it skips this row. Never raises for bad data."""
    sender_raw = row.handle or _direct_chat_handle(row.chat_identifier)
    sender = normalize_handle(sender_raw, default_region) if sender_raw else None
    if row.problem is not None:
        log.warning("chat.db row %d skipped: %s", row.rowid, row.problem)
        return Skipped(row.rowid, row.problem, sender, row.text or "")
    try:
        text: str | None = message_text(row)
    except UndecodableBody as exc:
        log.warning("chat.db row %d: attributedBody could not be decoded (%s)", row.rowid, exc)
        text = None
    shown = text or ""  # skipped rows carry their text too, for `apple-flow inbox`
    if row.is_from_me:
        return Skipped(row.rowid, "from me", sender, shown)
    if row.associated_message_type != 0:
        return Skipped(row.rowid, "reaction", sender, shown)
    if row.item_type != 0:
        return Skipped(row.rowid, "system event", sender, shown)
    if text is None:
        return Skipped(row.rowid, "undecodable body", sender)
    # An attachment alone arrives as U+FFFC: nothing for the agent to read.
    if not text.replace(OBJECT_REPLACEMENT, "").strip():
        return Skipped(row.rowid, "empty", sender, text)
    if sender is None:
        log.warning("chat.db row %d has no sender (missing handle row); skipped", row.rowid)
        return Skipped(row.rowid, "no sender", None, text)
    if sent is not None and sent.take_echo(sender, text):
        return Skipped(row.rowid, "echo", sender, text)
    return InboundMessage(
        rowid=row.rowid,
        sender=sender,
        text=text,
        date=row.date,
        chat_identifier=row.chat_identifier,
        is_from_me=False,
    )


def _direct_chat_handle(chat_identifier: str | None) -> str | None:
    """A one-to-one chat is named after the other person's handle; group chats are ``chat<digits>``."""
    if chat_identifier and not chat_identifier.startswith("chat"):
        return chat_identifier
    return None
