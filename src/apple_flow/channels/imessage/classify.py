"""Which chat.db rows are requests for the daemon, and why the others are skipped.

Shared by the ingress and ``apple-flow inbox`` so users see exactly what the daemon sees.
"""

from __future__ import annotations

import logging
import plistlib
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from apple_flow.channels.base import InboundMessage, SentTexts, Skipped, Tapback
from apple_flow.channels.imessage.body import UndecodableBody, decode_attributed_body
from apple_flow.channels.imessage.chatdb import GROUP_STYLE, MessageRow
from apple_flow.channels.imessage.echo import Copies
from apple_flow.channels.imessage.outgoing import normalise_text
from apple_flow.handles import normalize_handle

log = logging.getLogger(__name__)

OBJECT_REPLACEMENT = "\ufffc"  # Messages' attachment marker inside the text
# associated_message_type: 0 a normal message, 2 and 3 app and sticker messages (normal too), 1000 a sticker placed
# on a message, 2000-2005 tapbacks added (love, like, dislike, laugh, emphasis, question; 2006 an emoji), 3000-3006
# the same removed.
NORMAL_TYPES = frozenset({0, 2, 3})
STICKER_TYPE = 1000
# The tapbacks that decide an approval request: love and like approve, dislike denies.
APPROVING_TAPBACKS = frozenset({2000, 2001})
DENYING_TAPBACK = 2002
SMS_SERVICES = frozenset({"SMS", "RCS"})  # not reachable through the iMessage account
TRUSTED_SERVICE = "iMessage"  # the only service whose sender IDs cannot be forged (SMS and RCS's can)


@dataclass(frozen=True)
class ReadRules:
    """What the daemon takes from chat.db, from the settings."""

    default_region: str = "US"
    max_age_seconds: float = 0  # rows older than this are not run (0: no limit)
    group_replies: bool = False  # take group chat messages (and answer into the group)
    # Rows older than max_age_seconds but not than this are taken as ``late`` (listed to the sender, run on request;
    # a Mac that slept meets them daily); older ones are skipped. 0, or not above max_age_seconds: none are late.
    catch_up_seconds: float = 0
    allow_sms: bool = False  # take SMS and RCS messages (read-only turns; never an approval, denial or cancel)


def message_text(row: MessageRow) -> str:
    """``text``; for an edited row the newest version; else the decoded ``attributedBody`` when ``text`` is NULL or
    empty. Raises ``UndecodableBody``."""
    if row.edited and row.summary_info:
        edited = _edited_text(row.summary_info)
        if edited is not None:
            return edited
    if row.text:
        return row.text
    if row.attributed_body:
        return decode_attributed_body(row.attributed_body)
    return ""


