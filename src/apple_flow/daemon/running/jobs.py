"""The work a worker thread runs: one agent turn, and where its answer goes. Work comes from two origins, a message
(``message_jobs``) and a task approved on the web page (``web_jobs``); each kind carries what differs, computed
once where it is created, so the runtime runs either the same way."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from apple_flow.channels.base import Noted
from apple_flow.daemon.deciding.decisions import Turn


class Work(Protocol):
    @property
    def turn(self) -> Turn: ...

    @property
    def recipient(self) -> str:
        """Where the turn's progress and reply go (the sender, or e.g. the group chat the message came from)."""
        ...

    @property
    def run_message(self) -> str | None:
        """The message the run answers ("channel:rowid"), kept with the run."""
        ...

    def take(self) -> None:
        """It starts: recorded as taken (a message), in the caller's transaction with the run's start."""
        ...

    def withdrawn(self) -> bool:
        """True when it must not run any more (e.g. the message was unsent while it waited); that is then
        recorded and said."""
        ...

    def files_note(self) -> str:
        """Receives the files that came with it into the turn's workspace: the note telling the agent about them."""
        ...

    def record_reply(self, reply: str | None, files: Sequence[tuple[str, str]] = ()) -> None:
        """Records the answer before it is sent, in the caller's transaction (None: nothing to send), with the
        files that go with it ((as named, path), ``store.reply_files``, under the reply's own name)."""
        ...

    def answer(
        self, reply: str | None, approval_id: str | None = None, noted: Noted | None = None, with_files: bool = True
    ) -> None:
        """Once recorded: sends the answer and its files (None: nothing to send; ``with_files`` False: it has
        none), and lets the cursor pass. A reply presenting the plan of ``approval_id`` is noted with it, by the ids
        the channel gave it (tapbacks). ``noted``: the channel's record of sent texts has it already
        (``ReplySender.note``)."""
        ...

    def dropped(self) -> None:
        """Dropped by `cancel` before it ran: recorded as finished, in the caller's transaction."""
        ...
