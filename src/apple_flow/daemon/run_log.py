"""What a run did, kept for the web page: the agent's stream-json events (tool calls and their results with output,
exit code and diff, notices, the result), as they arrive.

Bounded three ways: one event at most ``EVENT_MAX_BYTES`` (its longest strings cut, saying so), one run at most
``RUN_MAX_BYTES`` (later events are counted as dropped, but the ``result`` event always has room), and only the
newest ``KEEP_RUNS`` runs keep their events. ``text`` deltas are not kept: the ``result`` event holds the answer.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from apple_flow.daemon.store import Store

log = logging.getLogger(__name__)

EVENT_MAX_BYTES = 16 * 1024
RUN_MAX_BYTES = 512 * 1024
KEEP_RUNS = 500
SKIPPED_TYPES = frozenset({"text"})


class RunLog:
    """Records one run's events; called with each parsed event. Never raises: a run must not fail because its
    record could not be written."""

    def __init__(self, store: Store, run_id: str) -> None:
        self._store = store
        self.run_id = run_id

    def __call__(self, event: Mapping[str, Any]) -> None:
        event_type = str(event.get("type") or "unknown")
        if event_type in SKIPPED_TYPES:
            return
        budget = RUN_MAX_BYTES if event_type == "result" else RUN_MAX_BYTES - EVENT_MAX_BYTES
        try:
            self._store.run_events.add(self.run_id, event_type, bounded_json(event), budget, KEEP_RUNS)
        except Exception:
            log.exception("could not keep an event of run %s", self.run_id)


def bounded_json(event: Mapping[str, Any], limit: int = EVENT_MAX_BYTES) -> str:
    """The event as JSON within ``limit`` bytes: the longest strings are cut (each ending in a marker) until it
    fits; an event that still does not fit keeps only its type and says so."""
    text = json.dumps(event, ensure_ascii=False)
    value: Any = dict(event)
    for _ in range(32):
        if len(text.encode()) <= limit:
            return text
        longest = _longest_string(value)
        if longest is None or len(longest) < 64:
            break
        over = len(text.encode()) - limit
        keep = max(0, len(longest) - over - 80)
        value = _replace_first(value, longest, f"{longest[:keep]} [... cut: {len(longest) - keep} characters]")
        text = json.dumps(value, ensure_ascii=False)
    if len(text.encode()) <= limit:
        return text
    return json.dumps({"type": event.get("type", "unknown"), "cut": f"an event of {len(text.encode())} bytes"})


def _longest_string(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    found = [s for s in (_longest_string(child) for child in children) if s is not None]
    return max(found, key=len) if found else None


def _replace_first(value: Any, target: str, replacement: str) -> Any:
    done = False

    def walk(item: Any) -> Any:
        nonlocal done
        if done:
            return item
        if isinstance(item, str) and item is target:
            done = True
            return replacement
        if isinstance(item, dict):
            return {key: walk(child) for key, child in item.items()}
        if isinstance(item, list):
            return [walk(child) for child in item]
        return item

    return walk(value)
