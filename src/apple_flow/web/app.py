"""The web page's routes (Starlette): server-rendered HTML (Jinja2, autoescaped), a small script that refreshes the
live parts every couple of seconds, no build step.

Every route but the login page and the static files needs a valid session (``auth.Guard``); without one a page
redirects to the login and a live fragment answers 401, both with nothing of the daemon's data in them. POSTs
need the CSRF field and the page's own origin.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from apple_flow.config import Settings
from apple_flow.daemon.store import Store
from apple_flow.health.running import DaemonState, health_checks
from apple_flow.times import duration, moment
from apple_flow.web import runview
from apple_flow.web.actions import WebDecisions
from apple_flow.web.auth import COOKIE, Guard, is_ip, is_loopback_name, same_origin, split_host
from apple_flow.web.limits import QuietLog

log = logging.getLogger(__name__)

HERE = Path(__file__).parent
MAX_FORM_BYTES = 16 * 1024
LIVE_SECONDS = 2

SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
        "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",  # "no-referrer" would make the browser send "Origin: null" on our own POSTs
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}


@dataclass
class WebContext:
    """What the page reads and may do: the daemon's store, settings, state, decisions and logins."""

    settings: Settings
    store: Store
    decisions: WebDecisions
    state: Callable[[], DaemonState]


