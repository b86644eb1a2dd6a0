"""The web page's routes (Starlette): server-rendered HTML (Jinja2, autoescaped), a small script that refreshes the
live parts every couple of seconds, no build step.

Every route but the login page and the static files needs a valid session (``auth.Guard``); without one a page
redirects to the login and a live fragment answers 401, both with nothing of the daemon's data in them. POSTs
need the CSRF field and the page's own origin.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from apple_flow.config import Settings
from apple_flow.daemon.store import Store
from apple_flow.health.running import DaemonState, health_checks
from apple_flow.web import runview
from apple_flow.web.actions import WebDecisions
from apple_flow.web.auth import COOKIE, SESSION_SECONDS, Guard, same_origin

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
    """What the page reads and may do: the daemon's store, settings, state and decisions."""

    settings: Settings
    store: Store
    decisions: WebDecisions
    state: Callable[[], DaemonState]


def build_app(context: WebContext, token: str) -> Starlette:
    guard = Guard(token)
    templates = Environment(
        loader=FileSystemLoader(HERE / "templates"), autoescape=select_autoescape(default=True),
        trim_blocks=True, lstrip_blocks=True,
    )
    templates.filters["duration"] = _duration
    templates.filters["clock"] = _clock
    templates.filters["tokens"] = _tokens
    allowed_hosts = _base_hosts(context.settings.web_base_url)

    def render(request: Request, name: str, status: int = 200, **values: Any) -> HTMLResponse:
        session = request.cookies.get(COOKIE, "")
        html = templates.get_template(name).render(
            csrf=guard.csrf_token(session) if session else "", live_seconds=LIVE_SECONDS, path=request.url.path,
            **values,
        )
        return HTMLResponse(html, status_code=status, headers=SECURITY_HEADERS)

    def authorized(request: Request) -> bool:
        return guard.session_valid(request.cookies.get(COOKIE))

    def page(handler: Callable[[Request], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
        async def guarded(request: Request) -> Response:
            if not authorized(request):
                if request.method == "GET" and request.query_params.get("fragment") is None:
                    return RedirectResponse("/login", status_code=303, headers=SECURITY_HEADERS)
                return Response("Log in first.", status_code=401, media_type="text/plain",
                                headers=SECURITY_HEADERS)
            if request.method == "POST":
                refusal = await _post_refusal(request, guard, allowed_hosts)
                if refusal is not None:
                    return refusal
            return await handler(request)

        return guarded

    async def login_page(request: Request) -> Response:
        if authorized(request):
            return RedirectResponse("/runs", status_code=303, headers=SECURITY_HEADERS)
        return render(request, "login.html")

    async def login(request: Request) -> Response:
        if not same_origin(request.headers, allowed_hosts | {request.headers.get("host", "").lower()}):
            return render(request, "login.html", 403, error="This form must be sent from this page.")
        if not guard.login_allowed():
            return render(request, "login.html", 429, error="Too many wrong tokens. Wait a minute.")
        form = await _form(request)
        if form is None or not guard.check_token(form.get("token", "")):
            return render(request, "login.html", 401, error="Wrong token.")
        response = RedirectResponse("/runs", status_code=303, headers=SECURITY_HEADERS)
        response.set_cookie(
            COOKIE, guard.new_session(), max_age=SESSION_SECONDS, path="/", httponly=True, samesite="strict",
            secure=_https(request),
        )
        return response

    async def logout(request: Request) -> Response:
        response = RedirectResponse("/login", status_code=303, headers=SECURITY_HEADERS)
        response.delete_cookie(COOKIE, path="/")
        return response

    async def home(request: Request) -> Response:
        return RedirectResponse("/runs", status_code=303, headers=SECURITY_HEADERS)

    async def runs(request: Request) -> Response:
        rows = runview.run_rows(context.store, now=time.time())
        name = "runs_table.html" if request.query_params.get("fragment") is not None else "runs.html"
        approved = request.query_params.get("approved")
        notice = None
        if approved and context.store.approvals.get(approved) is not None:
            notice = f"Approved {approved}: it runs now; its run appears below."
        return render(request, name, rows=rows, notice=notice)

    async def run(request: Request) -> Response:
        detail = runview.run_detail(context.store, request.path_params["run_id"], now=time.time())
        if detail is None:
            return render(request, "missing.html", 404, what=f"No run {request.path_params['run_id']}.")
        name = "run_body.html" if request.query_params.get("fragment") is not None else "run.html"
        return render(request, name, detail=detail, base_url=context.settings.web_base_url)

    async def approvals(request: Request) -> Response:
        return render(request, "approvals.html", pending=context.decisions.pending(), now=time.time())

    async def decide(request: Request) -> Response:
        approval_id = request.path_params["approval_id"]
        verb = request.path_params["verb"]
        form = await _form(request) or {}
        if verb == "approve":
            approved, why = context.decisions.approve(approval_id, form.get("notes", ""))
            if approved is not None:
                return RedirectResponse(f"/runs?approved={approved.id}", status_code=303, headers=SECURITY_HEADERS)
        else:
            denied, why = context.decisions.deny(approval_id)
            if denied:
                return render(request, "approvals.html", pending=context.decisions.pending(), now=time.time(),
                              notice=why)
        return render(request, "approvals.html", 409, pending=context.decisions.pending(), now=time.time(),
                      error=why)

    async def health(request: Request) -> Response:
        state = context.state()
        checks = health_checks(context.settings, context.store, state)
        return render(request, "health.html", checks=checks, state=state, now=time.time())

    routes = [
        Route("/login", login_page, methods=["GET"]),
        Route("/login", login, methods=["POST"]),
        Route("/logout", page(logout), methods=["POST"]),
        Route("/", page(home), methods=["GET"]),
        Route("/runs", page(runs), methods=["GET"]),
        Route("/runs/{run_id:str}", page(run), methods=["GET"]),
        Route("/approvals", page(approvals), methods=["GET"]),
        Route("/approvals/{approval_id:str}/{verb:str}", page(decide), methods=["POST"]),
        Route("/health", page(health), methods=["GET"]),
        Mount("/static", app=StaticFiles(directory=HERE / "static"), name="static"),
    ]
    return Starlette(routes=routes)


async def _post_refusal(request: Request, guard: Guard, allowed_hosts: set[str]) -> Response | None:
    """A POST from anywhere but this page: wrong origin, or no CSRF field matching the session."""
    hosts = allowed_hosts | {request.headers.get("host", "").lower()}
    form = await _form(request)
    session = request.cookies.get(COOKIE, "")
    if not same_origin(request.headers, hosts) or form is None or not guard.csrf_valid(session, form.get("csrf")):
        return Response("Refused: this request did not come from the apple-flow page.", status_code=403,
                        media_type="text/plain", headers=SECURITY_HEADERS)
    return None


async def _form(request: Request) -> dict[str, str] | None:
    """The urlencoded form (the page's forms send nothing else), or None when it is not one or too large."""
    if request.headers.get("content-type", "").split(";")[0].strip() != "application/x-www-form-urlencoded":
        return None
    body = await request.body()
    if len(body) > MAX_FORM_BYTES:
        return None
    try:
        fields = parse_qs(body.decode("utf-8"), keep_blank_values=True, max_num_fields=20)
    except (UnicodeDecodeError, ValueError):
        return None
    return {key: values[-1] for key, values in fields.items()}


def _https(request: Request) -> bool:
    return request.url.scheme == "https" or request.headers.get("x-forwarded-proto") == "https"


def _base_hosts(base_url: str | None) -> set[str]:
    return {urlsplit(base_url).netloc.lower()} if base_url else set()


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return ""
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds // 60:.0f} min {seconds % 60:.0f} s"
    return f"{seconds // 3600:.0f} h {seconds % 3600 // 60:.0f} min"


def _clock(at: float | None) -> str:
    if at is None:
        return ""
    today = time.strftime("%Y-%m-%d") == time.strftime("%Y-%m-%d", time.localtime(at))
    return time.strftime("%H:%M:%S" if today else "%Y-%m-%d %H:%M", time.localtime(at))


def _tokens(row: runview.RunRow) -> str:
    if row.input_tokens is None and row.output_tokens is None:
        return ""
    return f"{row.input_tokens or 0:,} in / {row.output_tokens or 0:,} out"