def classify(
    row: MessageRow,
    rules: ReadRules,
    sent: SentTexts | None = None,
    copies: Copies | None = None,
    now: datetime | None = None,
) -> InboundMessage | Skipped:
    """The message the daemon should handle, or why it skips this row. Never raises for bad data. ``sent`` (the
    daemon's own texts) and ``copies`` (what was taken already) remember what they see."""
    region = rules.default_region
    group = row.chat_style == GROUP_STYLE or _is_group_identifier(row.chat_identifier)
    own_chat = None if group else _own_chat_address(row, region)
    sender_raw = own_chat or row.handle or _direct_chat_handle(row.chat_identifier)
    sender = normalize_handle(sender_raw, region) if sender_raw else None
    if row.problem is not None:
        log.warning("chat.db row %d skipped: %s", row.rowid, row.problem)
        return Skipped(row.rowid, row.problem, sender, row.text or "")
    try:
        text: str | None = message_text(row)
    except UndecodableBody as exc:
        log.warning("chat.db row %d: attributedBody could not be decoded (%s)", row.rowid, exc)
        text = None
    if text is not None and row.attachments:
        # The markers stand for the attachments, which go with the message on their own.
        text = text.replace(OBJECT_REPLACEMENT, "").strip()
    shown = text or ""  # skipped rows carry their text too, for `apple-flow inbox`
    tapback = _tapback(row)
    late, too_old = _age(row, rules, now, tapback is not None)
    skip = _skip_reason(row, rules, text, sender, own_chat, group, tapback is not None, too_old)
    if skip is not None:
        return Skipped(row.rowid, skip, sender, shown)
    if is_forgeable(row) and not rules.allow_sms:
        return Skipped(row.rowid, forgeable_reason(row), sender, shown, forgeable=True)
    assert text is not None and sender is not None  # _skip_reason checked both
    if tapback is not None:  # never an echo nor a copy: its guid is its own
        return InboundMessage(rowid=row.rowid, sender=sender, text=text, date=row.date,
                              chat_identifier=row.chat_identifier, reply_to=_reply_target(row, sender, group),
                              tapback=tapback, forgeable=is_forgeable(row))
    # A message of files alone is known by their names (the daemon's own file sends come back that way).
    same = text if text.strip() else files_echo_text(row.attachment_names)
    # Your own text to yourself is a request unless it is a copy of the daemon's reply (either copy of it).
    key = normalise_text(same)  # the form copies are compared in
    if sent is not None and sent.take_echo(sender, key, from_me=row.is_from_me):
        return Skipped(row.rowid, "echo", sender, text)
    marks = None
    if copies is not None:
        first = copies.first_copy(row.rowid, row.guid, own_chat, key, row.is_from_me)
        if isinstance(first, int):
            return Skipped(row.rowid, f"copy of row {first}", sender, text)
        marks = first
    return InboundMessage(
        rowid=row.rowid,
        sender=sender,
        text=text,
        date=row.date,
        chat_identifier=row.chat_identifier,
        is_from_me=False,  # a text to yourself is a request like any other; the daemon's own texts never get here
        reply_to=_reply_target(row, sender, group),
        late=late,
        forgeable=is_forgeable(row),
        copy_marks=marks,
    )


def is_forgeable(row: MessageRow) -> bool:
    """Whether the row came by anything but iMessage (SMS, RCS, or no service recorded): its sender can be forged."""
    return (row.service or "").casefold() != TRUSTED_SERVICE.casefold()


def forgeable_reason(row: MessageRow) -> str:
    service = row.service or "no service"
    return f"{service}, not iMessage: its sender can be forged (APPLE_FLOW_ALLOW_SMS=true takes it, read-only)"


def tapback_target(associated_guid: str | None) -> str | None:
    """The guid a tapback reacts to: ``associated_message_guid`` is ``p:<part>/<guid>`` (a part of a message),
    ``bp:<guid>`` (its body) or the bare guid."""
    value = (associated_guid or "").strip()
    if value.startswith("p:") and "/" in value:
        value = value.split("/", 1)[1]
    elif value.startswith("bp:"):
        value = value[3:]
    return value or None


def _tapback(row: MessageRow) -> Tapback | None:
    """The approval a row's tapback decides: a love, like or dislike with a target; None for any other row."""
    kind = row.associated_message_type
    if kind not in APPROVING_TAPBACKS and kind != DENYING_TAPBACK:
        return None
    target = tapback_target(row.associated_guid)
    return Tapback(kind in APPROVING_TAPBACKS, target) if target else None


def _skip_reason(
    row: MessageRow, rules: ReadRules, text: str | None, sender: str | None, own_chat: str | None, group: bool,
    tapback: bool, too_old: str | None,
) -> str | None:
    if row.retracted:
        return "unsent"
    if row.is_from_me and own_chat is None:
        return "from me"
    if row.associated_message_type == STICKER_TYPE:
        return "sticker"
    if row.associated_message_type not in NORMAL_TYPES and not tapback:
        return "reaction"
    if row.item_type != 0:
        return "system event"
    if too_old is not None:
        return too_old
    if text is None:
        return "undecodable body"
    if tapback:  # its text only describes it, and may be empty
        text = text or "tapback"
    # U+FFFC alone without an attachment row (a file Messages has not recorded): nothing for the agent.
    if not text.replace(OBJECT_REPLACEMENT, "").strip() and not row.attachments:
        return "empty"
    if sender is None:
        log.warning("chat.db row %d has no sender (missing handle row); skipped", row.rowid)
        return "no sender"
    if group and not rules.group_replies:
        return "group chat"
    return None


