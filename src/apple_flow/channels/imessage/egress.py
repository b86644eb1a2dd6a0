"""The iMessage egress: replies sent through Messages with AppleScript, split into numbered parts, each part
recorded for echo suppression before it is sent and confirmed from chat.db after (``delivery.py``); files sent as
attachments from a staged copy (``staging.py``), their path an argument of the script like any text, and confirmed
the same way. A progress line is checked too, but only for its row (not waited on until Messages sends it)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from apple_flow.app_bundle import running_app
from apple_flow.channels.base import Egress, Handover, Noted, SendError, SentTexts
from apple_flow.channels.imessage.attachments import MESSAGES_PREFIX
from apple_flow.channels.imessage.chatdb import ChatDB, ChatDBError
from apple_flow.channels.imessage.classify import files_echo_text
from apple_flow.channels.imessage.delivery import Evidence, already_sent, confirm, confirm_file
from apple_flow.channels.imessage.osascript import (
    OsascriptMissing,
    ScriptResult,
    ScriptTimeout,
    read_argument,
    run_osascript_private,
)
from apple_flow.channels.imessage.outgoing import OutgoingText, Target
from apple_flow.channels.imessage.staging import stage

log = logging.getLogger(__name__)


def _send_script(target: str) -> str:
    """A script sending the text to ``target`` (an expression using ``targetHandle``). Data never enters the
    source, nor osascript's argv: the handle and text are read from the private files ``argv`` names."""
    return f"""on run argv
	set targetHandle to {read_argument(1)}
	set messageText to {read_argument(2)}
	tell application "Messages"
		set targetRecipient to {target}
		send messageText to targetRecipient
	end tell
end run
"""


def _send_file_script(target: str) -> str:
    """A script sending the file whose POSIX path is the second value to ``target``: the path too is only ever data
    (read from the private file ``argv`` names), made a file reference by ``POSIX file`` at run time."""
    return f"""on run argv
	set targetHandle to {read_argument(1)}
	set theFile to POSIX file {read_argument(2)}
	tell application "Messages"
		set targetRecipient to {target}
		send theFile to targetRecipient
	end tell
end run
"""


# `participant` of the iMessage account is the form reported working on macOS 26. The older `buddy` form exits 0
# and delivers nothing on recent macOS, so it is only tried when the participant form fails, and never preferred.
PARTICIPANT = "participant targetHandle of (1st account whose service type = iMessage)"
BUDDY = "buddy targetHandle of (1st service whose service type = iMessage)"
# Senders who wrote by SMS (or RCS) are not reachable over iMessage; the SMS account reaches them when the Mac has
# Text Message Forwarding from an iPhone.
SMS = "participant targetHandle of (1st account whose service type = SMS)"
# A group by its guid. macOS 26 stores group guids as `any;+;chat…` and refuses them with -1728 (openclaw/imsg#90);
# `iMessage;+;chat…` is tried next, the form reported working (carterlasalle/mac_messages_mcp#48).
GROUP = "chat id targetHandle"
PARTICIPANT_SCRIPT = _send_script(PARTICIPANT)
BUDDY_SCRIPT = _send_script(BUDDY)
SMS_SCRIPT = _send_script(SMS)
GROUP_SCRIPT = _send_script(GROUP)
TEXT_SCRIPTS = {"participant": PARTICIPANT_SCRIPT, "buddy": BUDDY_SCRIPT, "sms": SMS_SCRIPT, "group": GROUP_SCRIPT}
FILE_SCRIPTS = {form: _send_file_script(target) for form, target in
                (("participant", PARTICIPANT), ("buddy", BUDDY), ("sms", SMS), ("group", GROUP))}
GROUP_LIMIT = (
    "sending into a group chat by AppleScript is reported to fail on macOS 26 (openclaw/imsg#90); turn "
    "APPLE_FLOW_GROUP_REPLIES off to have group messages skipped instead"
)

AUTOMATION_HINT = (
    "allow the app running apple-flow to control Messages in System Settings > Privacy & Security > Automation "
    "(run `apple-flow send <your handle> test` once from a terminal to get the prompt)"
)


def automation_hint() -> str:
    """What to switch on: for the service, Messages under its own app (it probes, so macOS asks, by itself)."""
    app = running_app()
    if app is not None:
        return f"switch on Messages under {app.stem} in System Settings > Privacy & Security > Automation"
    return AUTOMATION_HINT


