"""Files that came with a message: copied into the turn's workspace under ``.apple-flow/inbox/`` (where the agent
reads them with its own tools), and the note that tells the agent what arrived, where, and what did not.

The channel has checked where each file is (``Attachment.source``); here the copy is made safe on the workspace's
side: ``.apple-flow`` and ``inbox`` must be real folders (never a link to elsewhere), each copy is a new file
(``O_EXCL``, never an existing one of the workspace's), named ``<message>-<n>-<sender's name made safe>``, read
through ``O_NOFOLLOW`` and cut off at the size limit even if the source grows meanwhile.
"""

from __future__ import annotations

import logging
import os
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from apple_flow.channels.base import Attachment
from apple_flow.regularfile import FileTooLarge, NotRegularFile, UnreadableFile, open_regular
from apple_flow.sizes import human_size

log = logging.getLogger(__name__)

INBOX = ".apple-flow/inbox"
NOTE_MAX_CHARS = 700  # the whole note; it goes into the 3,000-character prompt
_NAME_MAX = 80
_CHUNK = 1 << 20
_SNIFF = 8192
_BINARY_MEDIA = ("image/", "audio/", "video/")


@dataclass(frozen=True)
class FileLimits:
    file_bytes: int
    message_bytes: int


@dataclass(frozen=True)
class Arrival:
    """One attachment as the agent will hear of it: copied to ``path`` (relative to the workspace), or not, and
    why (``problem``)."""

    name: str
    mime_type: str
    size: int
    path: str | None = None
    text: bool = False  # the agent can read it with its tools
    problem: str = ""


class _Refused(Exception):
    pass


def receive(attachments: Sequence[Attachment], workspace: Path, rowid: int, limits: FileLimits) -> list[Arrival]:
    """Copies what can be copied into ``workspace/.apple-flow/inbox/``. Never raises: what fails is an
    ``Arrival`` with its ``problem``."""
    try:
        inbox = _open_inbox(workspace)
    except _Refused as exc:
        log.warning("attachments of message %d not stored in %s: %s", rowid, workspace, exc)
        return [Arrival(a.name, a.mime_type, a.size, problem=a.problem or str(exc)) for a in attachments]
    arrivals: list[Arrival] = []
    left = limits.message_bytes
    try:
        for index, attachment in enumerate(attachments, start=1):
            if attachment.source is None:
                arrivals.append(Arrival(attachment.name, attachment.mime_type, attachment.size,
                                        problem=attachment.problem or "not available"))
                continue
            try:
                arrival = _copy(attachment, attachment.source, inbox, f"{rowid}-{index}", limits.file_bytes, left)
            except _Refused as exc:
                arrival = Arrival(attachment.name, attachment.mime_type, attachment.size, problem=str(exc))
            except OSError as exc:
                log.warning("attachment %r of message %d not copied: %s", attachment.name, rowid, exc)
                arrival = Arrival(attachment.name, attachment.mime_type, attachment.size,
                                  problem=f"could not be copied ({exc.strerror or exc})")
            if arrival.path is not None:
                left -= arrival.size
            arrivals.append(arrival)
    finally:
        os.close(inbox)
    return arrivals


