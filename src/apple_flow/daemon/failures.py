"""Short, honest replies for failed turns: the connector's ``Error: ...`` strings and unexpected exceptions become
one or two sentences that say what happened and what to do, never a stack trace."""

from __future__ import annotations

import re

_MAX = 300
_SECONDS = re.compile(r"after (\d+(?:\.\d+)?)\s*s", re.IGNORECASE)


def is_failure(result: str) -> bool:
    text = result.strip()
    return not text or text.startswith("Error:") or text == "No response generated."


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
        return f"Sorry, no model is available: {_first_lines(reason)}"
    if "unavailable" in lowered or "not available" in lowered:
        return f"Sorry, no model is available: {detail}"
    return f"Sorry, the agent failed: {detail}"


def explain_exception(exc: BaseException) -> str:
    message = _first_lines(str(exc)) or type(exc).__name__
    return f"Sorry, something went wrong in apple-flow ({type(exc).__name__}: {message}). Details are in its log."


def _first_lines(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    joined = " ".join(lines[:3])
    return joined if len(joined) <= _MAX else joined[: _MAX - 1].rstrip() + "…"
