"""The one way times are written for people: replies, the web page and the command line agree."""

from __future__ import annotations

import time

from apple_flow.times import day, duration, moment


def local(year: int, month: int, mday: int, hour: int, minute: int) -> float:
    return time.mktime((year, month, mday, hour, minute, 0, 0, 0, -1))


def test_a_moment_has_its_date_only_when_not_today_and_its_year_only_when_not_this_year() -> None:
    now = local(2026, 11, 26, 18, 30)
    assert moment(local(2026, 11, 26, 9, 5), now) == "09:05"
    assert moment(local(2026, 11, 25, 23, 59), now) == "Nov 25 23:59"
    assert moment(local(2025, 11, 26, 9, 5), now) == "2025-11-26 09:05"
    assert day(local(2026, 3, 4, 12, 0)) == "Mar 04"


def test_a_length_of_time_in_the_units_that_matter() -> None:
    assert [duration(s) for s in (-1, 2.54, 45.2, 200, 3 * 3600 + 125)] == [
        "0.0 s", "2.5 s", "45 s", "3 min 20 s", "3 h 2 min",
    ]
