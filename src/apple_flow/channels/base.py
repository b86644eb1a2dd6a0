"""The channel interface: everything the daemon uses of a channel, declared here with its defaults. iMessage and the
console channel implement it (subclassing the protocols, for the defaults); the daemon depends only on this module.

- ``Ingress.messages`` yields inbound messages (among them a tapback that decides something, and a ``late``
  request from while the Mac slept) and the rows it skips (``Skipped``, with the reason), in order, so the daemon's
  cursor passes skipped rows too; ``caught_up`` says when a backlog has been read whole; ``unsent`` says whether a
  message was withdrawn meanwhile; ``settle_attachments`` waits (bounded) for files still arriving with a message.
- ``Egress.send`` sends a reply (returning the ids a tapback on it would name), ``send_progress`` a progress line
  (by default: like a reply), ``went_out`` tells whether a reply recorded before a crash was sent after all,
  ``send_file`` sends a file the daemon has checked (by default: the channel cannot, and says so). ``hand_over``
  sends a text without waiting for the channel to confirm it: it returns the confirmation (``Handover``), for the
  daemon to wait for off the sender's path. ``note`` notes a text in the record of sent texts ahead of handing it
  over, so that the daemon records a reply and its sent lines in one transaction; what it returns (``Noted``) is
  given to ``hand_over``, which then neither notes the text again nor prepares it again.
- ``Attachment``: a file that came with a message, as the channel found it (where it is, or why it cannot be taken).
- ``SentTexts`` is the one record of what was sent (the daemon's store keeps it, across restarts): an egress notes
  each text it sends there, and an ingress that sees its own channel's texts come back takes their echoes from it.
  (A person texting themselves gets each reply back in chat.db; without this the daemon would answer its own
  answers forever.)
- ``CopyMarks``: how a channel whose rows can come twice knows a message's row again; handed over with the message,
  the daemon keeps them with its first record of it (in that transaction), where the channel's ``CopyRecord``
  (the store's, across restarts) finds them.
- ``Senders``: the channel's identities for the people who message it. The daemon keeps a sender as the opaque
  string the ingress gave it and asks the channel's ``Senders`` to put the allowlist (and the owner) in that form.
- ``Channel`` is one channel as built for the daemon (its ingress, egress, senders, permissions, and the key its
  rows are recorded under), from ``ChannelNeeds`` (the settings and the store's records a channel may keep);
  ``channels.registry`` names the channels and builds them.
- ``Permissions``: what a channel needs the system to allow before it reads (iMessage: Full Disk Access and
  Automation), reported to the daemon as ``Access`` (the owner is told when it changes).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Protocol

from apple_flow.config import Settings


@dataclass(frozen=True)
class Attachment:
    """A file sent with a message. ``name`` is the sender's name for it (never used as a path); ``source`` is the
    file itself, checked by the channel (inside its own attachments folder, no link on the way), or None when it
    cannot be taken, ``problem`` saying why (still downloading, a path outside the folder ...)."""

    name: str
    mime_type: str = ""  # "" when the channel does not know
    size: int = -1  # bytes as the channel reports them; -1 when unknown
    source: Path | None = None
    problem: str = ""


@dataclass(frozen=True)
class Tapback:
    """A reaction on one of the daemon's messages that decides something: ``approves`` (a like or a love) or not
    (a dislike). ``target`` is the id the channel gave the message reacted to (chat.db's guid)."""

    approves: bool
    target: str


@dataclass(frozen=True)
class CopyMarks:
    """How a channel whose rows can come twice (iMessage: a row re-inserted by an iCloud sync, the two copies of a
    text to yourself) knows a message's row again. Handed over with the message and kept in the transaction of the
    daemon's first record of it, so that a copy coming later, after a restart too, is known (``CopyRecord``)."""

    guid: str  # '' when the row has none
    own_chat: str  # the owner's address when texting yourself, else ''
    text: str  # in the form copies are compared in
    from_me: bool
    at: float  # when the row was taken


@dataclass(frozen=True)
class Known:
    """What a ``CopyRecord`` knows of a row, by its rowid and its guid."""

    decided: bool = False  # the row was decided before
    copy_of: int | None = None  # if so, the row it was then found a copy of (None: it was taken)
    first_with_guid: int | None = None  # the row first taken with the row's guid (of which it is a copy)


class CopyRecord(Protocol):
    """Where a channel keeps what it decided about each row it took or skipped as a copy: the daemon's store
    (``daemon.store.copies``), so that a restart still knows, or memory (``echo.MemoryCopyRecord``)."""

    def known(self, rowid: int, guid: str) -> Known:
        """What is known of the row: whether it was decided before (and how), and the row first taken with its
        ``guid`` (none for '')."""
        ...

    def take_pair(self, own_chat: str, text: str, from_me: bool, since: float) -> int | None:
        """A taken row in ``own_chat`` with ``text``, of the other kind (sent vs received), taken at or after
        ``since`` and whose other copy has not come yet: now it has (this one), and its rowid is returned."""
        ...

    def add(self, rowid: int, guid: str, own_chat: str, text: str, from_me: bool, at: float,
            copy_of: int | None) -> None:
        """Records the decision about a row (``own_chat`` '' when not texting yourself)."""
        ...


@dataclass(frozen=True)
class InboundMessage:
    rowid: int  # ingress cursor position (chat.db ROWID; a line counter on the console)
    sender: str  # the channel's identity for the sender (``Senders``: iMessage's E.164 number or lower-case email)
    text: str
    date: datetime  # timezone-aware UTC
    chat_identifier: str | None = None
    is_from_me: bool = False
    reply_to: str | None = None  # where the reply goes when not to ``sender`` (the channel's own address form)
    attachments: tuple[Attachment, ...] = ()  # files sent with it, in the order they came
    tapback: Tapback | None = None  # a like, love or dislike on a message (``text`` then only describes it)
    late: bool = False  # older than the replay window but within the catch-up window: listed, not run
    #: Came by SMS or RCS (not iMessage), whose sender IDs can be forged: taken only with APPLE_FLOW_ALLOW_SMS, and
    #: then it can never approve, deny or cancel, and its turns only read.
    forgeable: bool = False
    copy_marks: CopyMarks | None = None  # kept with the daemon's first record of the message

    @property
    def reply_target(self) -> str:
        return self.reply_to or self.sender


@dataclass(frozen=True)
class Skipped:
    """A row the ingress passes over, and why."""

    rowid: int
    reason: str  # short, for logs and `apple-flow inbox`: "from me", "reaction", "empty", "echo", ...
    sender: str | None = None
    text: str = ""
    forgeable: bool = False  # skipped because it came by SMS or RCS (counted, and shown in health)


class SentTexts(Protocol):
    """What was sent on one channel lately (``SentLog.for_channel``). Texts are compared as given: a channel whose
    copies come back changed (Messages trims and re-wraps) records and asks in one normal form."""

    def record(self, recipient: str, text: str) -> None:
        """Notes ``text`` as sent to ``recipient`` (before it is sent: its echo can come back first)."""
        ...

    def take_echo(self, sender: str, text: str, from_me: bool = False) -> bool:
        """True when ``text`` from ``sender`` is a copy of what was sent to ``sender`` within the echo window. A text
        can come back twice, as the sent copy (``from_me``) and as the received one: each is recognised once, so a
        person who later types the same words is heard."""
        ...


class Ingress(Protocol):
    def messages(self, after_rowid: int, stop: threading.Event) -> Iterator[InboundMessage | Skipped]:
        """Yields messages with ``rowid > after_rowid`` in order, and the rows it skips, waiting for new ones until
        ``stop`` is set (or, for a finite source such as piped stdin, until the input ends)."""
        ...

    def latest_rowid(self) -> int:
        """The newest rowid present now (to start a fresh install without replaying history)."""
        return 0

    def caught_up(self) -> bool:
        """Whether every message present has been yielded, i.e. a backlog (after sleep) has been read whole."""
        return True

    def unsent(self, rowid: int) -> bool:
        """Whether the message was withdrawn after it was read (asked before its queued turn starts)."""
        return False

    def settle_attachments(self, message: InboundMessage, stop: threading.Event) -> tuple[Attachment, ...]:
        """The message's attachments, after a bounded wait for any still arriving (asked when its turn starts)."""
        return message.attachments


@dataclass(frozen=True)
class Handover:
    """A text given to the channel. ``confirm`` (None: nothing left to wait for) waits, bounded, until the channel
    shows it sent, and returns the ids it gave the parts (as ``send`` does); it raises ``SendError`` when the text
    did not go out. ``ids``: the ids when they are known at once."""

    ids: tuple[str, ...] | None = None
    confirm: Callable[[], tuple[str, ...] | None] | None = None


@dataclass(frozen=True)
class Noted:
    """A text ``Egress.note`` has noted in the record of sent texts, for ``hand_over`` to send as it was noted (a
    channel keeps what it prepared for it in a subclass of its own)."""

    recipient: str
    text: str


class Egress(Protocol):
    def send(self, recipient: str, text: str) -> tuple[str, ...] | None:
        """Sends ``text`` (split into parts as needed). Returns the ids the channel gave the parts, as a tapback
        names them (chat.db guids), when it knows them. Raises ``SendError`` when delivery fails."""
        ...

    def send_progress(self, recipient: str, text: str) -> None:
        """Sends a short progress line during a long turn; by default like a reply."""
        self.send(recipient, text)

    def note(self, recipient: str, text: str) -> Noted:
        """Notes ``text`` in the record of sent texts (``SentTexts``) as ``hand_over`` would, ahead of handing it
        over with the ``Noted`` returned: the daemon calls it in the store transaction that records the text, so
        the record of what was sent costs no transaction of its own. By default it notes nothing: a channel whose
        texts never come back keeps no record."""
        return Noted(recipient, text)

    def hand_over(self, recipient: str, text: str, progress: bool = False, noted: Noted | None = None) -> Handover:
        """Sends ``text`` (a reply, or with ``progress`` a progress line) like ``send`` (``send_progress``) up to
        the channel's confirmation that it went out, which it returns to be waited for later: texts handed over
        one after the other to one recipient go out in that order, whatever becomes of their confirmations.
        ``noted``: what ``note`` returned for this text (it is not noted again). Raises ``SendError`` at once when
        the text could not be handed over. By default ``send`` (``send_progress``), with nothing left to confirm."""
        if progress:
            self.send_progress(recipient, text)
            return Handover()
        return Handover(ids=self.send(recipient, text))

    def send_file(self, recipient: str, path: Path) -> None:
        """Sends the file at ``path`` (absolute, checked by the daemon: inside the workspace, a regular file, within
        the size limit). Raises ``SendError`` saying why when it cannot."""
        raise SendError("this channel cannot send files")

    def went_out(self, recipient: str, text: str, after_rowid: int) -> bool:
        """Whether ``text`` was sent to ``recipient`` after message ``after_rowid`` came in (a reply recorded just
        before a crash, maybe sent); False when the channel cannot tell, and the reply is sent again."""
        return False


class SendError(RuntimeError):
    """A reply could not be handed to the channel; the message says why and what to do."""


class Senders:
    """A channel's identities for the people who message it (the base: a sender is the text the channel gives, as
    is). The daemon never parses a sender: it compares the strings the ingress gives it with the allowlist put in
    the same form here. A channel whose addresses have several spellings (iMessage: ``+1 (555) 123-4567`` and
    ``+15551234567``) subclasses it."""

    def normalize(self, handle: str) -> str:
        """The one form of ``handle`` (an allowlist entry, the owner) that this channel's ingress gives senders in."""
        return handle.strip()

    def is_local(self, sender: str) -> bool:
        """Whether ``sender`` is the person at this computer (the console's user), who needs no allowlist entry."""
        return False


@dataclass(frozen=True)
class Access:
    """What the channel's permissions allow now, as the owner is told of it: ``None`` while not known yet."""

    app: str  # the app the system charges the grants to ("Apple Flow")
    can_send: bool | None
    can_read: bool | None
    read_fix: str = ""  # how to give reading back, when it is refused


class Permissions(Protocol):
    """What a channel needs the system to allow before it can read, checked by the channel itself."""

    relaunching: bool  # only a new process gets a grant just given: the daemon exits for its service to restart it

    def wait_until_ready(self, stop: threading.Event) -> bool:
        """True once ready; False when ``stop`` was set first. Says why it waits (log) meanwhile."""
        ...

    def summary(self) -> str:
        """One paragraph for ``health``."""
        ...

    def on_access(self, listener: Callable[[Access], None]) -> None:
        """``listener`` gets the access now and at every change (on any thread)."""
        ...

    def close(self) -> None: ...


class SentLog(Protocol):
    """The store's record of sent texts (met by ``daemon.store.sent.SentTable``)."""

    def for_channel(self, channel: str, window_seconds: float) -> SentTexts: ...


class KeyValues(Protocol):
    """The store's small values (``daemon.store``'s meta table)."""

    def get_meta(self, key: str) -> str | None: ...

    def set_meta(self, key: str, value: str) -> None: ...


class CopyLog(Protocol):
    """The store's record of copies (met by ``daemon.store.copies.CopyTable``)."""

    def copies_of(self, channel: str) -> CopyRecord: ...


class ChannelStore(Protocol):
    """The daemon's store as a channel keeps its records there (``daemon.store.Store`` is one)."""

    @property
    def copies(self) -> CopyLog: ...

    @property
    def sent(self) -> SentLog: ...

    @property
    def meta(self) -> KeyValues: ...


@dataclass(frozen=True)
class Service:
    """How the login service started the daemon."""

    installed_at: float | None  # when `service install` ran (permissions are checked often for a while after)
    relaunch: Callable[[], None]  # stops the daemon, for the service to start it again


@dataclass(frozen=True)
class ChannelNeeds:
    """What a channel is built from (``registry.ChannelEntry.build``)."""

    settings: Settings
    store: ChannelStore
    service: Service | None = None  # None: run by hand
    terminal: bool = False  # a person at this terminal (`apple-flow chat`): a channel that renders, renders


@dataclass(frozen=True)
class Channel:
    """One channel as built for the daemon."""

    key: str  # what the store records its rows under (the cursor, messages, sent texts)
    ingress: Ingress
    egress: Egress
    senders: Senders = field(default_factory=Senders)
    permissions: Permissions | None = None  # None: it needs nothing from the system
    #: A login link to the web page may be sent on it: it reaches the owner's own phone (never printed on a
    #: terminal or sent into a group).
    carries_links: bool = False

    def close(self) -> None:
        if self.permissions is not None:
            self.permissions.close()
