"""The service tells the owner on the phone what it would otherwise only write to its log: that it is ready (the
first time its permissions are complete), and that it can no longer read messages (Full Disk Access gone, while
Messages still lets it send), once, with what to grant.

After an install that replaced Apple Flow.app with other bytes (``app_bundle.replaced_by``) while chat.db is refused,
the warning says that the grant went to the old build and how to give it again, once per build.

It listens to the permission report (``PermissionMonitor.listen``) and sends through the daemon's own send, under
the lock that its replies use. What it said is kept in the store, so a restart neither repeats the welcome nor the
warning; the warning may come again only after chat.db was readable in between.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from apple_flow.channels.imessage.permissions import AUTOMATION, CHAT_DB, PermissionReport
from apple_flow.check_result import CheckStatus
from apple_flow.daemon.store import Store

log = logging.getLogger(__name__)

READY_KEY = "owner_told_ready"
CHAT_DB_LOST_KEY = "owner_told_chat_db_lost"
REBUILT_KEY = "owner_told_rebuilt"  # the code hash of the build the owner was told to give the grant again

# Returns why the text could not be sent, or None (the daemon's ``send_notice``).
Send = Callable[[str, str], "str | None"]


def ready_text(app: str) -> str:
    return (
        f"{app} is ready on your Mac: it reads the texts you send here and answers them. Text `help` to see what it "
        "can do, or just ask, e.g. `what is in my workspace?`"
    )


def chat_db_lost_text(app: str, fix: str) -> str:
    return f"{app} can no longer read your messages (Full Disk Access is off for it). On the Mac: {fix}."


def rebuilt_text(app: str, steps: str) -> str:
    return (
        f"{app} on your Mac is a new build, and macOS no longer applies the Full Disk Access given to the old one "
        f"(System Settings may still show it switched on). On the Mac: {steps}."
    )


@dataclass(frozen=True)
class Rebuilt:
    """The service's app was replaced by other bytes at its install: the grants went to the old build."""

    code_hash: str
    steps: str  # how to give Full Disk Access again


class OwnerNotices:
    """See the module docstring. ``owner`` None (no allowed sender): nobody to tell, nothing sent."""

    def __init__(self, store: Store, owner: str | None, rebuilt: Rebuilt | None = None) -> None:
        self._store = store
        self._owner = owner
        self._rebuilt = rebuilt
        self._send: Send | None = None
        self._lock = threading.Lock()
        self._last: PermissionReport | None = None

    def attach(self, send: Send) -> None:
        """From now on texts go through ``send``; what the last report called for goes now."""
        with self._lock:
            self._send = send
            last = self._last
        if last is not None:
            self.update(last)

    def update(self, report: PermissionReport) -> None:
        """A permission report changed (any thread)."""
        with self._lock:
            self._last = report
            send, owner = self._send, self._owner
            if send is None or owner is None:
                return
            states = {finding.name: finding for finding in report.findings}
            chat_db, automation = states.get(CHAT_DB), states.get(AUTOMATION)
            if chat_db is None or automation is None or automation.status is not CheckStatus.OK:
                return  # it cannot send (or does not know yet): nothing to say, nothing to remember
            if chat_db.status is CheckStatus.OK:
                self._store.meta.set(CHAT_DB_LOST_KEY, "")
                if not self._store.meta.get(READY_KEY):
                    self._tell(send, owner, READY_KEY, ready_text(report.app))
            elif chat_db.status is CheckStatus.DENIED and self._rebuilt is not None and self._store.meta.get(
                REBUILT_KEY
            ) != self._rebuilt.code_hash:
                if self._tell(send, owner, REBUILT_KEY, rebuilt_text(report.app, self._rebuilt.steps),
                              self._rebuilt.code_hash):
                    self._store.meta.set(CHAT_DB_LOST_KEY, "sent")  # said already, with the better reason
            elif chat_db.status is CheckStatus.DENIED and self._store.meta.get(READY_KEY) and not self._store.meta.get(
                CHAT_DB_LOST_KEY
            ):
                self._tell(send, owner, CHAT_DB_LOST_KEY, chat_db_lost_text(report.app, chat_db.fix))

    def _tell(self, send: Send, owner: str, key: str, text: str, value: str = "sent") -> bool:
        problem = send(owner, text)
        if problem is not None:
            log.warning("could not text the owner (%s): %s", key, problem)
            return False  # not remembered: the next change tries again
        self._store.meta.set(key, value)
        self._store.events.log("owner_notice", key, owner)
        return True
