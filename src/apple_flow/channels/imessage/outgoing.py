"""A text on its way out, worked out once (``OutgoingText.of``): where it goes (``Target``), its parts (its form
osascript can take as an argument, split at the chunk size into numbered parts: ``split_reply``), and the form each
part comes back in when Messages shows it again (``normalise_text``, the form the ingress and the delivery check
compare texts in). The egress notes the parts for echo suppression before they go and sends them as noted."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from apple_flow.channels.imessage.osascript import argv_safe
from apple_flow.handles import normalize_handle


def normalise_text(text: str) -> str:
    """Whitespace-insensitive form: Messages may trim or re-wrap what it stores."""
    return " ".join(text.split())


@dataclass(frozen=True)
class Target:
    """Where a text goes: ``address`` over iMessage or through the SMS account, or into a group chat (``address``
    is its chat identifier, ``chat_guid`` its guid as chat.db stores it)."""

    kind: Literal["imessage", "sms", "group"]
    address: str
    chat_guid: str | None = None

    @classmethod
    def parse(cls, recipient: str, region: str) -> Target:
        """A handle, ``SMS;-;<handle>`` (also ``RCS``), ``<service>;-;<handle>``, or a group: its guid
        (``iMessage;+;chat…``, ``any;+;chat…``) or bare identifier (``chat…``)."""
        text = recipient.strip()
        if ";+;" in text:
            return cls("group", text.rsplit(";", 1)[-1], text)
        if text.startswith("chat") and text[4:].isdigit():
            return cls("group", text, f"iMessage;+;{text}")
        service, sep, handle = text.partition(";-;")
        if sep:
            kind: Literal["imessage", "sms"] = "sms" if service.upper() in ("SMS", "RCS") else "imessage"
            return cls(kind, normalize_handle(handle, region))
        return cls("imessage", normalize_handle(text, region))

    def describe(self) -> str:
        if self.kind == "group":
            return f"the group chat {self.address}"
        return f"{self.address} (SMS)" if self.kind == "sms" else self.address


@dataclass(frozen=True)
class OutgoingText:
    """A text as it goes out: ``target``, its ``parts`` in order, and each part's ``echoes`` form."""

    target: Target
    parts: tuple[str, ...]
    echoes: tuple[str, ...]

    @classmethod
    def of(cls, recipient: str, text: str, region: str, chunk_chars: int) -> OutgoingText:
        # Split in its argument-safe form: the parts noted are then exactly the parts sent.
        parts = tuple(split_reply(argv_safe(text), chunk_chars))
        return cls(Target.parse(recipient, region), parts, tuple(normalise_text(part) for part in parts))


# Splitting a long reply into numbered parts at paragraph, then line, then sentence, then word boundaries.

_SENTENCE_END = re.compile(r"(?<=[.!?…])\s+")


def split_reply(text: str, limit: int) -> list[str]:
    """``text`` as parts of at most ``limit`` characters each (numbering included). A text that fits is
    returned as is; otherwise each part is prefixed ``(i/n) ``."""
    text = text.strip()
    if len(text) <= limit:
        return [text] if text else []
    reserve = len("(9/9) ")  # room for the part number prefix, widened when there are 10 or more parts
    while True:
        budget = max(limit - reserve, 1)
        pieces = _pack(_paragraph_units(text, budget), budget)
        total = len(pieces)
        needed = len(f"({total}/{total}) ")
        if needed <= reserve:
            break
        reserve = needed
    return [f"({index}/{total}) {piece}" for index, piece in enumerate(pieces, start=1)]


def _paragraph_units(text: str, budget: int) -> list[tuple[str, str]]:
    """(separator-before, unit) pairs, each unit at most ``budget`` long."""
    units: list[tuple[str, str]] = []
    for paragraph in re.split(r"\n\s*\n", text):
        paragraph = paragraph.strip()
        if not paragraph:
            continue
        if len(paragraph) <= budget:
            units.append(("\n\n", paragraph))
            continue
        separator = "\n\n"
        for line in paragraph.split("\n"):  # lines (a list, a plan) before sentences: a line break stays one
            sentences = [line] if len(line) <= budget else _SENTENCE_END.split(line)
            for sentence in sentences:
                for piece in _cut_words(sentence, budget):
                    units.append((separator, piece))
                    separator = " "
            separator = "\n"
    return units


def _cut_words(sentence: str, budget: int) -> list[str]:
    if len(sentence) <= budget:
        return [sentence]
    # A single over-long word (a URL, a hash) is cut hard into budget-sized pieces, which never join others.
    units = [(" ", word[i : i + budget]) for word in sentence.split(" ") for i in range(0, max(len(word), 1), budget)]
    return _pack(units, budget)


def _pack(units: list[tuple[str, str]], budget: int) -> list[str]:
    pieces: list[str] = []
    current = ""
    for separator, unit in units:
        candidate = f"{current}{separator}{unit}" if current else unit
        if len(candidate) <= budget:
            current = candidate
        else:
            pieces.append(current)
            current = unit
    if current:
        pieces.append(current)
    return pieces
