"""What a message asks for: a command (help, status, approve ...), a prefixed request (idea:, plan:, task:), or
chat. Pure parsing; nothing here acts."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum


class Kind(StrEnum):
    HELP = "help"
    STATUS = "status"
    HEALTH = "health"
    CLEAR = "clear"
    APPROVE = "approve"
    DENY = "deny"
    DENY_ALL = "deny_all"
    CANCEL = "cancel"
    ESCALATE = "escalate"
    HISTORY = "history"
    USAGE = "usage"
    WEB = "web"
    RUN = "run"  # a message that came while the Mac slept: `run` the last one, `run <n>` another
    IDEA = "idea"
    PLAN = "plan"
    TASK = "task"
    CHAT = "chat"


# Answered at once, even while one of the sender's turns runs; everything else is a turn for the agent.
FAST = frozenset({
    Kind.HELP, Kind.STATUS, Kind.HEALTH, Kind.CLEAR, Kind.APPROVE, Kind.DENY, Kind.DENY_ALL, Kind.CANCEL,
    Kind.HISTORY, Kind.USAGE, Kind.WEB, Kind.ESCALATE,
})


@dataclass(frozen=True)
class Command:
    kind: Kind
    body: str = ""  # the request text (idea/plan/task/chat), the extra words after `approve <id>`, history's query
    target: str | None = None  # the run or approval id named by status/approve/deny/cancel
    alias: str | None = None  # `@alias` workspace selection


HELP_TEXT = """Commands:
- just write: chat with the agent
- send a file (a log, a patch, a photo), with or without words: the agent gets it in .apple-flow/inbox/
- "send me the file" (or attach): the agent sends files of the workspace back
- idea: TOPIC — brainstorm (no changes)
- plan: GOAL — a plan (no changes)
- task: WORK — a plan first; you approve, then it runs with tools
- approve ID [notes] / deny ID / deny all (ID may be left out when one request is pending); or like (or love)
  the plan's message to approve it, dislike it to deny
- run / run N — run a message that came while this Mac was asleep or offline (they are listed, not run)
- status [ID] — what is running and queued, pending approvals, the check approved tasks must pass
- escalate RUN — run an approved task whose run failed again on the other connector the owner set up
- cancel [RUN] — stop your running request and drop your queued ones (with a run id: only that run)
- history [WORDS] — your recent requests and replies, newest first; with words, those containing them
- usage — your turns, time and tokens per day and backend, last 7 days
- clear context (or new chat, reset context) — forget the conversation
- health — is the daemon and its model working
- web — a link that logs this phone in to the Mac's web page (works once, for a few minutes; iMessage only)
- @alias at the start picks a configured workspace, e.g. `@site task: fix the tests`"""

_ALIAS = re.compile(r"^@([A-Za-z0-9_.-]+)\s*(.*)$", re.DOTALL)
_PREFIX = re.compile(r"^(idea|plan|task)\s*:\s*(.*)$", re.DOTALL | re.IGNORECASE)
_CLEAR = {"clear context", "new chat", "reset context", "clear"}
_HISTORY = re.compile(r"^history\b\s*(:?)\s*(.*)$", re.DOTALL | re.IGNORECASE)
# `history WORDS` searches with a few words; a longer message starting with "history" is chat ("history of Rome in
# three sentences, please"), unless it has the colon: `history: any phrase`.
HISTORY_MAX_WORDS = 5
_RUN_ID = re.compile(r"^(?:run_)?([0-9a-f]{6})$", re.IGNORECASE)  # what new_run_id() makes; `run_` may be left out


def parse(text: str) -> Command:
    stripped = text.strip()
    alias = None
    match = _ALIAS.match(stripped)
    if match:
        alias, stripped = match.group(1).lower(), match.group(2).strip()
    command = _parse_plain(stripped)
    if command.kind in (Kind.IDEA, Kind.PLAN, Kind.TASK):
        # `task: @site fix it` selects a workspace too.
        inner = _ALIAS.match(command.body)
        if inner and alias is None:
            alias = inner.group(1).lower()
            command = Command(command.kind, inner.group(2).strip())
    if alias is None:
        return command
    return Command(command.kind, command.body, command.target, alias)


def _parse_plain(text: str) -> Command:
    words = text.split()
    lowered = " ".join(words).lower()
    first = words[0].lower() if words else ""
    if lowered in ("help", "?", "commands"):
        return Command(Kind.HELP)
    if lowered == "health":
        return Command(Kind.HEALTH)
    if lowered in _CLEAR:
        return Command(Kind.CLEAR)
    if lowered in ("cancel", "stop"):
        return Command(Kind.CANCEL)
    if first == "cancel" and len(words) == 2 and (run := _RUN_ID.match(words[1])):
        return Command(Kind.CANCEL, target=f"run_{run.group(1).lower()}")
    if first == "escalate" and len(words) <= 2:  # the run (or request) may be left out: the latest failed one
        return Command(Kind.ESCALATE, target=words[1] if len(words) == 2 else None)
    if lowered == "usage":
        return Command(Kind.USAGE)
    if lowered == "web":
        return Command(Kind.WEB)
    history = _HISTORY.match(text)
    if history and (history.group(1) or len(history.group(2).split()) <= HISTORY_MAX_WORDS):
        return Command(Kind.HISTORY, " ".join(history.group(2).split()))
    if first == "status" and len(words) <= 2:
        return Command(Kind.STATUS, target=words[1] if len(words) == 2 else None)
    if lowered == "deny all":
        return Command(Kind.DENY_ALL)
    if first == "deny" and len(words) <= 2:  # a bare `deny` denies the one pending request, as `approve` does
        return Command(Kind.DENY, target=words[1] if len(words) == 2 else None)
    if first == "run" and (len(words) == 1 or (len(words) == 2 and words[1].isdigit())):
        return Command(Kind.RUN, target=words[1] if len(words) == 2 else None)
    if first == "approve":
        target = words[1] if len(words) > 1 else None
        extra = text.split(None, 2)[2].strip() if len(words) > 2 else ""
        return Command(Kind.APPROVE, body=extra, target=target)
    match = _PREFIX.match(text)
    if match:
        return Command(Kind(match.group(1).lower()), match.group(2).strip())
    return Command(Kind.CHAT, text)
