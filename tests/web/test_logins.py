"""Logging in as a person does: a one-time link texted by `web` (a look at it logs nobody in; a tap does, once, for
a few minutes), a login that returns to the page asked for, and the live parts the page polls."""

from __future__ import annotations

import re
import time

from apple_flow.web.auth import COOKIE
from support.daemon_harness import ANA
from web.conftest import TOKEN, Page


def link(page: Page) -> str:
    secret = f"secret-{time.monotonic_ns()}-0123456789abcdefghij"
    page.logins.add_link(secret, ANA, 300)
    return f"/login/link/{secret}"


def test_a_link_logs_in_once_with_a_tap_not_with_a_look(page: Page) -> None:
    path = link(page)
    client = page.client()
    for _ in range(3):  # Messages fetching a preview, the user opening it twice: nothing is used up
        shown = client.get(path)
        assert shown.status_code == 200 and 'id="use-link"' in shown.text and "set-cookie" not in shown.headers
    used = client.post(path, headers={"origin": page.origin})
    assert used.status_code == 303 and used.headers["location"] == "/runs" and COOKIE in used.cookies
    assert client.get("/runs").status_code == 200
    again = page.client()
    assert again.get(path).status_code == 410
    refused = again.post(path, headers={"origin": page.origin})
    assert refused.status_code == 410 and "used already or has expired" in refused.text
    assert COOKIE not in refused.cookies


def test_an_expired_or_made_up_link_logs_nobody_in(page: Page) -> None:
    path = link(page)
    page.store.db.write("UPDATE web_links SET expires_at = ?", (time.time() - 1,))
    for attempt in (path, "/login/link/made-up", f"/login/link/{'x' * 300}"):
        response = page.client().post(attempt, headers={"origin": page.origin})
        assert response.status_code == 410 and COOKIE not in response.cookies, attempt


def test_a_link_tapped_from_another_site_is_refused(page: Page) -> None:
    path = link(page)
    response = page.client().post(path, headers={"origin": "http://evil.example"})
    assert response.status_code == 403 and COOKIE not in response.cookies
    assert page.client().post(path, headers={"origin": page.origin}).status_code == 303  # still unused


def test_login_returns_to_the_page_asked_for(page: Page) -> None:
    client = page.client()
    asked = client.get("/approvals")
    assert asked.headers["location"] == "/login?next=%2Fapprovals"
    form = client.get(asked.headers["location"]).text
    assert re.search(r'name="next" value="/approvals"', form)
    done = client.post("/login", data={"token": TOKEN, "next": "/approvals"})
    assert done.status_code == 303 and done.headers["location"] == "/approvals"
    for elsewhere in ("//evil.example/x", "https://evil.example", "/\\evil.example", "javascript:alert(1)", "/login"):
        response = page.client().post("/login", data={"token": TOKEN, "next": elsewhere})
        assert response.headers["location"] == "/runs", elsewhere


def test_the_approvals_list_and_the_pending_count_are_live_parts(page: Page) -> None:
    client = page.logged_in()
    assert client.get("/approvals/count?fragment").text.strip() == ""
    assert "Nothing is waiting" in client.get("/approvals?fragment").text
    approval = page.approvals.create(ANA, "add a flag", "1. edit cli.py", "/ws")
    page.store.approvals.add_approval(approval)
    count = client.get("/approvals/count?fragment").text
    assert '<span class="count"' in count and ">1</span>" in count
    fragment = client.get("/approvals?fragment").text
    assert fragment.lstrip().startswith("<article") and approval.id in fragment and 'name="csrf"' in fragment
    assert 'data-live="/approvals?fragment"' in client.get("/approvals").text
    assert ">1</span>" in client.get("/runs").text  # the navigation shows the count on every page
    assert page.client().get("/approvals/count?fragment").status_code == 401
