"""What the run pages show, read from the store: a row per run for the list, and for one run its request, its
tool calls paired with their results, the commands with exit codes, the files changed with their diffs, the reply
as sent, and why it failed. Everything here comes from the run's row, the message it answers and the agent's own
events (``run_events``); nothing is inferred from the reply's wording."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field, replace
from typing import Any

from apple_flow.connectors.events import parse_line
from apple_flow.connectors.stream_events import (
    Notice,
    Result,
    Start,
    ToolCall,
    ToolResult,
    Verify,
    VerifyReport,
)
from apple_flow.daemon.store import Run, RunFacts, Store

RUNS_PER_PAGE = 50
ARGUMENT_SHOWN_CHARS = 2000  # a writeFile's content is shown this far; its diff shows the change


@dataclass(frozen=True)
class RunRow:
    run: Run
    backend: str
    model: str
    input_tokens: int | None
    output_tokens: int | None
    duration: float  # seconds; for a running run, so far


@dataclass(frozen=True)
class DiffLine:
    kind: str  # add | del | hunk | head | note | same
    text: str


@dataclass
class Step:
    """One tool call and (once it came) its result."""

    id: str
    name: str
    arguments: dict[str, Any]
    subtask: int | None = None
    done: bool = False
    ok: bool = True
    summary: str = ""
    output: str | None = None
    exit_code: int | None = None
    diff: list[DiffLine] = field(default_factory=list)
    truncated: bool = False

    @property
    def target(self) -> str:
        for key in ("path", "command", "pattern"):
            value = self.arguments.get(key)
            if isinstance(value, str) and value:
                return value
        return ""

    def shown_arguments(self) -> list[tuple[str, str]]:
        shown = []
        for key, value in self.arguments.items():
            text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            if len(text) > ARGUMENT_SHOWN_CHARS:
                text = f"{text[:ARGUMENT_SHOWN_CHARS]}\n[... {len(text) - ARGUMENT_SHOWN_CHARS} more characters]"
            shown.append((key, text))
        return shown


@dataclass
class RunDetail:
    row: RunRow
    steps: list[Step]
    notices: list[str]
    other_events: list[tuple[str, str]]  # (type, JSON) of events this page does not know (other agent CLIs)
    result: Result | None
    files_changed: list[str]
    reply: str | None  # the reply recorded for the message this run answers
    reply_state: str | None  # sent | send_failed | replied (recorded, not yet sent) | ...
    reply_note: str | None
    # Where a task's check (apple-code --verify) stood after each of its runs (the ``verify`` events), and at the
    # end (the result's ``verify``).
    checks: list[VerifyReport] = field(default_factory=list)
    check: VerifyReport | None = None

    @property
    def commands(self) -> list[Step]:
        return [step for step in self.steps if step.name == "runCommand"]

    @property
    def diffs(self) -> list[Step]:
        return [step for step in self.steps if step.diff]

    @property
    def failure(self) -> str | None:
        """Why the run failed, in the words recorded for it (the agent's error, a timeout, a refusal)."""
        run = self.row.run
        if run.state in ("failed", "interrupted", "cancelled"):
            subtype = self.result.subtype if self.result is not None else None
            detail = run.result or "no reason was recorded"
            return f"{detail} ({subtype})" if subtype and subtype != "success" else detail
        return None


def run_rows(store: Store, limit: int = RUNS_PER_PAGE, now: float | None = None,
             sender: str | None = None) -> list[RunRow]:
    """The newest runs: every sender's, or ``sender``'s only."""
    runs = store.runs.recent_runs(limit) if sender is None else store.runs.of_sender(sender, limit)
    facts = store.run_events.facts([run.id for run in runs])
    return [_row(run, facts.get(run.id, RunFacts()), now) for run in runs]


def _row(run: Run, facts: RunFacts, now: float | None) -> RunRow:
    start, result = facts.start, facts.result
    usage = result.usage if result is not None else None
    end = run.finished_at if run.finished_at is not None else (now if now is not None else time.time())
    return RunRow(
        run=run,
        backend=(result.backend if result else None) or (start.backend if start else "") or "",
        model=(result.model if result else None) or (start.model if start else "") or "",
        # The run's own figures (any connector's typed outcome) first, else the agent's result event.
        input_tokens=run.input_tokens if run.input_tokens is not None else usage.input_tokens if usage else None,
        output_tokens=run.output_tokens if run.output_tokens is not None else usage.output_tokens if usage else None,
        duration=max(0.0, end - run.started_at),
    )


def run_detail(store: Store, run_id: str, now: float | None = None) -> RunDetail | None:
    run = store.runs.get_run(run_id)
    if run is None:
        return None
    steps: dict[tuple[int | None, str], Step] = {}
    order: list[Step] = []
    notices: list[str] = []
    other: list[tuple[str, str]] = []
    check_runs: list[VerifyReport] = []
    facts = RunFacts()
    for stored in store.run_events.of_run(run_id):
        event = parse_line(stored.body)
        if event is None:
            other.append((stored.type, stored.body))
        elif isinstance(event, ToolCall):
            step = Step(id=event.id, name=event.name or "?", arguments=dict(event.arguments), subtask=event.subtask)
            steps[(event.subtask, step.id)] = step
            order.append(step)
        elif isinstance(event, ToolResult):
            found = steps.get((event.subtask, event.id))
            if found is None:  # its call was not kept (the run's budget): show the result alone
                found = Step(id=event.id, name=event.name or "?", arguments={}, subtask=event.subtask)
                order.append(found)
            found.done = True
            found.ok = event.ok
            found.summary = event.summary
            found.truncated = event.truncated
            found.output = event.output
            found.exit_code = event.exit_code
            found.diff = diff_lines(event.diff) if event.diff is not None else []
        elif isinstance(event, Notice):
            prefix = f"[{event.subtask}] " if event.subtask is not None else ""
            notices.append(prefix + event.message)
        elif isinstance(event, Start):
            facts = replace(facts, start=event)
        elif isinstance(event, Result):
            facts = replace(facts, result=event)
        elif isinstance(event, Verify):
            check_runs.append(event)
        else:
            other.append((event.type, stored.body))
    result = facts.result
    reported = list(result.files_changed or ()) if result is not None else []
    files = reported or [str(f) for f in _json_list(run.files_changed) if isinstance(f, str)]
    reply = reply_state = note = None
    if run.message:
        channel, _, rowid = run.message.rpartition(":")
        record = store.messages.get_message(channel, int(rowid)) if rowid.isdigit() else None
        if record is not None:
            reply, reply_state, note = record.reply, record.state, record.note
    return RunDetail(
        row=_row(run, facts, now), steps=order, notices=notices, other_events=other, result=result,
        files_changed=files, reply=reply, reply_state=reply_state, reply_note=note, checks=check_runs,
        check=result.verify if result is not None else None,
    )


def diff_lines(diff: str) -> list[DiffLine]:
    lines = []
    for line in diff.splitlines():
        if line.startswith(("--- ", "+++ ")):
            kind = "head"
        elif line.startswith("@@"):
            kind = "hunk"
        elif line.startswith("+"):
            kind = "add"
        elif line.startswith("-"):
            kind = "del"
        elif line.startswith(("\\", "[... diff cut")):
            kind = "note"
        else:
            kind = "same"
        lines.append(DiffLine(kind, line))
    return lines


def _json_list(text: str | None) -> list[Any]:
    try:
        value = json.loads(text) if text else []
    except ValueError:
        return []
    return value if isinstance(value, list) else []