def _open_inbox(workspace: Path) -> int:
    """A descriptor of ``workspace/.apple-flow/inbox``, made if missing; each part must be a real folder."""
    try:
        fd = os.open(workspace, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as exc:
        raise _Refused(f"the workspace cannot be opened ({exc.strerror})") from None
    for part in INBOX.split("/"):
        try:
            os.mkdir(part, 0o700, dir_fd=fd)
        except FileExistsError:
            pass
        except OSError as exc:
            os.close(fd)
            raise _Refused(f"{part} cannot be made in the workspace ({exc.strerror})") from None
        try:
            child = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
        except OSError:
            os.close(fd)
            raise _Refused(f"{part} in the workspace is a link or a file, not a folder: not used") from None
        os.close(fd)
        fd = child
    return fd


def _copy(attachment: Attachment, source: Path, inbox: int, prefix: str, cap: int, left: int) -> Arrival:
    try:
        reader, size = open_regular(source, cap)
    except UnreadableFile as exc:
        raise _Refused(f"could not be read ({exc.strerror})") from None
    except NotRegularFile:
        raise _Refused("it is not a regular file") from None
    except FileTooLarge as exc:
        raise _Refused(f"too large ({human_size(exc.size)}; the limit is {human_size(cap)} a file)") from None
    try:
        if size > left:
            raise _Refused(f"over the limit for one message's files ({human_size(size)}; "
                           f"{human_size(max(left, 0))} left)")
        name, writer = _create(inbox, f"{prefix}-{safe_name(attachment.name)}")
        try:
            copied, head = _pump(reader, writer, min(cap, left))
        except BaseException:
            os.close(writer)
            os.unlink(name, dir_fd=inbox)
            raise
        os.close(writer)
    finally:
        os.close(reader)
    return Arrival(attachment.name, attachment.mime_type, copied, f"{INBOX}/{name}",
                   looks_like_text(head, attachment.mime_type))


def _pump(reader: int, writer: int, cap: int) -> tuple[int, bytes]:
    """Copies until the end; past ``cap`` bytes (the file grew since it was measured) it is refused."""
    copied = 0
    head = b""
    while chunk := os.read(reader, _CHUNK):
        copied += len(chunk)
        if copied > cap:
            raise _Refused(f"it grew past the limit of {human_size(cap)} while being copied")
        if len(head) < _SNIFF:
            head += chunk[: _SNIFF - len(head)]
        view = memoryview(chunk)
        while view:
            view = view[os.write(writer, view):]
    return copied, head


def _create(inbox: int, name: str) -> tuple[str, int]:
    """A new file in the inbox (never an existing one): ``name``, else ``name`` with ``-2``, ``-3`` ..."""
    stem, dot, extension = name.rpartition(".")
    if not dot or not stem:
        stem, dot, extension = name, "", ""
    for attempt in range(1, 1000):
        candidate = name if attempt == 1 else f"{stem}-{attempt}{dot}{extension}"
        try:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
            return candidate, os.open(candidate, flags, 0o600, dir_fd=inbox)
        except FileExistsError:
            continue
    raise _Refused("the inbox holds too many files of that name")


def safe_name(name: str) -> str:
    """The sender's file name as one harmless path part: its last part only, letters, digits, ``.-_`` (others
    become ``_``), no leading dot, at most 80 characters with its extension kept."""
    last = unicodedata.normalize("NFC", name).replace("\\", "/").rsplit("/", 1)[-1]
    cleaned = "".join(c if c.isalnum() or c in ".-_" else "_" for c in last).lstrip(".")
    if not cleaned.strip("_"):
        return "file"
    if len(cleaned) <= _NAME_MAX:
        return cleaned
    stem, dot, extension = cleaned.rpartition(".")
    if dot and stem and len(extension) <= 10:
        return stem[: _NAME_MAX - len(extension) - 1] + "." + extension
    return cleaned[:_NAME_MAX]


def looks_like_text(head: bytes, mime_type: str = "") -> bool:
    """Whether a file beginning with ``head`` is text the agent can read: no NUL byte, valid UTF-8 (a character
    cut by the sample's end allowed), and not declared an image, sound or video."""
    if mime_type.lower().startswith(_BINARY_MEDIA) or b"\x00" in head:
        return False
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start >= len(head) - 3 and len(head) >= _SNIFF
    return True


def describe(arrivals: Sequence[Arrival], max_chars: int = NOTE_MAX_CHARS) -> str:
    """The note for the agent's prompt, at most ``max_chars``: each file's place, type and size, or why it is
    missing; files that do not fit are counted."""
    if not arrivals:
        return ""
    head = f"The user sent {_count(len(arrivals))} with this message:"
    lines = [head]
    used = len(head)
    for index, arrival in enumerate(arrivals):
        line = "- " + _line(arrival)
        rest = len(arrivals) - index - 1
        tail = len(f"\n- and {rest + 1} more in {INBOX}/") if rest else 0
        if used + 1 + len(line) + tail > max_chars:
            lines.append(f"- and {len(arrivals) - index} more in {INBOX}/")
            break
        lines.append(line)
        used += 1 + len(line)
    return "\n".join(lines)[:max_chars]


def _line(arrival: Arrival) -> str:
    kind = arrival.mime_type or "unknown type"
    if arrival.path is None:
        return f"{_shown(arrival.name)}: not received ({arrival.problem})"
    if arrival.text:
        return f"{arrival.path} ({human_size(arrival.size)}, text): read it with your file tools"
    return f"{arrival.path} ({kind}, {human_size(arrival.size)}): not text, you cannot read it"


def _shown(name: str) -> str:
    flat = "".join(c if c.isprintable() else " " for c in name).strip()
    return flat if len(flat) <= 60 else flat[:59] + "…"


def _count(n: int) -> str:
    return "1 file" if n == 1 else f"{n} files"
