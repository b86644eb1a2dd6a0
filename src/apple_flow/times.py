"""How apple-flow writes times for people, in a reply, on the web page and on the command line: one way
everywhere. A moment in local time, with its date only when it is not today and its year only when it is not this
year; a length of time in the largest units that matter."""

from __future__ import annotations

import time


def moment(at: float, now: float | None = None) -> str:
    """``14:05`` today, ``Nov 25 14:05`` earlier this year, ``2025-11-25 14:05`` before."""
    when, today = time.localtime(at), time.localtime(time.time() if now is None else now)
    if when[:3] == today[:3]:
        return time.strftime("%H:%M", when)
    if when.tm_year == today.tm_year:
        return time.strftime("%b %d %H:%M", when)
    return time.strftime("%Y-%m-%d %H:%M", when)


def day(at: float) -> str:
    """The local day of ``at``, ``Nov 25``: the heading of a day's figures."""
    return time.strftime("%b %d", time.localtime(at))


def duration(seconds: float) -> str:
    """``2.5 s``, ``45 s``, ``3 min 20 s``, ``1 h 5 min``."""
    seconds = max(0.0, seconds)
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds // 60:.0f} min {seconds % 60:.0f} s"
    return f"{seconds // 3600:.0f} h {seconds % 3600 // 60:.0f} min"
