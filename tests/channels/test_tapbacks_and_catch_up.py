"""Tapbacks and late rows as Messages writes them (real-schema chat.db rows, the real reader): a love, like or dislike
on a message names it by guid (``p:<part>/<guid>``, ``bp:<guid>``); a removal or another kind decides nothing; a
request older than the replay window but within the catch-up window is taken as late, not skipped."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from apple_flow.channels.base import Skipped, Tapback
from apple_flow.channels.imessage.classify import tapback_target
from apple_flow.channels.imessage.ingress import IMessageIngress
from support.chatdb import ChatDbWriter
from support.ingress_helpers import take
from support.waiting import wait_for

ME = "+15551234567"
PLAN_GUID = "A44CE9D7-AAAA-BBBB-CCCC-23C54E1A9B6A"
HOUR = 3600.0


def ingress_for(db: ChatDbWriter, **kwargs: Any) -> IMessageIngress:
    return IMessageIngress(db.path, default_region="US", poll_seconds=0.1, sent=None, **kwargs)


@pytest.mark.parametrize(
    ("stored", "target"),
    [(f"p:0/{PLAN_GUID}", PLAN_GUID), (f"p:2/{PLAN_GUID}", PLAN_GUID), (f"bp:{PLAN_GUID}", PLAN_GUID),
     (PLAN_GUID, PLAN_GUID), ("", None), (None, None)],
)
def test_the_target_guid_comes_without_its_prefix(stored: str | None, target: str | None) -> None:
    assert tapback_target(stored) == target


def test_a_like_a_love_and_a_dislike_are_taken_with_what_they_decide(chat_db: ChatDbWriter) -> None:
    like = chat_db.message('Liked "Plan (req_1)"', associated_message_type=2001,
                           associated_message_guid=f"p:0/{PLAN_GUID}")
    love = chat_db.message('Loved "Plan (req_1)"', associated_message_type=2000,
                           associated_message_guid=f"bp:{PLAN_GUID}")
    dislike = chat_db.message('Disliked "Plan (req_1)"', associated_message_type=2002,
                              associated_message_guid=f"p:0/{PLAN_GUID}")
    got = take(ingress_for(chat_db), after=0, count=3)
    assert [(m.rowid, m.sender, m.tapback) for m in got] == [
        (like, ME, Tapback(True, PLAN_GUID)), (love, ME, Tapback(True, PLAN_GUID)),
        (dislike, ME, Tapback(False, PLAN_GUID)),
    ]


def test_a_removal_another_kind_and_one_without_a_target_decide_nothing(chat_db: ChatDbWriter) -> None:
    rows = [
        chat_db.message('Removed a like from "Plan"', associated_message_type=3001,
                        associated_message_guid=f"p:0/{PLAN_GUID}"),
        chat_db.message('Removed a heart from "Plan"', associated_message_type=3000,
                        associated_message_guid=f"p:0/{PLAN_GUID}"),
        chat_db.message('Laughed at "Plan"', associated_message_type=2003, associated_message_guid=f"p:0/{PLAN_GUID}"),
        chat_db.message('Liked "Plan"', associated_message_type=2001),  # no associated_message_guid
    ]
    after = chat_db.message("status")
    skipped: list[Skipped] = []
    got = take(ingress_for(chat_db), after=0, count=1, skipped=skipped)
    assert [m.rowid for m in got] == [after] and got[0].tapback is None
    assert [(s.rowid, s.reason) for s in skipped] == [(rowid, "reaction") for rowid in rows]


def test_a_tapback_without_text_is_still_taken(chat_db: ChatDbWriter) -> None:
    chat_db.message(None, associated_message_type=2001, associated_message_guid=f"p:0/{PLAN_GUID}")
    (got,) = take(ingress_for(chat_db), after=0, count=1)
    assert got.tapback == Tapback(True, PLAN_GUID)


# --- catch-up after sleep ---------------------------------------------------------------------------------------


def test_a_30_minute_old_request_is_late_a_13_hour_old_one_is_skipped(chat_db: ChatDbWriter) -> None:
    now = datetime.now(UTC)
    too_old = chat_db.message("from last night", when=now - timedelta(hours=13))
    late = chat_db.message("fix the tests", when=now - timedelta(minutes=30))
    fresh = chat_db.message("status", when=now - timedelta(seconds=20))
    skipped: list[Skipped] = []
    got = take(ingress_for(chat_db, max_message_age_seconds=300, catch_up_seconds=12 * HOUR), after=0, count=2,
               skipped=skipped)
    assert [(m.rowid, m.late) for m in got] == [(late, True), (fresh, False)]
    assert [(s.rowid, s.reason) for s in skipped] == [(too_old, "older than 12 h")]


def test_without_a_catch_up_window_a_30_minute_old_request_is_skipped_as_before(chat_db: ChatDbWriter) -> None:
    old = chat_db.message("fix the tests", when=datetime.now(UTC) - timedelta(minutes=30))
    skipped: list[Skipped] = []
    assert take(ingress_for(chat_db, max_message_age_seconds=300), after=0, count=1, timeout=0.5,
                skipped=skipped) == []
    assert [(s.rowid, s.reason) for s in skipped] == [(old, "older than 5 min")]


def test_a_late_tapback_is_no_approval(chat_db: ChatDbWriter) -> None:
    old = chat_db.message('Liked "Plan"', associated_message_type=2001, associated_message_guid=f"p:0/{PLAN_GUID}",
                          when=datetime.now(UTC) - timedelta(minutes=30))
    skipped: list[Skipped] = []
    take(ingress_for(chat_db, max_message_age_seconds=300, catch_up_seconds=12 * HOUR), after=0, count=1,
         timeout=0.5, skipped=skipped)
    assert [(s.rowid, s.reason) for s in skipped] == [(old, "older than 5 min")]


def test_caught_up_once_a_200_row_backlog_has_been_read_whole(chat_db: ChatDbWriter) -> None:
    when = datetime.now(UTC) - timedelta(hours=2)
    for index in range(200):
        chat_db.message(f"request {index}", when=when + timedelta(seconds=index))
    ingress = ingress_for(chat_db, max_message_age_seconds=300, catch_up_seconds=12 * HOUR)
    assert not ingress.caught_up()
    seen: list[bool] = []
    import threading

    stop = threading.Event()
    items = ingress.messages(0, stop)
    for _ in range(200):
        item = next(items)
        assert not isinstance(item, Skipped) and item.late
        seen.append(ingress.caught_up())
    assert not any(seen)  # never caught up while rows of the backlog were still coming
    waiter = threading.Thread(target=lambda: next(items, None), daemon=True)
    waiter.start()  # the generator goes on to wait for new rows: now it has read everything
    wait_for(ingress.caught_up, 5, "the ingress to have caught up")
    stop.set()
    waiter.join(5)
