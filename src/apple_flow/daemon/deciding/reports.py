"""The sender's own records as short replies: ``history`` (their recent requests and what came back) and ``usage``
(their turns, time and tokens per day and backend). Formatting only: the orchestrator picks the runs (the sender's
alone) from the store and hands them here; every reply fits one iMessage bubble."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from apple_flow.daemon.store import Run
from apple_flow.times import day, duration, moment

HISTORY_ENTRIES = 5  # runs a `history` reply shows at most
REPLY_MAX_CHARS = 1200  # below reply_chunk_chars' default (1500): a report is one message
REQUEST_SHOWN_CHARS = 120
RESULT_SHOWN_CHARS = 200
USAGE_DAYS = 7
NOT_RECORDED = "backend not recorded"  # runs from before the daemon kept it


def clip(text: str, limit: int = 80) -> str:
    """``text`` on one line, at most ``limit`` characters (cut with an ellipsis)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


# --- history ---------------------------------------------------------------------------------------------------


def history_reply(runs: Sequence[Run], query: str, more: bool) -> str:
    """The runs (newest first) as one reply: each with its id, when, kind and state, the request and the start of
    its result. ``more``: older runs match too (the reply says how to reach them)."""
    matching = f' matching "{clip(query, 40)}"' if query else ""
    if not runs:
        return f"Nothing of yours matches \"{clip(query, 40)}\"." if query else "No requests of yours yet."
    text = f"Your requests{matching}, newest first:"
    shown = 0
    for run in runs:
        entry = _entry(run)
        if shown and len(text) + 2 + len(entry) > REPLY_MAX_CHARS - 100:  # room for the closing line
            break
        text += "\n\n" + entry
        shown += 1
    if more or shown < len(runs):
        text += "\n\nOlder ones: `history WORDS` finds them; `status RUN` shows one."
    return text


def _entry(run: Run) -> str:
    result = "(still running)" if run.state == "running" else clip(run.result or "(nothing)", RESULT_SHOWN_CHARS)
    return (
        f"{run.id}, {moment(run.started_at)}, {run.kind}, {run.state}\n"
        f"You: {clip(run.request, REQUEST_SHOWN_CHARS)}\n"
        f"Reply: {result}"
    )


# --- usage -----------------------------------------------------------------------------------------------------


def usage_since(now: float, days: int = USAGE_DAYS) -> float:
    """The start of the local day ``days - 1`` days before ``now``'s: the first moment ``usage`` counts."""
    today = datetime.fromtimestamp(now).replace(hour=0, minute=0, second=0, microsecond=0)
    return (today - timedelta(days=days - 1)).timestamp()


@dataclass
class _Tally:
    turns: int = 0
    seconds: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    reported: int = 0  # turns that reported tokens
    estimated: int = 0  # of those, turns whose tokens were estimated

    def add(self, run: Run, now: float) -> None:
        self.turns += 1
        self.seconds += max(0.0, (run.finished_at if run.finished_at is not None else now) - run.started_at)
        if run.input_tokens is not None or run.output_tokens is not None:
            self.reported += 1
            self.input_tokens += run.input_tokens or 0
            self.output_tokens += run.output_tokens or 0
            self.estimated += 1 if run.tokens_estimated else 0

    def text(self) -> str:
        turns = f"{self.turns} turn{'s' if self.turns != 1 else ''}, {duration(self.seconds)}"
        if not self.reported:
            return f"{turns}, tokens not reported"
        tokens = f"{self.input_tokens:,} tokens in / {self.output_tokens:,} out"
        notes = []
        if self.estimated:
            notes.append("estimated" if self.estimated == self.reported else f"{self.estimated} estimated")
        if self.reported < self.turns:
            notes.append(f"{self.reported} of {self.turns} turns reported them")
        return f"{turns}, {tokens}" + (f" ({'; '.join(notes)})" if notes else "")


def usage_reply(runs: Sequence[Run], now: float, days: int = USAGE_DAYS) -> str:
    """The runs (the sender's since ``usage_since``) summed per local day and backend, newest day first, and in
    total; tokens as the agents reported them, saying where they were estimated."""
    if not runs:
        return f"No turns of yours in the last {days} days."
    per_day: dict[str, dict[str, _Tally]] = {}
    total = _Tally()
    for run in sorted(runs, key=lambda r: r.started_at, reverse=True):
        heading = day(run.started_at)
        per_day.setdefault(heading, {}).setdefault(run.backend or NOT_RECORDED, _Tally()).add(run, now)
        total.add(run, now)
    lines = [f"Your usage, last {days} days (newest first):"]
    closing = f"Total: {total.text()}"
    for heading, backends in per_day.items():
        for backend, tally in backends.items():
            line = f"{heading}, {backend}: {tally.text()}"
            if sum(len(x) + 1 for x in lines) + len(line) + len(closing) + 40 > REPLY_MAX_CHARS:
                lines.append("… (older days left out)")
                return "\n".join([*lines, closing])
            lines.append(line)
    return "\n".join([*lines, closing])
