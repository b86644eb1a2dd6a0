"""What an attack on the page found, each closed: sessions the server ends, a body read only after its
origin and size were checked and then with a cap, bounded connections and request times, Host names checked, exact
verbs, the real state of a request shown."""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable

import pytest

from apple_flow.web.app import DISCONNECTS
from apple_flow.web.auth import COOKIE
from apple_flow.web.limits import OVER_CONCURRENCY, Limits
from support.daemon_harness import ANA, wait_until
from support.waiting import wait_for
from web.conftest import TOKEN, Page


def pending_request(page: Page, task: str = "add a --verbose flag") -> str:
    approval = page.approvals.create(ANA, task, "1. edit cli.py", "/Users/ana/site")
    page.store.approvals.add_approval(approval)
    return approval.id


def raw(page: Page, head: str, body: bytes = b"", wait: float = 5.0) -> bytes:
    """Sends ``head`` (and ``body``) on a socket of its own; returns what the page answered within ``wait``."""
    with socket.create_connection(("127.0.0.1", page.port), timeout=wait) as sock:
        sock.sendall(head.replace("\n", "\r\n").encode() + b"\r\n" + body)
        answer = b""
        try:
            while b"\r\n\r\n" not in answer:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                answer += chunk
        except TimeoutError:
            pass
    return answer


def closed_within(sock: socket.socket, seconds: float) -> bool:
    """Whether the page closed this connection (EOF or reset) within ``seconds``."""
    sock.settimeout(seconds)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


# --- 1: sessions the server can end ------------------------------------------------------------------------------


def test_logout_ends_the_session_for_a_copy_of_its_cookie_too(page: Page) -> None:
    client = page.logged_in()
    stolen = client.cookies[COOKIE]
    csrf = page.csrf(client)
    assert client.post("/logout", data={"csrf": csrf}, headers={"origin": page.origin}).status_code == 303
    replay = page.client()
    replay.cookies.set(COOKIE, stolen)
    assert replay.get("/runs").status_code == 303  # to the login: the server ended it
    assert page.logins.count_sessions() == 0


def test_a_session_lasts_days_and_dies_on_its_day(page: Page) -> None:
    response = page.client().post("/login", data={"token": TOKEN})
    assert f"Max-Age={7 * 24 * 3600}" in response.headers["set-cookie"]
    cookie = response.cookies[COOKIE]
    assert TOKEN not in cookie and len(cookie) >= 40
    client = page.client()
    client.cookies.set(COOKIE, cookie)
    assert client.get("/runs").status_code == 200
    page.store.db.write("UPDATE web_sessions SET expires_at = ?", (time.time() - 1,))
    assert client.get("/runs").status_code == 303


def test_a_new_token_ends_every_session(page: Page) -> None:
    client = page.logged_in()
    assert page.logins.forget_if_token_changed(TOKEN) is False
    assert client.get("/runs").status_code == 200
    assert page.logins.forget_if_token_changed("another-token-0123456789-0123456789") is True
    assert client.get("/runs").status_code == 303


def test_the_page_moves_a_browser_to_its_own_name_and_sets_no_cookie_for_127_0_0_1(page: Page) -> None:
    """A cookie set by 127.0.0.1 or localhost goes to every local server, whatever its port."""
    # The unspecified address and IPv4-mapped loopback reach this Mac's servers as well: the same.
    for host in (f"127.0.0.1:{page.port}", f"localhost:{page.port}", f"[::1]:{page.port}", f"0.0.0.0:{page.port}",
                 f"[::ffff:7f00:1]:{page.port}", f"[::ffff:127.0.0.1]:{page.port}", f"[::]:{page.port}"):
        client = page.client(host=host)
        moved = client.get("/runs/run_abc?fragment")
        assert moved.status_code == 307, host
        assert moved.headers["location"] == f"http://apple-flow.localhost:{page.port}/runs/run_abc?fragment"
        login = client.post("/login", data={"token": TOKEN})
        assert login.status_code == 421 and "set-cookie" not in login.headers, host
        assert f"http://apple-flow.localhost:{page.port}" in login.text


