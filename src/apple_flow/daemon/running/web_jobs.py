"""Tasks approved on the web page: no message carries them, so their run is recorded as queued with the approval
(``store.web_runs``) and their answer before it is sent; a restart runs again what did not finish and sends what was
recorded but not sent (``WebLedger.resume``)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from apple_flow.channels.base import Noted
from apple_flow.daemon.deciding.decisions import Turn
from apple_flow.daemon.running.sending import ReplySender
from apple_flow.daemon.store import WEB_REPLY_PREFIX, Approval, Store, web_reply

log = logging.getLogger(__name__)


class WebLedger:
    def __init__(self, store: Store, sender: ReplySender) -> None:
        self._store = store
        self._sender = sender

    def work(self, approval: Approval, turn: Turn) -> WebWork:
        return WebWork(turn, self, approval, turn.sender, None)

    def resume(self) -> list[Approval]:
        """At start-up: sends the answers recorded but not sent (and the files a stop cut short); returns the
        requests whose run did not finish, to run again."""
        rerun = []
        for approval, reply in self._store.web_runs.unfinished():
            if reply is None:
                log.info("%s was approved on the web page and did not finish: running it again", approval.id)
                rerun.append(approval)
            else:
                self.send(approval, reply)
        for reply_of in self._store.reply_files.replies_with_unsent(WEB_REPLY_PREFIX):  # answers sent, files not
            self._sender.send_reply_files(reply_of)
        return rerun

    def record(self, approval: Approval, reply: str | None, files: Sequence[tuple[str, str]] = (),
               recipient: str = "", workspace: Path | None = None) -> None:
        """The answer recorded on the web run, and the ``files`` that go to ``recipient`` with it (from
        ``workspace``)."""
        self._store.web_runs.record_web_reply(approval.id, reply)
        if files:
            self._store.reply_files.record_files(web_reply(approval.id), recipient, approval.sender, str(workspace),
                                                 files)

    def send(self, approval: Approval, reply: str, noted: Noted | None = None) -> None:
        """Sends the recorded answer, marks it sent (a web run has no message whose row the channel could be asked
        about after a crash: an answer handed over is never sent again), then its files. The channel's confirmation
        is waited for on a thread of the outbound side (the sender's next turn does not wait for it), which reports
        an answer that did not go out."""
        handed = self._sender.hand_over(approval.sender, reply, noted=noted)
        with self._store.transaction():
            self._store.web_runs.mark_web_sent(approval.id)
            self._failed(approval, handed.failed)
        self._sender.send_reply_files(web_reply(approval.id))
        if handed.pending:
            self._sender.when_confirmed(handed, lambda failed: self._failed(approval, failed))

    def _failed(self, approval: Approval, failed: str | None) -> None:
        if failed is not None:
            self._store.events.log("send_failed", failed, approval.sender)


@dataclass(frozen=True)
class WebWork:
    """A task approved on the web page; its answer goes to the sender."""

    turn: Turn
    replies: WebLedger
    approval: Approval
    recipient: str
    run_message: None

    def take(self) -> None:
        """Recorded as queued when it was approved (``store.web_runs``)."""

    def withdrawn(self) -> bool:
        return False

    def files_note(self) -> str:
        return ""

    def record_reply(self, reply: str | None, files: Sequence[tuple[str, str]] = ()) -> None:
        self.replies.record(self.approval, reply, files, self.recipient, self.turn.workspace)

    def answer(
        self, reply: str | None, approval_id: str | None = None, noted: Noted | None = None, with_files: bool = True
    ) -> None:
        if reply is not None:  # an approved task's answer: it presents no new plan
            self.replies.send(self.approval, reply, noted)

    def dropped(self) -> None:
        self.replies.record(self.approval, None)