class FormRefused(Exception):
    """A POST body refused before or while it was read: too large, not the page's form, or the client left."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


DISCONNECTS = QuietLog("a browser went away while sending a form")


def build_app(context: WebContext, token: str) -> Starlette:
    logins = context.store.web_logins
    guard = Guard(token, logins)
    session_seconds = context.settings.web.session_days * 24 * 3600
    if logins.forget_if_token_changed(token):
        log.warning("the web token changed: every browser logged in before must log in again")
    templates = Environment(
        loader=FileSystemLoader(HERE / "templates"), autoescape=select_autoescape(default=True),
        trim_blocks=True, lstrip_blocks=True,
    )
    templates.filters["duration"] = _duration
    templates.filters["clock"] = _clock
    templates.filters["tokens"] = _tokens
    base_host = _base_host(context.settings.web.base_url)

    def cookie_of(request: Request) -> str:
        return request.cookies.get(COOKIE, "")

    def viewer(request: Request) -> str | None:
        """Whose runs and approvals this session sees and decides: None for the owner (the token login), else the
        sender whose login link opened it, who has their own rights only, as by text. A session of any other
        kind sees nothing (a sender no run has)."""
        found = guard.session(cookie_of(request))
        via = found.via if found is not None else ""
        if via == "token":
            return None
        return via.removeprefix("link:") if via.startswith("link:") else "\x00"

    def render(request: Request, name: str, status: int = 200, **values: Any) -> HTMLResponse:
        session = cookie_of(request)
        logged_in = values.pop("logged_in", None)
        if logged_in is None:
            logged_in = guard.session(session) is not None
        html = templates.get_template(name).render(
            csrf=guard.csrf_token(session) if logged_in else "", live_seconds=LIVE_SECONDS, path=request.url.path,
            pending_count=len(context.decisions.pending(viewer(request))) if logged_in else 0,
            owner=logged_in and viewer(request) is None, **values,
        )
        return HTMLResponse(html, status_code=status, headers=SECURITY_HEADERS)

    def authorized(request: Request) -> bool:
        return guard.session(cookie_of(request)) is not None

    def allowed_origins(request: Request) -> set[str]:
        return {request.headers.get("host", "").lower()} | ({base_host} if base_host else set())

    def refused(status: int, message: str) -> Response:
        return Response(message, status_code=status, media_type="text/plain", headers=SECURITY_HEADERS)

    def logged_in_response(request: Request, where: str, via: str) -> Response:
        response = RedirectResponse(where, status_code=303, headers=SECURITY_HEADERS)
        response.set_cookie(
            COOKIE, logins.start_session(via, session_seconds), max_age=session_seconds, path="/", httponly=True,
            samesite="strict", secure=_https(request),
        )
        return response

    def page(handler: Callable[[Request], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
        async def guarded(request: Request) -> Response:
            if not authorized(request):
                if request.method == "GET" and request.query_params.get("fragment") is None:
                    wanted = request.url.path + (f"?{request.url.query}" if request.url.query else "")
                    where = "/login" if wanted in ("/", "/runs") else f"/login?{urlencode({'next': wanted})}"
                    return RedirectResponse(where, status_code=303, headers=SECURITY_HEADERS)
                return refused(401, "Log in first.")
            if request.method == "POST":
                if not same_origin(request.headers, allowed_origins(request)):
                    return refused(403, "Refused: this request did not come from the apple-flow page.")
                try:
                    form = await _form(request)
                except FormRefused as exc:
                    return refused(exc.status, exc.message)
                if not guard.csrf_valid(cookie_of(request), form.get("csrf")):
                    return refused(403, "Refused: this request did not come from the apple-flow page.")
                request.state.form = form
            return await handler(request)

        return guarded

    async def login_page(request: Request) -> Response:
        wanted = _safe_next(request.query_params.get("next"))
        if authorized(request):
            return RedirectResponse(wanted, status_code=303, headers=SECURITY_HEADERS)
        return render(request, "login.html", logged_in=False, next=wanted)

    async def login(request: Request) -> Response:
        # The origin and the size are checked before a byte of the body is read.
        if not same_origin(request.headers, allowed_origins(request)):
            return render(request, "login.html", 403, logged_in=False, error="This form must be sent from this page.")
        try:
            form = await _form(request)
        except FormRefused as exc:
            return render(request, "login.html", exc.status, logged_in=False, error=exc.message)
        wanted = _safe_next(form.get("next"))
        if guard.check_token(form.get("token", "")):
            return logged_in_response(request, wanted, "token")
        if guard.too_many_wrong():
            return render(request, "login.html", 429, logged_in=False, next=wanted,
                          error="Too many wrong tokens. Wait a minute.")
        return render(request, "login.html", 401, logged_in=False, next=wanted, error="Wrong token.")

    async def link_page(request: Request) -> Response:
        # A GET never logs in: Messages fetches a link's preview itself, which would use the link up.
        if not logins.link_usable(request.path_params["secret"]):
            return render(request, "link.html", 410, logged_in=False, usable=False)
        return render(request, "link.html", logged_in=False, usable=True)

    async def link_login(request: Request) -> Response:
        if not same_origin(request.headers, allowed_origins(request)):
            return render(request, "link.html", 403, logged_in=False, usable=False,
                          error="This form must be sent from this page.")
        sender = logins.redeem_link(request.path_params["secret"])
        if sender is None:
            return render(request, "link.html", 410, logged_in=False, usable=False)
        log.info("web page: logged in with the link texted to %s", sender)
        return logged_in_response(request, "/runs", f"link:{sender}")

    async def logout(request: Request) -> Response:
        logins.end_session(cookie_of(request))
        response = RedirectResponse("/login", status_code=303, headers=SECURITY_HEADERS)
        response.delete_cookie(COOKIE, path="/")
        return response

    async def home(request: Request) -> Response:
        return RedirectResponse("/runs", status_code=303, headers=SECURITY_HEADERS)

    async def runs(request: Request) -> Response:
        sender = viewer(request)
        rows = runview.run_rows(context.store, now=time.time(), sender=sender)
        name = "runs_table.html" if request.query_params.get("fragment") is not None else "runs.html"
        return render(request, name, rows=rows, notice=_decided_notice(context.store,
                                                                         request.query_params.get("approved"), sender))

    async def run(request: Request) -> Response:
        detail = runview.run_detail(context.store, request.path_params["run_id"], now=time.time())
        sender = viewer(request)
        if detail is None or (sender is not None and detail.row.run.sender != sender):
            return render(request, "missing.html", 404, what=f"No run {request.path_params['run_id']}.")
        name = "run_body.html" if request.query_params.get("fragment") is not None else "run.html"
        return render(request, name, detail=detail, base_url=context.settings.web.base_url)

    async def approvals(request: Request) -> Response:
        name = "approvals_list.html" if request.query_params.get("fragment") is not None else "approvals.html"
        return render(request, name, pending=context.decisions.pending(viewer(request)), now=time.time())

    async def pending_count(request: Request) -> Response:
        return render(request, "pending_count.html")

    async def approve(request: Request) -> Response:
        approval_id = request.path_params["approval_id"]
        sender = viewer(request)
        approved, why = context.decisions.approve(approval_id, request.state.form.get("notes", ""), sender)
        if approved is not None and approved.is_question:
            return render(request, "approvals.html", 200, pending=context.decisions.pending(sender), now=time.time(),
                          notice=f"Approved {approved.id}: the agent is told.")
        if approved is not None:
            return RedirectResponse(f"/runs?approved={approved.id}", status_code=303, headers=SECURITY_HEADERS)
        return render(request, "approvals.html", 409, pending=context.decisions.pending(sender), now=time.time(),
                      error=why)

    async def deny(request: Request) -> Response:
        sender = viewer(request)
        denied, why = context.decisions.deny(request.path_params["approval_id"], sender)
        status = 200 if denied else 409
        message = {"notice": why} if denied else {"error": why}
        return render(request, "approvals.html", status, pending=context.decisions.pending(sender), now=time.time(),
                      **message)

    async def health(request: Request) -> Response:
        if viewer(request) is not None:  # the daemon's state, other senders' SMS counts: the owner's view only
            return render(request, "missing.html", 403,
                          what="The health view is the Mac owner's: log in with the token on this Mac.")
        state = context.state()
        checks = health_checks(context.settings, context.store, state)
        return render(request, "health.html", checks=checks, state=state, now=time.time())

    routes = [
        Route("/login", login_page, methods=["GET"]),
        Route("/login", login, methods=["POST"]),
        Route("/login/link/{secret:str}", link_page, methods=["GET"]),
        Route("/login/link/{secret:str}", link_login, methods=["POST"]),
        Route("/logout", page(logout), methods=["POST"]),
        Route("/", page(home), methods=["GET"]),
        Route("/runs", page(runs), methods=["GET"]),
        Route("/runs/{run_id:str}", page(run), methods=["GET"]),
        Route("/approvals", page(approvals), methods=["GET"]),
        Route("/approvals/count", page(pending_count), methods=["GET"]),
        Route("/approvals/{approval_id:str}/approve", page(approve), methods=["POST"]),
        Route("/approvals/{approval_id:str}/deny", page(deny), methods=["POST"]),
        Route("/health", page(health), methods=["GET"]),
        Mount("/static", app=StaticFiles(directory=HERE / "static"), name="static"),
    ]
    hosts = KnownHosts(context.settings.web.local_name, base_host)
    return Starlette(routes=routes, middleware=[Middleware(HostCheck, hosts=hosts)])


def _decided_notice(store: Store, approval_id: str | None, sender: str | None = None) -> str | None:
    """What became of the request named by ``?approved=``, as the store has it now (``sender``: only theirs)."""
    if not approval_id:
        return None
    approval = store.approvals.get_approval(approval_id)
    if approval is None or (sender is not None and approval.sender != sender):
        return None
    if approval.state == "approved":
        return f"Approved {approval.id}: it runs now; its run appears below."
    if approval.state == "denied":
        return f"{approval.id} was denied: it does not run."
    return f"{approval.id} is still waiting for approval."


async def _form(request: Request) -> dict[str, str]:
    """The urlencoded form (the page's forms send nothing else), read with a cap: a declared size over the cap is
    refused before reading, and reading stops as soon as the cap is passed."""
    if request.headers.get("content-type", "").split(";")[0].strip() != "application/x-www-form-urlencoded":
        raise FormRefused(403, "Refused: this request did not come from the apple-flow page.")
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > MAX_FORM_BYTES):
        raise FormRefused(413, "Refused: the form is too large.")
    body = bytearray()
    try:
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_FORM_BYTES:
                raise FormRefused(413, "Refused: the form is too large.")
    except ClientDisconnect:
        DISCONNECTS.note()
        raise FormRefused(400, "The browser went away while sending the form.") from None
    try:
        fields = parse_qs(body.decode("utf-8"), keep_blank_values=True, max_num_fields=20)
    except (UnicodeDecodeError, ValueError):
        raise FormRefused(400, "Refused: not a form of this page.") from None
    return {key: values[-1] for key, values in fields.items()}


def _safe_next(wanted: str | None) -> str:
    """Where a login returns to: a page of this site (a path), never another site; else the runs."""
    if not wanted or len(wanted) > 500 or not wanted.startswith("/") or wanted.startswith("//"):
        return "/runs"
    if "\\" in wanted or any(ord(c) < 32 for c in wanted) or wanted.startswith("/login"):
        return "/runs"
    return wanted


@dataclass(frozen=True)
class KnownHosts:
    local_name: str  # the page's own name on this Mac ("" when it has none)
    base_host: str | None  # APPLE_FLOW_WEB_BASE_URL's host[:port]

    def known(self, name: str) -> bool:
        """IP addresses (a rebinding attack needs a name), localhost, the page's name, the base URL's host."""
        if is_ip(name) or name == "localhost" or (self.local_name and name == self.local_name):
            return True
        return self.base_host is not None and name == split_host(self.base_host)[0]


class HostCheck:
    """Answers only requests for a known host name; on this Mac, moves a browser from 127.0.0.1 or localhost to
    the page's own name (where its cookie goes to no other local server)."""

    def __init__(self, app: ASGIApp, hosts: KnownHosts) -> None:
        self._app = app
        self._hosts = hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        host = Headers(scope=scope).get("host", "").strip().lower()
        name, port = split_host(host)
        if not name or not self._hosts.known(name):
            response = Response(
                f"Unknown host {name[:100] or '(none)'}: this page answers only to its own addresses (a page "
                "elsewhere could otherwise reach it through a name of its own). If this is how you reach it, set "
                f"APPLE_FLOW_WEB_BASE_URL=https://{name[:100] or '<host>'} and restart apple-flow.",
                status_code=421, media_type="text/plain", headers=SECURITY_HEADERS,
            )
            await response(scope, receive, send)
            return
        local = self._hosts.local_name
        if local and is_loopback_name(name) and (self._hosts.base_host or "") != host:
            port = port or (scope.get("server") or ("", 80))[1]
            target = f"http://{local}:{port}"
            if scope["method"] in ("GET", "HEAD"):
                query = scope.get("query_string", b"").decode("latin-1")
                response = RedirectResponse(target + scope["path"] + (f"?{query}" if query else ""),
                                            status_code=307, headers=SECURITY_HEADERS)
            else:
                response = Response(f"Use this page at {target}.", status_code=421, media_type="text/plain",
                                    headers=SECURITY_HEADERS)
            await response(scope, receive, send)
            return
        await self._app(scope, receive, send)


def _https(request: Request) -> bool:
    return request.url.scheme == "https" or request.headers.get("x-forwarded-proto") == "https"


def _base_host(base_url: str | None) -> str | None:
    return urlsplit(base_url).netloc.lower() if base_url else None


def _duration(seconds: float | None) -> str:
    return "" if seconds is None else duration(seconds)


def _clock(at: float | None) -> str:
    return "" if at is None else moment(at)


def _tokens(row: runview.RunRow) -> str:
    if row.input_tokens is None and row.output_tokens is None:
        return ""
    return f"{row.input_tokens or 0:,} in / {row.output_tokens or 0:,} out"