def test_without_a_local_name_the_page_is_served_on_127_0_0_1(make_page: Callable[..., Page]) -> None:
    page = make_page(web_local_name="")
    assert page.url.startswith("http://127.0.0.1:")
    client = page.client(host=f"127.0.0.1:{page.port}")
    assert client.post("/login", data={"token": TOKEN}).status_code == 303
    assert client.get("/runs").status_code == 200


# --- 2: the body is read last, and only so far -------------------------------------------------------------------


def test_a_huge_login_form_is_refused_before_a_byte_of_it_is_read(page: Page) -> None:
    head = (f"POST /login HTTP/1.1\nHost: {page.host}\nOrigin: {page.origin}\n"
            "Content-Type: application/x-www-form-urlencoded\nContent-Length: 500000000\n")
    answer = raw(page, head)  # and no body at all: the answer cannot wait for it
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]


def test_a_form_from_another_site_is_refused_before_its_body_is_read(page: Page) -> None:
    """With the session cookie too: a page on another port of this machine is the same site to a browser."""
    approval = pending_request(page)
    cookie = page.logged_in().cookies[COOKIE]
    for path in ("/login", f"/approvals/{approval}/approve"):
        head = (f"POST {path} HTTP/1.1\nHost: {page.host}\nOrigin: http://127.0.0.1:1\nCookie: {COOKIE}={cookie}\n"
                "Content-Type: application/x-www-form-urlencoded\nContent-Length: 1000\n")
        answer = raw(page, head)  # the body never comes: only an answer that did not wait for it arrives
        assert answer.startswith(b"HTTP/1.1 403"), (path, answer[:200])


def test_a_body_of_no_declared_size_is_read_only_up_to_the_cap(page: Page) -> None:
    head = (f"POST /login HTTP/1.1\nHost: {page.host}\nOrigin: {page.origin}\n"
            "Content-Type: application/x-www-form-urlencoded\nTransfer-Encoding: chunked\n")
    chunk = b"token=" + b"a" * 8000
    body = b"".join(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n" for _ in range(3))  # 24 KB, never ended
    answer = raw(page, head, body)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]


# --- 3: bounded connections and request times, disconnects logged once ---------------------------------------


def test_connections_over_the_limit_are_closed_and_idle_ones_time_out(make_page: Callable[..., Page]) -> None:
    page = make_page(limits=Limits(max_connections=8, request_seconds=3))
    sockets = [socket.create_connection(("127.0.0.1", page.port)) for _ in range(20)]
    try:
        # Every one past the eighth, at once: before any idle one's time to send (3 s) is up.
        wait_for(lambda: sum(closed_within(sock, 0.01) for sock in sockets) >= 12, 2.5,
                 "the connections past the eighth to be closed")
        assert all(closed_within(sock, 5) for sock in sockets)  # and the rest once their time to send was up
        assert page.client().get("/login").status_code == 200  # the page itself serves on
    finally:
        for sock in sockets:
            sock.close()


def test_a_half_sent_request_is_cut_off(make_page: Callable[..., Page]) -> None:
    page = make_page(limits=Limits(request_seconds=1))
    with socket.create_connection(("127.0.0.1", page.port)) as sock:
        sock.sendall(f"GET /login HTTP/1.1\r\nHost: {page.host}\r\nX-Slow: ".encode())
        started = time.monotonic()
        assert closed_within(sock, 5)
        assert time.monotonic() - started < 4
    with socket.create_connection(("127.0.0.1", page.port)) as sock:  # a body that stops coming
        sock.sendall((f"POST /login HTTP/1.1\r\nHost: {page.host}\r\nOrigin: {page.origin}\r\n"
                      "Content-Type: application/x-www-form-urlencoded\r\n"
                      "Content-Length: 100\r\n\r\ntoken=ab").encode())
        assert closed_within(sock, 5)