def is_automation_denied(result: ScriptResult) -> bool:
    return "-1743" in result.stderr or "Not authorized to send Apple events" in result.stderr


@dataclass(frozen=True)
class Delivery:
    """What became of a text: ``confirmed`` when chat.db shows every part as sent; ``note`` says what it shows."""

    recipient: str
    parts: int
    confirmed: bool
    note: str
    guids: tuple[str, ...] = ()  # chat.db's guid of each part found there


@dataclass(frozen=True)
class _PartsGiven:
    """The parts of a text osascript took, each with the newest chat.db row before it (None: not to be confirmed;
    a ``ChatDBError``: chat.db could not tell), and how far to confirm them (``until_sent``: not only their row)."""

    target: Target
    parts: list[tuple[str, int | ChatDBError | None]]
    until_sent: bool


@dataclass(frozen=True)
class _NotedParts(Noted):
    """A text noted part by part (``note``): sent as it was worked out then."""

    outgoing: OutgoingText | None = None


class IMessageEgress(Egress):
    def __init__(
        self,
        *,
        osascript_command: str,
        timeout_seconds: float,
        retries: int,
        retry_backoff_seconds: float,
        chunk_chars: int,
        default_region: str,
        sent: SentTexts | None,
        chat_db: Path | None = None,
        confirm_seconds: float = 0,
        sleep: Callable[[float], None] = time.sleep,
        attachments_root: Path = Path(MESSAGES_PREFIX),
        file_max_bytes: int = 25_000_000,
    ) -> None:
        self._attachments_root = attachments_root  # files to send are staged in here (staging.py)
        self._file_max_bytes = file_max_bytes
        self._command = osascript_command
        self._timeout = timeout_seconds
        self._retries = retries
        self._backoff = retry_backoff_seconds
        self._chunk_chars = chunk_chars
        self._region = default_region
        self._sent = sent
        self._db = ChatDB(chat_db) if chat_db is not None and confirm_seconds > 0 else None
        self._confirm_seconds = confirm_seconds
        self._sleep = sleep
        # One text at a time per chat, so that the parts of two replies to one chat never interleave; texts to
        # different chats go at once (each osascript waits for Messages on its own).
        self._locks: dict[str, threading.Lock] = {}
        self._locks_lock = threading.Lock()

    def send(self, recipient: str, text: str) -> tuple[str, ...]:
        """Sends ``text`` to ``recipient`` (a handle, ``SMS;-;<handle>`` or a group chat's guid) and confirms each
        part from chat.db; returns the parts' guids found there. Raises ``SendError`` when a part did not go out."""
        return self.deliver(recipient, text).guids

    def send_progress(self, recipient: str, text: str) -> None:
        """A progress line: its row is looked for in chat.db (an exit 0 without one is a failure, raised), but
        Messages is not waited on to send it."""
        self.deliver(recipient, text, until_sent=False)

    def note(self, recipient: str, text: str) -> Noted:
        """Notes each part of ``text`` for echo suppression, as ``hand_over`` would just before sending it."""
        outgoing = OutgoingText.of(recipient, text, self._region, self._chunk_chars)
        if self._sent is not None:
            for echo in outgoing.echoes:
                self._sent.record(outgoing.target.address, echo)
        return _NotedParts(recipient, text, outgoing)

    def hand_over(self, recipient: str, text: str, progress: bool = False, noted: Noted | None = None) -> Handover:
        """Sends ``text`` as ``send`` (``send_progress``) does, up to its confirmation from chat.db, which is
        returned to be waited for later (raising ``SendError`` as ``send`` does). Nothing to confirm when sends
        are not confirmed (``send_confirm_seconds`` 0, or no chat.db). ``noted``: its parts as ``note`` noted
        them."""
        handed = self._hand_over(recipient, text, until_sent=not progress, noted=noted)
        if self._db is None:
            return Handover(ids=())

        def confirm() -> tuple[str, ...]:
            return self._confirm(handed).guids

        return Handover(confirm=confirm)

    def deliver(self, recipient: str, text: str, until_sent: bool = True) -> Delivery:
        return self._confirm(self._hand_over(recipient, text, until_sent))

    def _lock_for(self, target: Target) -> threading.Lock:
        with self._locks_lock:
            return self._locks.setdefault(f"{target.kind}:{target.address}", threading.Lock())

    def _hand_over(
        self, recipient: str, text: str, until_sent: bool, noted: Noted | None = None
    ) -> _PartsGiven:
        """Gives each part of ``text`` to Messages, in order, under the chat's lock (the parts of two texts to one
        chat never interleave; texts to different chats go at once). Parts ``noted`` already are not noted again."""
        if isinstance(noted, _NotedParts) and noted.outgoing is not None and (noted.recipient, noted.text) == (
            recipient, text
        ):
            outgoing, record = noted.outgoing, False
        else:
            outgoing, record = OutgoingText.of(recipient, text, self._region, self._chunk_chars), True
        target, total = outgoing.target, len(outgoing.parts)
        with self._lock_for(target):
            handed = [(part, self._send_numbered(target, part, echo, index, total, record))
                      for index, (part, echo) in enumerate(zip(outgoing.parts, outgoing.echoes, strict=True), start=1)]
        return _PartsGiven(target, handed, until_sent)

    def _confirm(self, handed: _PartsGiven) -> Delivery:
        """Each part's evidence from chat.db (waiting up to ``confirm_seconds`` for each). Raises ``SendError``
        when a part shows an error or left no row."""
        notes: list[Evidence] = []
        total = len(handed.parts)
        for index, (part, before) in enumerate(handed.parts, start=1):
            try:
                notes.append(self._evidence(handed.target, part, before, handed.until_sent))
            except SendError as exc:
                if total > 1:
                    raise SendError(f"{exc} (part {index} of {total})") from exc
                raise
        unconfirmed = [note for note in notes if not note.confirmed]
        shown = unconfirmed[0].note if unconfirmed else (notes[-1].note if notes else "nothing to send")
        return Delivery(handed.target.describe(), total, not unconfirmed and bool(notes), shown,
                        tuple(note.guid for note in notes if note.guid))

    def went_out(self, recipient: str, text: str, after_rowid: int) -> bool:
        """Whether chat.db shows ``text`` sent to ``recipient`` after row ``after_rowid`` (a reply recorded before
        a crash may have gone out before the daemon could note it). False when chat.db cannot tell."""
        if self._db is None:
            return False
        outgoing = OutgoingText.of(recipient, text, self._region, self._chunk_chars)
        try:
            return already_sent(self._db, outgoing.target, list(outgoing.parts), after_rowid, self._region)
        except ChatDBError as exc:
            log.warning("cannot tell whether the reply to %s went out: %s", outgoing.target.describe(), exc)
            return False

    def _send_numbered(
        self, target: Target, part: str, echo: str, index: int, total: int, record: bool = True
    ) -> int | ChatDBError | None:
        """Hands one part to Messages (noting its ``echo`` form first, with ``record``); returns the newest chat.db
        row before it (to confirm it from)."""
        if self._sent is not None and record:
            # Before sending: the echo can land before osascript returns.
            self._sent.record(target.address, echo)
        try:
            return self._send_part(target, part)
        except SendError as exc:
            if total > 1:
                raise SendError(f"{exc} (part {index} of {total}; {index - 1} sent)") from exc
            raise

    def _forms(self, target: Target, scripts: dict[str, str] = TEXT_SCRIPTS) -> list[tuple[str, str, str]]:
        """(name, script, argv target) to try in order."""
        if target.kind == "sms":
            return [("SMS participant", scripts["sms"], target.address)]
        if target.kind == "group":
            guids = [target.chat_guid or f"iMessage;+;{target.address}", f"iMessage;+;{target.address}"]
            return [("chat id", scripts["group"], guid) for guid in dict.fromkeys(guids)]
        return [("participant", scripts["participant"], target.address), ("buddy", scripts["buddy"], target.address)]

    def send_file(self, recipient: str, path: Path) -> None:
        """Sends the file at ``path`` (checked by the daemon) as an attachment: a copy staged where Messages can
        read it, its path passed to the script as an argument, then confirmed from chat.db (a sent row with an
        attachment of its name). Raises ``SendError`` when it does not go."""
        target = Target.parse(recipient, self._region)
        staged = stage(path, self._attachments_root, self._file_max_bytes)
        if self._sent is not None:
            # Texting yourself, the sent file comes back as a message of that file alone: not a request.
            self._sent.record(target.address, files_echo_text([staged.name]))
        before = self._hand_over_file(target, staged)
        # Confirmed outside the chat's lock: the next text to the chat need not wait for Messages to show this one.
        # Raises when chat.db has no row for it (never resent from here on).
        self._file_evidence(target, staged.name, before)

    def _hand_over_file(self, target: Target, staged: Path) -> int | ChatDBError | None:
        """Gives the staged file to Messages; returns the newest chat.db row before it (to confirm it from)."""
        failures: list[str] = []
        with self._lock_for(target):
            for attempt in range(self._retries + 1):
                if attempt:
                    self._sleep(self._backoff * attempt)
                for name, script, argv_target in self._forms(target, FILE_SCRIPTS):
                    before = self._newest_rowid()
                    result = self._run(script, argv_target, str(staged))
                    if result.ok:
                        return before
                    if is_automation_denied(result):
                        raise SendError(f"Messages refused the script (Automation permission): {automation_hint()}")
                    failures.append(f"{name}: {result.stderr.strip() or f'exit {result.returncode}'}")
                    log.warning("sending %s to %s with the %s form failed: %s", staged.name, target.describe(),
                                name, failures[-1])
        raise SendError(f"Messages did not take {staged.name} for {target.describe()} ({'; '.join(failures[-2:])})")

    def _send_part(self, target: Target, text: str) -> int | ChatDBError | None:
        failures: list[str] = []
        for attempt in range(self._retries + 1):
            if attempt:
                self._sleep(self._backoff * attempt)
            for name, script, argv_target in self._forms(target):
                before = self._newest_rowid()
                result = self._run(script, argv_target, text)
                if result.ok:
                    # Never resent from here on: the text may be out, and a second send could deliver it twice.
                    return before
                if is_automation_denied(result):
                    raise SendError(f"Messages refused the script (Automation permission): {automation_hint()}")
                failures.append(f"{name}: {result.stderr.strip() or f'exit {result.returncode}'}")
                log.warning("iMessage send to %s with the %s form failed: %s", target.describe(), name, failures[-1])
        hint = (
            GROUP_LIMIT if target.kind == "group"
            else "check that Messages is signed in and the handle can receive "
            + ("SMS (the Mac needs Text Message Forwarding from an iPhone)" if target.kind == "sms" else "iMessages")
        )
        raise SendError(
            f"could not send to {target.describe()} after {self._retries + 1} attempts "
            f"({'; '.join(failures[-2:])}); {hint}"
        )

    def _newest_rowid(self) -> int | ChatDBError | None:
        if self._db is None:
            return None
        try:
            return self._db.latest_rowid()
        except ChatDBError as exc:
            return exc

    def _file_evidence(self, target: Target, name: str, before: int | ChatDBError | None) -> None:
        if self._db is None or before is None:
            return
        if isinstance(before, ChatDBError):
            log.warning("cannot confirm sending %s to %s: %s", name, target.describe(), before)
            return
        try:
            evidence = confirm_file(self._db, target, name, before, self._confirm_seconds, self._region, self._sleep)
        except ChatDBError as exc:
            log.warning("cannot confirm sending %s to %s: %s", name, target.describe(), exc)
            return
        if not evidence.confirmed:
            log.info("sending %s to %s: %s", name, target.describe(), evidence.note)

    def _evidence(self, target: Target, text: str, before: int | ChatDBError | None, until_sent: bool) -> Evidence:
        if self._db is None or before is None:
            return Evidence(False, "sent by osascript; delivery not checked")
        if isinstance(before, ChatDBError):
            log.warning("cannot confirm the send to %s: %s", target.describe(), before)
            return Evidence(False, f"not confirmed: {before}")
        try:
            evidence = confirm(self._db, target, text, before, self._confirm_seconds, self._region, self._sleep,
                               until_sent=until_sent)
        except ChatDBError as exc:
            log.warning("cannot confirm the send to %s: %s", target.describe(), exc)
            return Evidence(False, f"not confirmed: {exc}")
        if not evidence.confirmed:
            log.info("send to %s: %s", target.describe(), evidence.note)
        return evidence

    def _run(self, script: str, handle: str, text: str) -> ScriptResult:
        try:
            return run_osascript_private(self._command, script, [handle, text], self._timeout)
        except OsascriptMissing as exc:
            raise SendError(str(exc)) from exc
        except ScriptTimeout as exc:
            # Not retried: a hang usually means an Automation prompt waiting for the user, and the message may
            # have gone out already (a retry could send it twice).
            raise SendError(f"{exc}; if macOS is asking for permission, answer it, or {automation_hint()}") from exc
        except (OSError, ValueError) as exc:  # ValueError: an argument the OS cannot take (argv_safe prevents it)
            raise SendError(f"could not run {self._command}: {exc}") from exc
