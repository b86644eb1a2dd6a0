"""Short, honest replies for turns without an answer: each outcome, and each unexpected exception, becomes one or
two sentences that say what happened and what to do, never a stack trace."""

from __future__ import annotations

import re

from apple_flow.connectors.base import Status, TurnOutcome

_MAX = 400
_SENTENCE_END = re.compile(r"(?<=\.)\s+")
_PARENTHESES = re.compile(r"\s*\([^)]*\)")


def is_blocker(result: str) -> bool:
    """The agent stopped because it needs the user (the ``BLOCKER:`` convention): not an answer, not a plan."""
    return result.lstrip().upper().startswith("BLOCKER:")


def explain(outcome: TurnOutcome) -> str:
    """The reply for an outcome that is not an answer."""
    status = outcome.status
    if status is Status.EMPTY:
        return "The agent finished without an answer. Try rephrasing, or ask for something smaller."
    if status is Status.TIMED_OUT:
        return timed_out(outcome.limit_seconds)
    if status is Status.BINARY_MISSING:
        return f"Sorry, the agent cannot start: {_first_lines(outcome.detail)}"
    if status is Status.NO_MODEL:
        return f"Sorry, no model is available: {_cause_and_fix(outcome.detail)}"
    if status is Status.CHECK_FAILED:
        return f"The work is not done: {_first_lines(outcome.detail)}"
    if status is Status.CANCELLED:
        return f"Sorry, the agent was stopped before it finished: {_first_lines(outcome.detail)}"
    return f"Sorry, the agent failed: {_first_lines(outcome.detail)}"


def timed_out(seconds: float | None) -> str:
    limit = f" after {seconds:g} s" if seconds is not None else ""
    return f"Sorry, that took too long and was stopped{limit}. Try a smaller request, or split it up."


def explain_exception(exc: BaseException) -> str:
    message = _first_lines(str(exc)) or type(exc).__name__
    return f"Sorry, something went wrong in apple-flow ({type(exc).__name__}: {message}). Details are in its log."


def _cause_and_fix(reason: str) -> str:
    """The first sentence (what is wrong, without parenthesised low-level detail) and the last (the connector's
    fix, in apple-flow's own settings); the middle is the agent's advice for its own options."""
    sentences = _SENTENCE_END.split(" ".join(reason.split()))
    cause = _PARENTHESES.sub("", sentences[0]).rstrip(".") + "."
    return _first_lines(cause if len(sentences) == 1 else f"{cause} {sentences[-1]}")


def _first_lines(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    joined = " ".join(lines[:3])
    return joined if len(joined) <= _MAX else joined[: _MAX - 1].rstrip() + "…"
