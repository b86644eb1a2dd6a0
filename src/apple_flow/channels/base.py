"""The channel interface: ingress yields inbound messages, egress sends text. iMessage and the console
channel implement it; the daemon depends only on this module."""

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
    reply_to: str | None = None  # where the reply goes when not to ``sender`` (the channel's own address form)

    @property
    def reply_target(self) -> str:
        return self.reply_to or self.sender


class Ingress(Protocol):
    def messages(self, after_rowid: int, stop: threading.Event) -> Iterator[InboundMessage]:
        """Yields messages with ``rowid > after_rowid`` in order, waiting for new ones until ``stop`` is set
        (or, for a finite source such as piped stdin, until the input ends)."""
        ...

    def latest_rowid(self) -> int:
        """The newest rowid present now (to start a fresh install without replaying history)."""
        ...


class Egress(Protocol):
    def send(self, recipient: str, text: str) -> None:
        """Sends ``text`` (split into parts as needed). Raises ``SendError`` when delivery fails."""
        ...


class SendError(RuntimeError):
    """A reply could not be handed to the channel; the message says why and what to do."""
