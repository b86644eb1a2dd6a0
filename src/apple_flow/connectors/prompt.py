"""Fitting a turn's prompt into a character budget, by priority.

The new message comes first and whole (cut from the middle only if it alone is over the budget); the newest
exchanges of the conversation get what is left, newest first, each trimmed to fit; anything that no longer fits
is dropped. A note on the files that came with the message (at most half the budget) follows the message whole.
Tools context is never added: apple-code offers its tools natively.
"""

from __future__ import annotations

from collections.abc import Sequence

from apple_flow.connectors.base import Exchange

HISTORY_HEADER = "Earlier conversation (for context):\n"
MESSAGE_HEADER = "\nNew message:\n"
NOTE_SEPARATOR = "\n\n"
# An exchange squeezed below this many characters says nothing useful; drop it instead.
MIN_EXCHANGE_CHARS = 60


def cut_middle(text: str, limit: int) -> str:
    """``text`` at most ``limit`` characters long, its middle replaced by a marker saying how much was cut."""
    if len(text) <= limit:
        return text
    if limit <= 0:
        return ""
    # The marker's length depends on the count it reports: settle both so the result is exactly ``limit``.
    cut = len(text) - limit
    while True:
        marker = _marker(cut)
        keep = limit - len(marker)
        if keep <= 0:
            return text[:limit]
        if len(text) - keep == cut:
            break
        cut = len(text) - keep
    head = keep - keep // 2
    tail = keep // 2
    return text[:head] + marker + (text[len(text) - tail :] if tail else "")


def cut_end(text: str, limit: int) -> str:
    """``text`` at most ``limit`` characters long, cut at the end with an ellipsis when too long."""
    text = text.strip()
    if len(text) <= limit:
        return text
    if limit <= 1:
        return ""
    return text[: limit - 1].rstrip() + "…"


def format_exchange(exchange: Exchange) -> str:
    return f"User: {exchange.user}\nAssistant: {exchange.assistant}"


def fit_prompt(message: str, history: Sequence[Exchange], max_chars: int, note: str = "") -> str:
    """The prompt for one turn: ``message`` plus as much of ``history`` (oldest first) as fits ``max_chars``, and
    ``note`` after the message, kept whole (cut only past half of ``max_chars``)."""
    if note:
        note = cut_end(note, max_chars // 2)
        return fit_prompt(message, history, max_chars - len(note) - len(NOTE_SEPARATOR)) + NOTE_SEPARATOR + note
    if not history or len(message) + len(HISTORY_HEADER) + len(MESSAGE_HEADER) + MIN_EXCHANGE_CHARS > max_chars:
        return cut_middle(message, max_chars)
    budget = max_chars - len(message) - len(HISTORY_HEADER) - len(MESSAGE_HEADER)
    kept: list[str] = []
    for exchange in reversed(history):  # newest first: they matter most
        separator = 2 if kept else 0  # blank line between exchanges
        room = budget - separator
        if room < MIN_EXCHANGE_CHARS:
            break
        kept.append(_trim_exchange(exchange, room))
        budget -= len(kept[-1]) + separator
    if not kept:
        return message
    return HISTORY_HEADER + "\n\n".join(reversed(kept)) + MESSAGE_HEADER + message


def _trim_exchange(exchange: Exchange, limit: int) -> str:
    """One exchange within ``limit`` characters, the user's and the assistant's part cut alike."""
    whole = format_exchange(exchange)
    if len(whole) <= limit:
        return whole
    frame = len("User: \nAssistant: ")
    room = limit - frame
    user_room = min(len(exchange.user), max(room // 3, room - len(exchange.assistant)))
    assistant_room = room - user_room
    return format_exchange(
        Exchange(cut_middle(exchange.user, user_room), cut_middle(exchange.assistant, assistant_room))
    )


def _marker(count: int) -> str:
    return f"\n[... {count} characters cut ...]\n"
