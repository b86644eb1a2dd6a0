"""Harmless probes of what the iMessage channel needs, for ``apple-flow doctor``."""

from __future__ import annotations

from dataclasses import dataclass

from apple_flow.channels.imessage.egress import AUTOMATION_HINT, is_automation_denied
from apple_flow.channels.imessage.osascript import OsascriptMissing, ScriptTimeout, run_osascript

# Asks Messages for its name: needs the same Automation permission as sending, and changes nothing.
HARMLESS_SCRIPT = """on run argv
	tell application "Messages" to get name
end run
"""


@dataclass(frozen=True)
class ProbeResult:
    ok: bool
    detail: str
    fix: str = ""


def probe_messages_automation(osascript_command: str, timeout: float) -> ProbeResult:
    try:
        result = run_osascript(osascript_command, HARMLESS_SCRIPT, [], timeout)
    except OsascriptMissing as exc:
        return ProbeResult(False, str(exc), "run apple-flow on macOS for the iMessage channel")
    except ScriptTimeout as exc:
        return ProbeResult(False, str(exc), f"answer the permission prompt if macOS shows one, or {AUTOMATION_HINT}")
    if result.ok:
        return ProbeResult(True, f"Messages answered ({result.stdout.strip() or 'ok'})")
    if is_automation_denied(result):
        return ProbeResult(False, "not allowed to control Messages", AUTOMATION_HINT)
    return ProbeResult(
        False, result.stderr.strip() or f"osascript exit {result.returncode}", "open Messages once and sign in"
    )
