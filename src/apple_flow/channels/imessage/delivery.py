"""Whether a sent text or file went out: osascript exiting 0 says nothing (a send Messages cannot route is accepted
and dropped, and the ``buddy`` form does that on recent macOS), so the evidence is Messages' own row for it in
chat.db: ``is_from_me = 1`` in the recipient's chat, the same text (a file: an attachment of the same name), with
``error = 0`` and, once Messages has handed it on, ``is_sent`` or ``is_delivered``. The row's guid is how a tapback
later names the message."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from apple_flow.channels.base import SendError
from apple_flow.channels.imessage.body import UndecodableBody
from apple_flow.channels.imessage.chatdb import ChatDB, MessageRow
from apple_flow.channels.imessage.classify import message_text
from apple_flow.channels.imessage.outgoing import Target, normalise_text
from apple_flow.handles import normalize_handle

_POLL_SECONDS = (0.05, 0.1, 0.2, 0.3, 0.5)  # then every 0.5 s


@dataclass(frozen=True)
class Evidence:
    confirmed: bool  # Messages shows the text as sent (or delivered)
    note: str  # what chat.db shows, for the log and `apple-flow send`
    guid: str = ""  # of Messages' row for it, when found


def confirm(
    db: ChatDB,
    target: Target,
    text: str,
    after_rowid: int,
    seconds: float,
    region: str,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    until_sent: bool = True,
) -> Evidence:
    """Waits up to ``seconds`` for the row of ``text`` sent to ``target`` after ``after_rowid`` (``until_sent``:
    until Messages shows it sent; else only until the row is there, as for a progress line). Raises ``SendError``
    when the row shows an error, or when there is no row at all."""
    wanted = normalise_text(text)
    return _confirm(db, target, lambda row: _is_ours(row, target, wanted, region), None, after_rowid, seconds,
                    sleep, clock, until_sent)


def confirm_file(
    db: ChatDB,
    target: Target,
    name: str,
    after_rowid: int,
    seconds: float,
    region: str,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> Evidence:
    """As ``confirm``, for a file: the sent row with an attachment named ``name`` (its ``transfer_name``)."""
    def ours(row: MessageRow) -> bool:
        return _in_chat(row, target, region) and name in row.attachment_names

    return _confirm(db, target, ours, name, after_rowid, seconds, sleep, clock, True)


def _confirm(
    db: ChatDB, target: Target, ours: Callable[[MessageRow], bool], file: str | None, after_rowid: int,
    seconds: float, sleep: Callable[[float], None], clock: Callable[[], float], until_sent: bool,
) -> Evidence:
    """The wait of ``confirm`` for the row ``ours`` picks; ``file`` names the file sent (None: a text)."""
    deadline = clock() + seconds
    polls = iter(_POLL_SECONDS)
    found: MessageRow | None = None
    while True:
        found = next((row for row in db.sent_rows_after(after_rowid) if ours(row)), found)
        if found is not None and found.error:
            raise SendError(
                f"Messages could not send {file or 'it'} (chat.db row {found.rowid} has error {found.error}); check "
                f"that {target.describe()} can receive {'SMS' if target.kind == 'sms' else 'iMessages'}"
            )
        if found is not None and (found.is_sent or found.is_delivered):
            return Evidence(True, "Messages shows it as delivered" if found.is_delivered else
                            "Messages shows it as sent", found.guid)
        if found is not None and not until_sent:
            return Evidence(False, f"Messages has it (chat.db row {found.rowid})", found.guid)
        remaining = deadline - clock()
        if remaining <= 0:
            break
        sleep(min(next(polls, 0.5), remaining))
    if found is not None:
        return Evidence(False, f"Messages has it (chat.db row {found.rowid}) but has not sent it yet after "
                               f"{seconds:g} s", found.guid)
    raise SendError(
        f"osascript said it sent {file or 'the text'} to {target.describe()}, but there is no trace of it in "
        f"{db.path} after {seconds:g} s: Messages did not send it. Open Messages and check it is signed in and can "
        f"reach {target.describe()}"
    )


def already_sent(db: ChatDB, target: Target, parts: list[str], after_rowid: int, region: str) -> bool:
    """Whether chat.db holds a sent row without error for every part, after ``after_rowid``."""
    rows = [row for row in db.sent_rows_after(after_rowid, limit=1000) if not row.error]
    return bool(parts) and all(
        any(_is_ours(row, target, normalise_text(part), region) for row in rows) for part in parts
    )


def _in_chat(row: MessageRow, target: Target, region: str) -> bool:
    if target.kind == "group":
        return row.chat_identifier == target.address
    return any(
        value and normalize_handle(value, region) == target.address for value in (row.handle, row.chat_identifier)
    )


def _is_ours(row: MessageRow, target: Target, wanted: str, region: str) -> bool:
    if not _in_chat(row, target, region):
        return False
    try:
        return normalise_text(message_text(row)) == wanted
    except UndecodableBody:
        return False