def _age(row: MessageRow, rules: ReadRules, now: datetime | None, tapback: bool) -> tuple[bool, str | None]:
    """(late, why it is too old) by the row's age: within the replay window it runs; past it, a request within
    the catch-up window is late (listed to its sender, not run), anything older is too old (a tapback has no
    catch-up: a late approval is no approval)."""
    if not rules.max_age_seconds or not row.known_date:
        return False, None
    age = ((now or datetime.now(UTC)) - row.date).total_seconds()
    if age <= rules.max_age_seconds:
        return False, None
    limit = rules.max_age_seconds if tapback else max(rules.max_age_seconds, rules.catch_up_seconds)
    if age <= limit:
        return True, None
    return False, f"older than {_minutes(limit)}"


def files_echo_text(names: tuple[str, ...] | list[str]) -> str:
    """How a message of files alone is compared with what the daemon sent: the marker and the name of each."""
    return normalise_text(" ".join(f"{OBJECT_REPLACEMENT} {name}" for name in sorted(names)))


def _own_chat_address(row: MessageRow, region: str) -> str | None:
    """The owner's own address when the row is in the one-to-one chat with it (texting yourself): the chat's
    handle is the address the row was sent from or to on this side (``destination_caller_id``, ``account``)."""
    other = row.chat_identifier or row.handle
    if not other:
        return None
    ours = {normalize_handle(a, region) for a in (row.destination_caller_id, _account_address(row.account)) if a}
    address = normalize_handle(other, region)
    return address if address in ours else None


def _account_address(account: str | None) -> str | None:
    """``E:me@icloud.com`` / ``P:+15551234567`` -> the address."""
    if account and len(account) > 2 and account[1] == ":" and account[0] in "EePp":
        return account[2:]
    return account


def _reply_target(row: MessageRow, sender: str, group: bool) -> str | None:
    """Where the reply goes when not simply to ``sender`` over iMessage: the group chat (its guid), or the SMS
    account (``SMS;-;<sender>``) for a sender who wrote by SMS or RCS."""
    if group:
        return row.chat_guid or (f"iMessage;+;{row.chat_identifier}" if row.chat_identifier else None)
    if (row.service or "").upper() in SMS_SERVICES:
        return f"SMS;-;{sender}"
    return None


def _edited_text(summary_info: bytes) -> str | None:
    """The newest version of an edited message's first part, from ``message_summary_info`` (``ec``: part ->
    versions, oldest first, each with its text as an attributedBody in ``t``); None when it cannot be read."""
    try:
        info: Any = plistlib.loads(summary_info)
        versions = next(iter(info["ec"].values()))
        return decode_attributed_body(bytes(versions[-1]["t"]))
    except Exception as exc:  # any shape we do not know: the row's own text stands
        log.debug("message_summary_info not readable (%s); using the row's text", exc)
        return None


def _is_group_identifier(chat_identifier: str | None) -> bool:
    return bool(chat_identifier and chat_identifier.startswith("chat"))


def _direct_chat_handle(chat_identifier: str | None) -> str | None:
    """A one-to-one chat is named after the other person's handle; group chats are ``chat<digits>``."""
    if chat_identifier and not _is_group_identifier(chat_identifier):
        return chat_identifier
    return None


def _minutes(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:g} h"
    return f"{seconds / 60:g} min" if seconds >= 60 else f"{seconds:g} s"
