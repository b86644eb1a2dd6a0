"""The channel interface: everything the daemon uses of a channel, declared here with its defaults. iMessage and the
console channel implement it; the daemon depends only on this module.

- ``Ingress.messages`` yields inbound messages and the rows it skips (``Skipped``, with the reason), in order, so
  the daemon's cursor passes skipped rows too.
- ``Egress.send`` sends a reply, ``send_progress`` a progress line (by default: like a reply).
- ``SentTexts`` is the one record of what was sent (the daemon's store keeps it, across restarts): an egress
  records each text it sends there, and an ingress that can see its own channel's texts coming back takes their
  echoes from it. (A person texting themselves gets each reply back as an incoming row from their own handle;
  without this the daemon would answer its own answers forever.)
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol


@dataclass(frozen=True)
class InboundMessage:
    rowid: int  # ingress cursor position (chat.db ROWID; a line counter on the console)
    sender: str  # normalised handle: E.164 phone number or lower-case email; "console" on the console
    text: str
    date: datetime  # timezone-aware UTC
    chat_identifier: str | None = None
    is_from_me: bool = False


@dataclass(frozen=True)
class Skipped:
    """A row the ingress passes over, and why."""

    rowid: int
    reason: str  # short, for logs and `apple-flow inbox`: "from me", "reaction", "empty", "echo", ...
    sender: str | None = None
    text: str = ""


class SentTexts(Protocol):
    """What was sent on one channel lately (``Store.sent_texts``). Texts are compared whitespace-insensitively:
    Messages may trim or re-wrap what it stores."""

    def record(self, recipient: str, text: str) -> None:
        """Notes ``text`` as sent to ``recipient`` (before it is sent: its echo can come back first)."""
        ...

    def take_echo(self, sender: str, text: str) -> bool:
        """True when ``text`` from ``sender`` is what was sent to ``sender`` within the echo window; that entry is
        then used up, so a person who later types the same words is heard."""
        ...


class Ingress(Protocol):
    def messages(self, after_rowid: int, stop: threading.Event) -> Iterator[InboundMessage | Skipped]:
        """Yields messages with ``rowid > after_rowid`` in order, and the rows it skips, waiting for new ones until
        ``stop`` is set (or, for a finite source such as piped stdin, until the input ends)."""
        ...

    def latest_rowid(self) -> int:
        """The newest rowid present now (to start a fresh install without replaying history)."""
        return 0


class Egress(Protocol):
    def send(self, recipient: str, text: str) -> None:
        """Sends ``text`` (split into parts as needed). Raises ``SendError`` when delivery fails."""
        ...

    def send_progress(self, recipient: str, text: str) -> None:
        """Sends a short progress line during a long turn; by default like a reply."""
        self.send(recipient, text)


class SendError(RuntimeError):
    """A reply could not be handed to the channel; the message says why and what to do."""
