"""Short, honest replies for failed turns: the connector's ``Error: ...`` strings and unexpected exceptions become
one or two sentences that say what happened and what to do, never a stack trace."""

from __future__ import annotations

import re

_MAX = 400
_SENTENCE_END = re.compile(r"(?<=\.)\s+")
_PARENTHESES = re.compile(r"\s*\([^)]*\)")
_SECONDS = re.compile(r"after (\d+(?:\.\d+)?)\s*s", re.IGNORECASE)


def is_failure(result: str) -> bool:
    text = result.strip()
    return not text or text.startswith("Error:") or text == "No response generated."


def is_blocker(result: str) -> bool:
    """The agent stopped because it needs the user (the ``BLOCKER:`` convention): not an answer, not a plan."""
    return result.lstrip().upper().startswith("BLOCKER:")


def explain(result: str) -> str:
    """The reply for a connector result that ``is_failure``."""
    text = result.strip()
    if not text or text == "No response generated.":
        return "The agent finished without an answer. Try rephrasing, or ask for something smaller."
    detail = _first_lines(text.removeprefix("Error:").strip())
    lowered = text.lower()
    if "timed out" in lowered:
        seconds = _SECONDS.search(text)
        limit = f" after {seconds.group(1)} s" if seconds else ""
        return f"Sorry, that took too long and was stopped{limit}. Try a smaller request, or split it up."
    if "not found at" in lowered or "cli not found" in lowered:
        return f"Sorry, the agent cannot start: {detail}"
    if "no model available" in lowered:
        reason = text[lowered.index("no model available") + len("no model available") :].lstrip(" :")
        return f"Sorry, no model is available: {_cause_and_fix(reason)}"
    if "unavailable" in lowered or "not available" in lowered:
        return f"Sorry, no model is available: {detail}"
    return f"Sorry, the agent failed: {detail}"


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
