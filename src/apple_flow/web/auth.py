"""Who may see the page and change anything: the token or a one-time link, the session they buy, the CSRF check,
and which Host names the page answers to.

- The token (``APPLE_FLOW_WEB_TOKEN``, 32 characters or more) is asked once, on the login page; a login link texted
  by `web` does the same in one tap. Without a live session nothing else is served: no run, no title, no count.
- The session cookie holds a random secret; the server keeps its digest (``daemon.store.web_logins``), so
  logging out ends it for good, and it lasts days, not a month. It is HttpOnly, SameSite=Strict, Path=/ and Secure
  over https. Browsers send a cookie to every port of the host that set it, so on this Mac the page is served
  under a name of its own (``APPLE_FLOW_WEB_LOCAL_NAME``, apple-flow.localhost): another program listening on
  127.0.0.1 or localhost never receives it.
- Every POST needs the page's own origin (``Origin``, else ``Sec-Fetch-Site``), checked before its body is read,
  and, once logged in, a form field ``csrf`` = HMAC(token, session).
- Only known Host names are answered (DNS rebinding): IP addresses, ``localhost``, the page's own name and the host
  of ``APPLE_FLOW_WEB_BASE_URL``.
- Wrong tokens are counted: past ``LOGIN_FAILURES`` in ``LOGIN_WINDOW_SECONDS`` a wrong token is told to wait. The
  right token always logs in: a local process sending wrong tokens cannot lock the owner out, and a token of 32
  characters or more cannot be guessed at any rate.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from urllib.parse import urlsplit

from apple_flow.daemon.store.web_logins import Session, WebLoginTable
from apple_flow.sections import WEB_TOKEN_MIN_CHARS

COOKIE = "apple_flow_session"
LOGIN_FAILURES = 10
LOGIN_WINDOW_SECONDS = 60.0
MIN_TOKEN_CHARS = WEB_TOKEN_MIN_CHARS


def new_token() -> str:
    return secrets.token_urlsafe(32)


class Guard:
    def __init__(self, token: str, logins: WebLoginTable, clock: Callable[[], float] = time.monotonic) -> None:
        self._key = token.encode()
        self.logins = logins
        self._clock = clock
        self._failures: deque[float] = deque(maxlen=LOGIN_FAILURES + 1)
        self._lock = threading.Lock()

    # --- login -----------------------------------------------------------------------------------------------

    def check_token(self, given: str) -> bool:
        """Whether ``given`` is the token. A wrong one is counted (see ``too_many_wrong``)."""
        ok = hmac.compare_digest(given.strip().encode(), self._key)
        if not ok:
            with self._lock:
                self._failures.append(self._clock())
        return ok

    def too_many_wrong(self) -> bool:
        """Whether more than ``LOGIN_FAILURES`` wrong tokens came within a window: a wrong one is then told to wait.
        Asked after the token was checked, so the right token is never refused."""
        with self._lock:
            return (len(self._failures) > LOGIN_FAILURES
                    and self._failures[0] > self._clock() - LOGIN_WINDOW_SECONDS)

    # --- session ---------------------------------------------------------------------------------------------

    def session(self, cookie: str | None) -> Session | None:
        return self.logins.session(cookie)

    # --- CSRF --------------------------------------------------------------------------------------------------

    def csrf_token(self, session: str) -> str:
        return self._sign("csrf", session)

    def csrf_valid(self, session: str, given: str | None) -> bool:
        return bool(given) and hmac.compare_digest(str(given), self.csrf_token(session))

    def _sign(self, purpose: str, value: str) -> str:
        return hmac.new(self._key, f"{purpose}:{value}".encode(), hashlib.sha256).hexdigest()


def same_origin(headers: Mapping[str, str], allowed: set[str]) -> bool:
    """Whether a state-changing request comes from the page itself. ``allowed`` holds the host[:port] forms the
    page is reached by (its Host header, and the base URL's). A request that names no origin (not a browser, or
    an old one) passes here and still needs its CSRF field."""
    origin = headers.get("origin")
    if origin is not None:
        if origin == "null":
            return False
        return urlsplit(origin).netloc.lower() in allowed
    site = headers.get("sec-fetch-site")
    return site is None or site in ("same-origin", "none")


def split_host(host: str) -> tuple[str, int | None]:
    """``name[:port]`` of a Host header, the name lower-case and without brackets; ("", None) when malformed."""
    host = host.strip().lower()
    if host.startswith("["):
        name, _, rest = host[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
        if rest and not rest.startswith(":"):
            return "", None
    else:
        name, _, port = host.partition(":")
    if port and not port.isdigit():
        return "", None
    return name.rstrip("."), int(port) if port else None


def is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def is_loopback_name(name: str) -> bool:
    """127.0.0.0/8, ::1 or ``localhost``: the names every local program shares (and with it, cookies); also the
    unspecified address (0.0.0.0, ::), which reaches this Mac's own servers too, and IPv4-mapped ones
    (``::ffff:127.0.0.1``, ``::ffff:7f00:1``)."""
    if name == "localhost":
        return True
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback or address.is_unspecified
