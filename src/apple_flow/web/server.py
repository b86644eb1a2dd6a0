"""Serving the page from inside the daemon: on a socket bound here at start (so a port in use is a clear error, not
an exit), by uvicorn on a thread of its own, stopped with the daemon. And the login token: from the settings, or
created at first start and written to the ``.env`` the daemon reads (mode 0600).

The page is loaded on first use: until someone opens it, the daemon has not imported the web stack (uvicorn,
Starlette, Jinja2 and the page's modules: about 7 MiB of an idle daemon's memory). A thread waits on the bound
socket without waking; the first connection waits in the socket's backlog while the page loads. Once serving, the
server sleeps between requests (``serving.QuietServer``)."""

from __future__ import annotations

import logging
import os
import select
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from apple_flow import envfile
from apple_flow.config import Settings
from apple_flow.daemon.deciding.approvals import Approvals
from apple_flow.daemon.store import Approval, Store
from apple_flow.health.running import DaemonState
from apple_flow.sections import is_loopback
from apple_flow.web.auth import MIN_TOKEN_CHARS, new_token

if TYPE_CHECKING:
    from starlette.types import ASGIApp

    from apple_flow.web.limits import Limits
    from apple_flow.web.serving import QuietServer

log = logging.getLogger(__name__)

TOKEN_VARIABLE = "APPLE_FLOW_WEB_TOKEN"
START_TIMEOUT_SECONDS = 15.0
STOP_TIMEOUT_SECONDS = 5.0


class WebError(RuntimeError):
    """The page cannot be served; the message says why and what to change."""


def ensure_token(settings: Settings, env_file: Path | None) -> str:
    """The login token: ``APPLE_FLOW_WEB_TOKEN``, else a new one written to ``env_file``. A ``.env`` that holds
    the token and that others may read is made private."""
    if settings.web.token:
        held = env_file is not None and env_file.is_file() and settings.web.token in _read(env_file)
        if held and env_file is not None and envfile.make_private(env_file):
            log.warning("%s holds the web token and was readable by others: made it private (0600)", env_file)
        return settings.web.token
    if env_file is None:
        raise WebError(
            f"No web token: set {TOKEN_VARIABLE} ({MIN_TOKEN_CHARS} characters or more), or start where a .env can be"
        )
    token = new_token()
    try:
        envfile.set_value(env_file, TOKEN_VARIABLE, token)
    except envfile.EnvFileError as exc:
        raise WebError(f"Cannot save a new web token: {exc}. Or set {TOKEN_VARIABLE} yourself.") from exc
    log.warning("created a token for the web page in %s (%s)", env_file.absolute(), TOKEN_VARIABLE)
    return token


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def start_page(
    settings: Settings, store: Store, run_approved: Callable[[Approval], None], state: Callable[[], DaemonState],
    env_file: Path | None,
) -> WebServer:
    """The daemon's web page, listening (loaded on the first connection); raises ``WebError`` when it cannot (no
    token can be had, address in use)."""
    token = ensure_token(settings, env_file)

    def build() -> ASGIApp:
        from apple_flow.web.actions import WebDecisions
        from apple_flow.web.app import WebContext, build_app

        decisions = WebDecisions(store, Approvals(store.approvals, settings.limits.approval_ttl_minutes), run_approved)
        return build_app(WebContext(settings=settings, store=store, decisions=decisions, state=state), token)

    server = WebServer(OnFirstConnection(build), settings.web.host, settings.web.port, settings.web.local_name)
    server.start()
    settings.note_web_port(server.port)  # refused to the agent's commands (port 0: the one the system chose)
    return server


@dataclass(frozen=True)
class OnFirstConnection:
    """A page to build when the first connection comes, not before."""

    build: Callable[[], ASGIApp]