def test_requests_refused_at_the_connection_limit_are_logged_once_with_a_count(
    make_page: Callable[..., Page], caplog: pytest.LogCaptureFixture
) -> None:
    """uvicorn answers a request at its concurrency limit 503 and logged a line for each (3,780 in 15 s)."""
    caplog.set_level(logging.INFO)
    page = make_page(limits=Limits(max_connections=2))
    before = OVER_CONCURRENCY.noted
    with socket.create_connection(("127.0.0.1", page.port)):  # held open: the next one is at the limit
        answers = [page.client().get("/login").status_code for _ in range(30)]
    assert answers.count(503) == 30 and OVER_CONCURRENCY.noted - before == 30
    assert not [r for r in caplog.records if r.name.startswith("uvicorn")]
    notes = [r.getMessage() for r in caplog.records if "at the connection limit" in r.getMessage()]
    assert len(notes) <= 1


def test_uploads_cut_short_are_logged_once_not_as_tracebacks(page: Page, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    before = DISCONNECTS.noted
    for _ in range(20):
        with socket.create_connection(("127.0.0.1", page.port)) as sock:
            sock.sendall((f"POST /login HTTP/1.1\r\nHost: {page.host}\r\nOrigin: {page.origin}\r\n"
                          "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 5000\r\n\r\n"
                          "token=abc").encode())
    assert page.client().get("/login").status_code == 200
    # Every one of them has reached the page (and gone the way a traceback would have come from).
    wait_until(lambda: DISCONNECTS.noted - before >= 20, timeout=30)
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    notes = [r for r in caplog.records if "went away" in r.getMessage()]
    assert len(notes) <= 1


# --- 5: wrong tokens never lock the right one out -----------------------------------------------------------------


def test_a_flood_of_wrong_tokens_does_not_lock_the_owner_out(page: Page) -> None:
    attacker = page.client()
    for i in range(30):
        attacker.post("/login", data={"token": f"wrong-{i}"})
    assert attacker.post("/login", data={"token": "wrong-again"}).status_code == 429
    owner = page.client()
    assert owner.post("/login", data={"token": TOKEN}).status_code == 303


# --- 6: Host names, verbs, the state shown -----------------------------------------------------------------------


def test_only_its_own_host_names_are_answered(make_page: Callable[..., Page]) -> None:
    page = make_page(web_base_url="https://mac.tailnet.ts.net")
    for host in ("evil.example", f"evil.example:{page.port}", "apple-flow.localhost.evil.example", "", "a b"):
        client = page.client(host=host)
        assert client.get("/login").status_code in (400, 421), host  # DNS rebinding: the attacker's name
        assert client.post("/login", data={"token": TOKEN}).status_code in (400, 421), host
    for host in (page.host, "mac.tailnet.ts.net", "mac.tailnet.ts.net:443", f"10.0.0.5:{page.port}"):
        assert page.client(host=host).get("/login").status_code == 200, host


def test_only_approve_and_deny_decide(page: Page) -> None:
    approval = pending_request(page)
    client = page.logged_in()
    csrf = page.csrf(client)
    for verb in ("approvex", "x", "Deny", "delete"):
        response = client.post(f"/approvals/{approval}/{verb}", data={"csrf": csrf}, headers={"origin": page.origin})
        assert response.status_code in (404, 405), verb
    stored = page.store.approvals.get_approval(approval)
    assert stored is not None and stored.state == "pending"


def test_the_notice_tells_the_real_state_of_the_request(page: Page) -> None:
    approval = pending_request(page)
    client = page.logged_in()
    assert "still waiting" in client.get(f"/runs?approved={approval}").text
    client.post(f"/approvals/{approval}/deny", data={"csrf": page.csrf(client)}, headers={"origin": page.origin})
    html = client.get(f"/runs?approved={approval}").text
    assert f"{approval} was denied" in html and f"Approved {approval}" not in html
