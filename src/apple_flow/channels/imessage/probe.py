"""The Automation probe: one Apple event that Messages itself must answer, so macOS checks (and, the first time,
asks) whether the calling app may control Messages. It changes nothing.

``tell application "Messages" to get name`` would not do: AppleScript answers that for the application object
without sending Messages an event, so it can never be refused. The id of the iMessage account must come from
Messages, and its absence also tells that Messages is not signed in to iMessage. Messages may also list an account
that is switched off ("Enable this account" unticked) or not connected (signed out, offline): sends then fail while
the id is there, so the probe reads the account's ``enabled`` and ``connection status`` too, and only an enabled,
connected account is ready.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from apple_flow.channels.imessage.osascript import OsascriptMissing, ScriptResult, ScriptTimeout, run_osascript

PROBE_SCRIPT = """on run argv
	tell application "Messages"
		set accountId to get id of 1st account whose service type = iMessage
		set theAccount to account id accountId
		return accountId & tab & ((enabled of theAccount) as text) & tab & ((connection status of theAccount) as text)
	end tell
end run
"""

AUTOMATION_SETTINGS = "System Settings > Privacy & Security > Automation"
SIGN_IN = "open Messages and sign in to iMessage (Messages > Settings > iMessage), then check again"
SWITCH_ON_ACCOUNT = (
    "open Messages > Settings > iMessage and tick \u201cEnable this account\u201d (or sign in there), then check again"
)
RECONNECT = (
    "open Messages and check that it is signed in to iMessage (Messages > Settings > iMessage) and the Mac is online; "
    "if it stays offline, sign out there and in again"
)
# errAEEventNotPermitted: the user (or a policy) refused this app Apple events to Messages.
_DENIED = re.compile(r"\(-1743\)|Not authorized to send Apple events", re.IGNORECASE)
# errAENoSuchObject / errAEIllegalIndex on the account: Messages has no iMessage account.
_NO_ACCOUNT = re.compile(r"Can.t get account.*\((-1728|-1719)\)", re.IGNORECASE | re.DOTALL)
# errAETimeout: the event waited (usually on the permission prompt) longer than AppleScript's 2 minutes.
_EVENT_TIMEOUT = re.compile(r"\(-1712\)")


class ProbeState(StrEnum):
    OK = "ok"
    DENIED = "denied"  # Automation refused: the user must switch it on
    NOT_SIGNED_IN = "not signed in"  # allowed, but Messages has no iMessage account
    ACCOUNT_OFF = "account off"  # the iMessage account is listed but switched off
    OFFLINE = "offline"  # the iMessage account is on but not connected (signed out, no network)
    NO_ANSWER = "no answer"  # waiting on the permission prompt, or Messages did not answer
    UNAVAILABLE = "unavailable"  # no osascript: not macOS
    FAILED = "failed"  # any other error, with its text


@dataclass(frozen=True)
class ProbeResult:
    state: ProbeState
    detail: str
    fix: str = ""

    @property
    def ok(self) -> bool:
        return self.state is ProbeState.OK


def automation_fix(app: str) -> str:
    return f"switch on Messages under {app} in {AUTOMATION_SETTINGS}, then check again"


def probe_messages_automation(
    osascript_command: str, timeout: float, app: str = "the app running apple-flow"
) -> ProbeResult:
    """Asks Messages for its iMessage account as ``app`` would (macOS charges the event to the responsible app,
    which is what ``app`` names in the result)."""
    try:
        result = run_osascript(osascript_command, PROBE_SCRIPT, [], timeout)
    except OsascriptMissing as exc:
        return ProbeResult(ProbeState.UNAVAILABLE, str(exc), "run apple-flow on macOS for the iMessage channel")
    except ScriptTimeout:
        return _no_answer(app, f"Messages did not answer within {timeout:g} s")
    return interpret(result, app)


def interpret(result: ScriptResult, app: str) -> ProbeResult:
    if result.ok:
        return _account_state(result.stdout, app)
    error = result.stderr.strip() or f"osascript exit {result.returncode}"
    if _DENIED.search(error):
        detail = f"{app} is not allowed to control Messages ({error})"
        return ProbeResult(ProbeState.DENIED, detail, automation_fix(app))
    if _NO_ACCOUNT.search(error):
        return ProbeResult(ProbeState.NOT_SIGNED_IN, "Messages has no iMessage account (not signed in)", SIGN_IN)
    if _EVENT_TIMEOUT.search(error):
        return _no_answer(app, f"Messages did not answer ({error})")
    return ProbeResult(ProbeState.FAILED, error, "open Messages once and check that it works, then check again")


def _account_state(answer: str, app: str) -> ProbeResult:
    """The probe's answer: the account's id, whether it is enabled, and its connection status, tab-separated."""
    account, _, rest = answer.strip().partition("\t")
    enabled, _, connection = rest.partition("\t")
    allowed = f"{app} may control Messages (iMessage account {account or '?'})"
    if enabled.strip() == "false":
        return ProbeResult(ProbeState.ACCOUNT_OFF, f"{allowed}, but the account is switched off", SWITCH_ON_ACCOUNT)
    status = connection.strip()
    if status and status != "connected":
        return ProbeResult(ProbeState.OFFLINE, f"{allowed}, but the account is {status}, not connected", RECONNECT)
    return ProbeResult(ProbeState.OK, allowed)


def _no_answer(app: str, detail: str) -> ProbeResult:
    return ProbeResult(
        ProbeState.NO_ANSWER, detail,
        f"answer the permission prompt (macOS asks whether {app} may control Messages: click Allow); if none shows, "
        f"{automation_fix(app)}",
    )
