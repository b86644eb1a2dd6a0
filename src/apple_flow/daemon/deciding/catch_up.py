"""Messages that came while the Mac slept or was offline: older than the replay window, younger than the catch-up
window. None is run on arrival (a stale "deploy it" must not run hours later by surprise), and none is lost in
silence: once the backlog has been read, each sender gets one reply listing theirs, numbered, and `run` runs the
last one, `run <n>` another."""

from __future__ import annotations

from apple_flow.daemon.deciding.reports import clip
from apple_flow.daemon.store import Held
from apple_flow.times import moment

SHOWN = 5  # the listing shows the newest few; `run <n>` reaches any of them


def listing(held: list[Held], now: float | None = None) -> str:
    """The one reply telling a sender of their late messages, newest last, with their times."""
    count = len(held)
    shown = held[-SHOWN:]
    if count == 1:
        head = "While this Mac was asleep or offline you sent this; it was not run:"
    else:
        head = f"While this Mac was asleep or offline you sent {count} messages; none was run"
        head += f". The last {len(shown)}:" if count > len(shown) else ":"
    # By SMS or RCS: the owner must see that its sender may be forged before replying `run`.
    lines = [f"{item.number}. {moment(item.sent_at, now)}{' by SMS' if item.forgeable else ''} {clip(item.text, 60)}"
             for item in shown]
    if count == 1:
        tail = "Reply `run` to run it now."
    else:
        tail = f"Reply `run` to run the last one now, or `run <n>` for another (1 to {count})."
    return "\n".join([head, *lines, tail])
