"""The page's server sleeps between requests (no 10 Hz tick), answers with a current Date header, and stops at
once when asked; the daemon's page is loaded when the first connection comes."""

from __future__ import annotations

import threading
import time
from email.utils import parsedate_to_datetime
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from apple_flow.web.server import OnFirstConnection, WebServer
from support.waiting import wait_for


def hello(request: object) -> PlainTextResponse:
    return PlainTextResponse("hello")


def serving() -> WebServer:
    server = WebServer(Starlette(routes=[Route("/", hello)]), "127.0.0.1", 0)
    server.start()
    return server


def web_thread() -> threading.Thread:
    return next(thread for thread in threading.enumerate() if thread.name == "web")


def test_responses_carry_the_current_date() -> None:
    server = serving()
    try:
        response = httpx.get(server.url, timeout=10)
    finally:
        server.stop()
    assert response.text == "hello"
    assert abs(parsedate_to_datetime(response.headers["date"]).timestamp() - time.time()) < 5
    assert len(response.headers.get_list("date")) == 1


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counts context switches in /proc (Linux)")
def test_an_idle_page_does_not_wake_its_thread() -> None:
    # uvicorn's own loop wakes every 100 ms: about 15 wake-ups in this time.
    server = serving()
    try:
        httpx.get(server.url, timeout=10)  # served once: connections closed, nothing pending
        assert server._server is not None
        state = server._server.server_state
        wait_for(lambda: not state.connections, 5, "the server to close the connection")
        status = Path(f"/proc/self/task/{web_thread().native_id}/status")
        before = _voluntary_switches(status)
        time.sleep(1.5)  # time passes for the idle server: what is measured is that it does not wake in it
        woke = _voluntary_switches(status) - before
    finally:
        server.stop()
    assert woke <= 3, woke


def test_stop_ends_the_server_thread_at_once() -> None:
    server = serving()
    thread = web_thread()
    began = time.monotonic()
    server.stop()
    assert not thread.is_alive()
    assert time.monotonic() - began < 4  # not the stop timeout (5 s)


def _voluntary_switches(status: Path) -> int:
    line = next(x for x in status.read_text().splitlines() if x.startswith("voluntary_ctxt_switches"))
    return int(line.split()[1])


def test_a_page_loaded_on_first_use_is_built_when_the_first_connection_comes() -> None:
    built: list[str] = []

    def build() -> Starlette:
        built.append(threading.current_thread().name)
        return Starlette(routes=[Route("/", hello)])

    server = WebServer(OnFirstConnection(build), "127.0.0.1", 0)
    server.start()
    try:
        time.sleep(0.3)  # time passes with nobody connecting: nothing may load in it
        assert built == []  # listening, nothing of the page loaded
        status = Path(f"/proc/self/task/{web_thread().native_id}/status")
        if status.parent.is_dir():
            before = _voluntary_switches(status)
            time.sleep(1.0)  # likewise: the thread may not wake in it
            assert _voluntary_switches(status) - before <= 2  # waiting without waking
        assert httpx.get(server.url, timeout=30).text == "hello"  # the first request waits while the page loads
        assert httpx.get(server.url, timeout=10).text == "hello"
        assert built == ["web"]
    finally:
        server.stop()
    assert not web_thread_alive()


def test_a_page_never_opened_stops_at_once_and_frees_its_port() -> None:
    server = WebServer(OnFirstConnection(lambda: Starlette()), "127.0.0.1", 0)
    url = server.start()
    began = time.monotonic()
    server.stop()
    assert time.monotonic() - began < 4 and not web_thread_alive()
    with pytest.raises(httpx.ConnectError):
        httpx.get(url, timeout=5)


def test_a_page_that_fails_to_load_leaves_the_daemon_running(caplog: pytest.LogCaptureFixture) -> None:
    def broken() -> Starlette:
        raise RuntimeError("a bug in the page")

    server = WebServer(OnFirstConnection(broken), "127.0.0.1", 0)
    server.start()
    with pytest.raises(httpx.HTTPError):
        httpx.get(server.url, timeout=10)  # the connection is closed unanswered
    server.stop()
    assert "the web page could not be loaded" in caplog.text and "a bug in the page" in caplog.text


def web_thread_alive() -> bool:
    return any(thread.name == "web" for thread in threading.enumerate())
