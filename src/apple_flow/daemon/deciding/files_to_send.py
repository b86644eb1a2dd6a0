"""Files the agent sends back: which ones its answer names, and whether each may go.

The convention (told to the agent when the user asks for a file): a line ``ATTACH: <path>`` in the answer for each
file of the workspace to send; the lines are taken out of the text the user reads. When the user asked for a file
and the answer names none, the files the agent changed (apple-code's ``files_changed``) are sent instead.

Only regular files inside the turn's workspace go (the path resolved, so no link leads out of it), each within the
size limit, at most a few per reply; what is refused is said in the reply, with the reason.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from apple_flow.sizes import human_size

ATTACH_HINT = (
    "To send the user a file of the workspace, end your answer with one line per file: ATTACH: <path of the file>"
)
_ATTACH_LINE = re.compile(r"^[ \t]*(?:[-*][ \t]+)?ATTACH[ \t]*:[ \t]*(.*?)[ \t]*$", re.IGNORECASE | re.MULTILINE)
# "send me the log", "send it back", "text me the file", "attach the diff", "give me the patch as a file"
_ASKS_FOR_FILE = re.compile(
    r"\b(?:send|text|give|mail)\b[^.?!\n]{0,40}?\b(?:me|back)\b|\battach(?:ed|ment|ments)?\b|\bas an? file\b",
    re.IGNORECASE,
)
_QUOTES = "`'\"<>"


@dataclass(frozen=True)
class Outgoing:
    """One file the answer named: ``path`` (resolved, inside the workspace) when it may go, else ``problem``."""

    shown: str  # as named (relative to the workspace), for the reply
    path: Path | None = None
    size: int = 0
    problem: str = ""


def asks_for_file(request: str) -> bool:
    """Whether the user's words ask to be sent a file."""
    return bool(_ASKS_FOR_FILE.search(request))


def take_attach_lines(answer: str) -> tuple[str, list[str]]:
    """The answer without its ``ATTACH:`` lines, and the paths they name (in order, each once)."""
    paths: list[str] = []
    for match in _ATTACH_LINE.finditer(answer):
        path = match.group(1).strip().strip(_QUOTES).strip()
        if path and path not in paths:
            paths.append(path)
    if not paths and not _ATTACH_LINE.search(answer):
        return answer, []
    text = _ATTACH_LINE.sub("", answer)
    return re.sub(r"\n{3,}", "\n\n", text).strip(), paths


def check(named: str, workspace: Path, max_bytes: int) -> Outgoing:
    """Whether the file ``named`` (relative to ``workspace``, or absolute) may be sent."""
    shown = _shown(named)
    if not named or "\x00" in named:
        return Outgoing(shown, problem="no file name")
    root = Path(os.path.realpath(workspace))
    candidate = Path(named).expanduser() if named.startswith("~") else Path(named)
    if not candidate.is_absolute():
        candidate = Path(workspace) / candidate
    real = Path(os.path.realpath(candidate))
    if real != root and not real.is_relative_to(root):
        return Outgoing(shown, problem="outside the workspace")
    try:
        info = os.stat(real)
    except OSError:
        return Outgoing(shown, problem="no such file")
    if not stat.S_ISREG(info.st_mode):
        return Outgoing(shown, problem="not a file")
    if info.st_size > max_bytes:
        return Outgoing(shown, problem=f"too large ({human_size(info.st_size)}; the limit is {human_size(max_bytes)})")
    return Outgoing(shown, real, info.st_size)


def check_all(named: Iterable[str], workspace: Path, max_bytes: int, max_files: int) -> list[Outgoing]:
    checked: list[Outgoing] = []
    for index, name in enumerate(named):
        if index >= max_files:
            reason = "sending files is turned off" if max_files == 0 else f"at most {max_files} files a reply"
            checked.append(Outgoing(_shown(name), problem=reason))
        else:
            checked.append(check(name, workspace, max_bytes))
    return checked


def note(outgoing: list[Outgoing]) -> str:
    """What the reply says about the files: those being sent, and those not, with why."""
    lines: list[str] = []
    going = [f"{o.shown} ({human_size(o.size)})" for o in outgoing if o.path is not None]
    if going:
        lines.append("Sending: " + ", ".join(going) + ".")
    lines += [f"Not sent: {o.shown} ({o.problem})." for o in outgoing if o.path is None]
    return "\n".join(lines)


def _shown(named: str) -> str:
    flat = "".join(c if c.isprintable() else " " for c in named).strip()
    return flat if len(flat) <= 80 else flat[:79] + "…"
