"""The console channel: the local user types, the daemon answers in the terminal. Runs anywhere, so the whole
path (orchestrator, connector, agent) can be tried without Messages.

Two renderings of one channel: plain (``apple-flow run --channel console``: one message per input line, replies
on stdout, progress on stderr; scriptable) and rich (``apple-flow chat``: a prompt, rendered replies, live
progress)."""

from __future__ import annotations

import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

from rich.console import Console
from rich.markdown import Markdown
from rich.markup import escape
from rich.panel import Panel

from apple_flow.channels.base import Channel, ChannelNeeds, Egress, InboundMessage, Ingress, Senders, Skipped

CONSOLE_SENDER = "console"


class ConsoleSenders(Senders):
    """The one sender is the person at this terminal: no allowlist entry needed."""

    def is_local(self, sender: str) -> bool:
        return sender == CONSOLE_SENDER


def build(needs: ChannelNeeds) -> Channel:
    """Plain lines on stdin and stdout, or (``needs.terminal``: `apple-flow chat`) the rich rendering. Each session
    has its own key: its line numbers start again at 1."""
    key = f"console:{uuid.uuid4().hex[:12]}"
    if needs.terminal:
        rich = RichConsoleChannel()
        return Channel(key, rich.ingress(), rich, ConsoleSenders())
    return Channel(key, ConsoleIngress.from_stream(sys.stdin), PlainConsoleEgress(sys.stdout, sys.stderr),
                   ConsoleSenders())


class ConsoleIngress(Ingress):
    """One message per non-blank line of ``lines``; rowids count lines from 1 within this session."""

    def __init__(self, read_line: Callable[[], str]) -> None:
        self._read_line = read_line  # returns "" at end of input

    @classmethod
    def from_stream(cls, stream: TextIO) -> ConsoleIngress:
        return cls(stream.readline)

    def messages(self, after_rowid: int, stop: threading.Event) -> Iterator[InboundMessage | Skipped]:
        number = 0
        while not stop.is_set():
            line = self._read_line()
            if not line:
                return
            number += 1
            text = line.strip()
            if number <= after_rowid or not text:
                continue
            yield InboundMessage(rowid=number, sender=CONSOLE_SENDER, text=text, date=datetime.now(UTC))


class PlainConsoleEgress(Egress):
    """Replies on ``out`` (each followed by a blank line, so multi-line replies stay apart); progress on ``err``."""

    def __init__(self, out: TextIO, err: TextIO) -> None:
        self._out = out
        self._err = err

    def send(self, recipient: str, text: str) -> None:
        self._out.write(text.rstrip() + "\n\n")
        self._out.flush()

    def send_progress(self, recipient: str, text: str) -> None:
        self._err.write(text + "\n")
        self._err.flush()

    def send_file(self, recipient: str, path: Path) -> None:
        """There is no phone to send to: shows which file would go."""
        self._out.write(f"[file] would send {would_send(path)}\n\n")
        self._out.flush()


class RichConsoleChannel(Egress):
    """``apple-flow chat``: a prompt to type at, replies rendered as Markdown in a panel, progress in grey."""

    def __init__(self, console: Console | None = None) -> None:
        self._console = console or Console()
        self._lock = threading.Lock()

    def read_line(self) -> str:
        # The prompt only where someone types; piped input gets none.
        prompt = "[bold cyan]you ›[/] " if sys.stdin.isatty() else ""
        try:
            return self._console.input(prompt) + "\n"
        except EOFError:
            return ""

    def ingress(self) -> ConsoleIngress:
        return ConsoleIngress(self.read_line)

    def send(self, recipient: str, text: str) -> None:
        with self._lock:
            self._console.print(Panel(Markdown(text), title="apple-flow", title_align="left", border_style="green"))

    def send_progress(self, recipient: str, text: str) -> None:
        with self._lock:
            self._console.print(f"[dim]{text}[/dim]", highlight=False)

    def send_file(self, recipient: str, path: Path) -> None:
        with self._lock:
            self._console.print(f"[cyan]📎 would send {escape(would_send(path))}[/cyan]", highlight=False)


def would_send(path: Path) -> str:
    """The file the console would send, with its size."""
    try:
        size = f"{path.stat().st_size} bytes"
    except OSError as exc:
        size = f"unreadable: {exc.strerror}"
    return f"{path} ({size})"
