"""One normal form for the people who text the daemon: E.164 for phone numbers, lower case for emails.

Used on both sides of every comparison (iMessage handles as they arrive, the allowlist as configured, the
approver of a request), so ``+1 (555) 123-4567``, ``15551234567`` and ``+15551234567`` are one person.
"""

from __future__ import annotations

import re
from functools import lru_cache

import phonenumbers

_SCHEMES = ("mailto:", "tel:", "sms:", "imessage:")
_EMAIL = re.compile(r"[^@\s]+@[^@\s.]+(\.[^@\s.]+)+")


class HandleError(ValueError):
    """Typed text that is not a handle; the message is one sentence saying why."""


def _without_scheme(raw: str) -> str:
    text = raw.strip()
    for scheme in _SCHEMES:
        if text.lower().startswith(scheme):
            return text[len(scheme) :].strip()
    return text


def parse_handle(raw: str, default_region: str = "US") -> str:
    """The normal form of a handle a person typed (``apple-flow setup``), or ``HandleError`` when it is neither an
    email address nor a possible phone number."""
    text = _without_scheme(raw)
    if "@" in text:
        if not _EMAIL.fullmatch(text):
            raise HandleError(f"'{raw.strip()}' is not an email address (like name@icloud.com).")
        return text.lower()
    if not any(ch.isdigit() for ch in text) or any(ch.isalpha() for ch in text):
        raise HandleError(f"'{raw.strip()}' is neither a phone number nor an email address.")
    try:
        number = phonenumbers.parse(text, None if text.startswith("+") else default_region)
    except phonenumbers.NumberParseException:
        number = None
    if number is None or not phonenumbers.is_possible_number(number):
        raise HandleError(
            f"'{raw.strip()}' is not a phone number: write it with its country code, e.g. +1 555 123 4567."
        )
    return phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164)


# Remembered: the daemon normalises the same few handles several times per message (reading, policy, sending), and
# parsing a phone number costs about 0.3 ms. A pure function of its arguments, so the cache cannot go stale.
@lru_cache(maxsize=4096)
def normalize_handle(raw: str, default_region: str = "US") -> str:
    """The normal form of ``raw``. Text that is neither an email nor a possible phone number (``console``, a
    group chat id) comes back stripped but otherwise unchanged."""
    text = _without_scheme(raw)
    if "@" in text:
        return text.lower()
    if not any(ch.isdigit() for ch in text):
        return text
    try:
        number = phonenumbers.parse(text, None if text.startswith("+") else default_region)
    except phonenumbers.NumberParseException:
        return text
    if not phonenumbers.is_possible_number(number):
        return text
    return phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164)
