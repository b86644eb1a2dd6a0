"""Runs the daemon in a thread of the test process with the fakes of ``daemon_fakes`` and a real store, built by
``apple_flow.assemble`` as `apple-flow run` builds it."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from apple_flow.assemble import TurnConnectors, assemble
from apple_flow.channels.base import Channel
from apple_flow.channels.imessage.channel import IMessageSenders
from apple_flow.config import Settings
from apple_flow.daemon.store import Store
from support.daemon_fakes import FakeConnector, ListIngress, RecordingEgress
from support.daemon_process import wait_for

ANA = "+15551234567"
BOB = "ana@example.com"  # second allowed sender


def wait_until(condition: Callable[[], Any], timeout: float = 5.0) -> Any:
    return wait_for(condition, timeout, "the condition")


def ask(h: Harness, sender: str, text: str, rowid: int | None = None) -> str:
    """Sends ``text`` as ``sender`` (as row ``rowid``: the next one unless given) and returns the next reply to
    them."""
    before = len(h.egress.to(sender))
    h.ingress.add(sender, text, rowid)
    return str(wait_until(lambda: h.egress.to(sender)[before] if len(h.egress.to(sender)) > before else None))


class Harness:
    def __init__(
        self, settings: Settings, connector: FakeConnector | None = None, channel: str = "imessage",
        escalation: FakeConnector | None = None, login_links: bool = True,
    ) -> None:
        """``channel``: the key the store records its rows under. The list ingress stands in for iMessage's (its
        senders in iMessage's form); ``login_links`` False: a channel that carries no login links."""
        self.settings = settings
        self.store = Store(settings.db_path)
        self.connector = connector or FakeConnector()
        self.escalation = escalation  # the APPLE_FLOW_ESCALATE_CONNECTOR's connector
        self.ingress = ListIngress()
        self.egress = RecordingEgress()
        built = Channel(channel, self.ingress, self.egress, IMessageSenders(settings.default_region),
                        carries_links=login_links)
        self.daemon = assemble(settings, self.store, built, TurnConnectors(self.connector, escalation))
        self.status: int | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        self.status = self.daemon.run()

    def start(self) -> Harness:
        self._thread.start()
        wait_until(self.daemon.ready.is_set)
        return self

    def finish(self, timeout: float = 10) -> int | None:
        """Ends the input and waits for the daemon to drain and return."""
        self.ingress.close()
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "the daemon did not finish"
        return self.status

    def stop(self, timeout: float = 10) -> None:
        self.daemon.request_stop()
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "the daemon did not stop"


