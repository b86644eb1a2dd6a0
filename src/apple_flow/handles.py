"""One normal form for the people who text the daemon: E.164 for phone numbers, lower case for emails.

Used on both sides of every comparison (iMessage handles as they arrive, the allowlist as configured, the
approver of a request), so ``+1 (555) 123-4567``, ``15551234567`` and ``+15551234567`` are one person.
"""

from __future__ import annotations

import phonenumbers

_SCHEMES = ("mailto:", "tel:", "sms:", "imessage:")


def normalize_handle(raw: str, default_region: str = "US") -> str:
    """The normal form of ``raw``. Text that is neither an email nor a possible phone number (``console``, a
    group chat id) comes back stripped but otherwise unchanged."""
    text = raw.strip()
    for scheme in _SCHEMES:
        if text.lower().startswith(scheme):
            text = text[len(scheme) :].strip()
            break
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
