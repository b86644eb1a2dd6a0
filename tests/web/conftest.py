"""The web page served for real (uvicorn on 127.0.0.1, a free port) over a real store, with a recorded hand-off for
approved tasks instead of the daemon's scheduler."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from apple_flow.config import Settings
from apple_flow.daemon.deciding.approvals import Approvals
from apple_flow.daemon.store import Approval, Store
from apple_flow.daemon.store.web_logins import WebLoginTable
from apple_flow.health.running import DaemonState
from apple_flow.web.actions import WebDecisions
from apple_flow.web.app import WebContext, build_app
from apple_flow.web.limits import Limits
from apple_flow.web.server import WebServer

LOCAL_NAME = "apple-flow.localhost"
TOKEN = "test-token-0123456789abcdef-0123456789"


@dataclass
class Page:
    url: str
    store: Store
    approvals: Approvals
    started: list[Approval]
    logins: WebLoginTable

    @property
    def host(self) -> str:
        """The page's own name and port (``Host``): the page moves requests for 127.0.0.1 there."""
        return f"{LOCAL_NAME}:{self.port}"

    @property
    def origin(self) -> str:
        """What a browser on the page sends as ``Origin``."""
        return f"http://{self.host}"

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    def client(self, host: str | None = None) -> httpx.Client:
        """A client on 127.0.0.1 that names the page as a browser does (``apple-flow.localhost`` resolves to
        loopback in browsers, not necessarily in this machine's resolver)."""
        return httpx.Client(base_url=f"http://127.0.0.1:{self.port}", follow_redirects=False, timeout=10,
                            headers={"Host": self.host if host is None else host})

    def logged_in(self) -> httpx.Client:
        client = self.client()
        response = client.post("/login", data={"token": TOKEN})
        assert response.status_code == 303, response.text
        return client

    def csrf(self, client: httpx.Client, path: str = "/approvals") -> str:
        html = client.get(path).text
        marker = 'name="csrf" value="'
        return html[html.index(marker) + len(marker) :].split('"', 1)[0]


@pytest.fixture
def make_page(tmp_path: Path) -> Iterator[Callable[..., Page]]:
    """The page served over settings with these overrides (each call its own database)."""
    servers: list[tuple[WebServer, Store]] = []

    def make(limits: Limits | None = None, **overrides: Any) -> Page:
        db_path = tmp_path / f"relay-{len(servers)}.db" if servers else tmp_path / "relay.db"
        settings = Settings(_env_file=None, db_path=db_path, web_port=0, **overrides)  # type: ignore[call-arg]
        store = Store(settings.db_path)
        approvals = Approvals(store.approvals, ttl_minutes=20)
        started: list[Approval] = []
        decisions = WebDecisions(store, approvals, started.append)
        state = DaemonState(channel="console", connector=settings.connector, connector_status="ready",
                            started_at=time.time() - 5)
        logins = store.web_logins
        context = WebContext(settings=settings, store=store, decisions=decisions, state=lambda: state)
        server = WebServer(build_app(context, TOKEN), "127.0.0.1", 0, settings.web.local_name, limits)
        url = server.start()
        servers.append((server, store))
        return Page(url, store, approvals, started, logins)

    try:
        yield make
    finally:
        for server, store in servers:
            server.stop()
            store.close()


@pytest.fixture
def page(make_page: Callable[..., Page]) -> Page:
    return make_page()
