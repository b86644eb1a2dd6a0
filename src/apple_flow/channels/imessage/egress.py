"""The iMessage egress: replies sent through Messages with AppleScript, split into numbered parts, each part
recorded for echo suppression before it is sent."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from apple_flow.channels.base import Egress, SendError, SentTexts
from apple_flow.channels.imessage.osascript import (
    OsascriptMissing,
    ScriptResult,
    ScriptTimeout,
    argv_safe,
    run_osascript,
)
from apple_flow.channels.imessage.split import split_reply
from apple_flow.handles import normalize_handle

log = logging.getLogger(__name__)

def _send_script(target: str) -> str:
    """A script sending ``item 2 of argv`` to ``target`` (an expression using ``targetHandle``). Data never
    enters the source: the handle and text are only ever ``argv`` items."""
    return f"""on run argv
	set targetHandle to item 1 of argv
	set messageText to item 2 of argv
	tell application "Messages"
		set targetRecipient to {target}
		send messageText to targetRecipient
	end tell
end run
"""


# `participant` works on current macOS (11+); `buddy` of a service is the older form, kept as the fallback.
PARTICIPANT_SCRIPT = _send_script("participant targetHandle of (1st account whose service type = iMessage)")
BUDDY_SCRIPT = _send_script("buddy targetHandle of (1st service whose service type = iMessage)")
SEND_FORMS = (("participant", PARTICIPANT_SCRIPT), ("buddy", BUDDY_SCRIPT))

AUTOMATION_HINT = (
    "allow the app running apple-flow to control Messages in System Settings > Privacy & Security > Automation "
    "(run `apple-flow send <your handle> test` once from a terminal to get the prompt)"
)


def is_automation_denied(result: ScriptResult) -> bool:
    return "-1743" in result.stderr or "Not authorized to send Apple events" in result.stderr


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
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._command = osascript_command
        self._timeout = timeout_seconds
        self._retries = retries
        self._backoff = retry_backoff_seconds
        self._chunk_chars = chunk_chars
        self._region = default_region
        self._sent = sent
        self._sleep = sleep
        self._first_form = 0  # the form that worked last is tried first next time
        # One reply at a time: the daemon answers from several threads, and parts must not interleave.
        self._lock = threading.Lock()

    def send(self, recipient: str, text: str) -> None:
        handle = normalize_handle(recipient, self._region)
        parts = split_reply(argv_safe(text), self._chunk_chars)
        with self._lock:
            self._send_parts(handle, parts)

    def _send_parts(self, handle: str, parts: list[str]) -> None:
        for index, part in enumerate(parts, start=1):
            if self._sent is not None:
                # Before sending: the echo can land before osascript returns.
                self._sent.record(handle, part)
            try:
                self._send_part(handle, part)
            except SendError as exc:
                if len(parts) > 1:
                    raise SendError(f"{exc} (part {index} of {len(parts)}; {index - 1} sent)") from exc
                raise

    def _send_part(self, handle: str, text: str) -> None:
        failures: list[str] = []
        for attempt in range(self._retries + 1):
            if attempt:
                self._sleep(self._backoff * attempt)
            for offset in range(len(SEND_FORMS)):
                form_index = (self._first_form + offset) % len(SEND_FORMS)
                name, script = SEND_FORMS[form_index]
                result = self._run(script, handle, text)
                if result.ok:
                    self._first_form = form_index
                    return
                if is_automation_denied(result):
                    raise SendError(f"Messages refused the script (Automation permission): {AUTOMATION_HINT}")
                failures.append(f"{name}: {result.stderr.strip() or f'exit {result.returncode}'}")
                log.warning("iMessage send to %s with the %s form failed: %s", handle, name, failures[-1])
        raise SendError(
            f"could not send to {handle} after {self._retries + 1} attempts ({'; '.join(failures[-2:])}); "
            "check that Messages is signed in to iMessage and the handle can receive iMessages"
        )

    def _run(self, script: str, handle: str, text: str) -> ScriptResult:
        try:
            return run_osascript(self._command, script, [handle, text], self._timeout)
        except OsascriptMissing as exc:
            raise SendError(str(exc)) from exc
        except ScriptTimeout as exc:
            # Not retried: a hang usually means an Automation prompt waiting for the user, and the message may
            # have gone out already (a retry could send it twice).
            raise SendError(f"{exc}; if macOS is asking for permission, answer it, or {AUTOMATION_HINT}") from exc
        except (OSError, ValueError) as exc:  # ValueError: an argument the OS cannot take (argv_safe prevents it)
            raise SendError(f"could not run {self._command}: {exc}") from exc