class WebServer:
    """Serves ``app``: an ASGI app, served at once, or ``OnFirstConnection``."""

    def __init__(self, app: ASGIApp | OnFirstConnection, host: str, port: int, local_name: str = "",
                 limits: Limits | None = None) -> None:
        self._app = app
        self._host = host
        self._port = port
        self._local_name = local_name  # the page's own name, when it listens on loopback
        self._limits = limits  # None: web.limits' defaults (that module loads uvicorn, so not before it is needed)
        self._server: QuietServer | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._stopping = False
        self._wake: tuple[int, int] | None = None  # a pipe that ends the wait for the first connection
        self.url = ""
        self.port = 0  # the port it listens on, once started (the system's choice for port 0)

    def start(self) -> str:
        """Binds and serves; returns the page's URL. Raises ``WebError`` when the address cannot be used."""
        family = socket.AF_INET6 if ":" in self._host else socket.AF_INET
        try:
            sock = socket.create_server((self._host.strip("[]"), self._port), family=family)
        except OSError as exc:
            hint = " (another apple-flow, or another program, uses it)" if exc.errno in (48, 98) else ""
            raise WebError(
                f"Cannot serve the web page on {self._host}:{self._port}: {exc.strerror}{hint}. Set "
                "APPLE_FLOW_WEB_PORT to a free port, or APPLE_FLOW_WEB_ENABLED=false."
            ) from exc
        port = self.port = sock.getsockname()[1]
        host = f"[{self._host}]" if family == socket.AF_INET6 else self._host
        if self._local_name and is_loopback(self._host):
            host = self._local_name
        self.url = f"http://{host}:{port}"
        if isinstance(self._app, OnFirstConnection):
            self._wake = os.pipe()
            self._thread = threading.Thread(target=self._serve_on_first_connection, args=(sock, self._app.build),
                                            name="web", daemon=True)
            self._thread.start()
            return self.url
        server = self._server = _quiet_server(self._app, self._limits)
        self._thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="web", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while not server.started and self._thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.02)
        if not server.started:
            sock.close()
            raise WebError(f"The web page did not start on {self.url}; see the log above.")
        return self.url

    def _serve_on_first_connection(self, sock: socket.socket, build: Callable[[], ASGIApp]) -> None:
        assert self._wake is not None
        select.select([sock.fileno(), self._wake[0]], [], [])  # blocks until a connection or stop: no wake-ups
        try:
            server = None if self._stopping else _quiet_server(build(), self._limits)
        except Exception:  # a bug in the page must not take the daemon down; the daemon runs on without it
            log.exception("the web page could not be loaded: it is off until the daemon restarts")
            server = None
        with self._lock:
            if server is None or self._stopping:
                sock.close()
                return
            self._server = server
        server.run(sockets=[sock])

    def stop(self) -> None:
        with self._lock:
            self._stopping = True
            server = self._server
        if self._thread is None:
            return
        if server is None and self._wake is not None:
            os.write(self._wake[1], b"\0")
        elif server is not None:
            server.request_exit()
        self._thread.join(STOP_TIMEOUT_SECONDS)
        if self._thread.is_alive() and server is not None:
            server.force_exit = True
            self._thread.join(STOP_TIMEOUT_SECONDS)
        if self._wake is not None and not self._thread.is_alive():
            for fd in self._wake:
                os.close(fd)
            self._wake = None


def _quiet_server(app: ASGIApp, limits: Limits | None) -> QuietServer:
    """uvicorn serving ``app`` within ``limits`` (imported here: the web stack loads when the page is first
    served)."""
    import uvicorn

    from apple_flow.web.limits import Limits, limited_protocol
    from apple_flow.web.serving import DatedApp, QuietServer

    limits = limits or Limits()
    options: dict[str, Any] = {
        "log_level": "warning", "access_log": False, "lifespan": "off", "timeout_graceful_shutdown": 2,
        "server_header": False, "date_header": False, "http": limited_protocol(limits),
        "limit_concurrency": limits.max_connections, "timeout_keep_alive": int(max(1, limits.keep_alive_seconds)),
        "h11_max_incomplete_event_size": limits.max_header_bytes, "backlog": limits.accept_burst,
    }
    return QuietServer(uvicorn.Config(DatedApp(app), **options))
