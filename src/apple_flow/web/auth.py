"""Who may see the page and change anything: the token, the session cookie it buys, the CSRF check.

- The token (``APPLE_FLOW_WEB_TOKEN``) is asked once, on the login page. Without a valid session nothing else is
  served: no run, no title, no count.
- The session cookie holds no token: it is ``<issued>.<HMAC(token, issued)>``, so it dies when the token changes
  and after ``SESSION_SECONDS``. It is HttpOnly, SameSite=Strict, Path=/ and Secure when the page is reached over
  https (e.g. through ``tailscale serve``).
- Every POST needs a form field ``csrf`` = HMAC(token, session) and, when the browser says where it came from
  (``Origin``, else ``Sec-Fetch-Site``), the page's own origin. A form on another site, or on another port of this
  machine (same site to a browser, so SameSite alone would let the cookie through), is refused.
- Wrong tokens are slowed down: after ``LOGIN_FAILURES`` misses in ``LOGIN_WINDOW_SECONDS`` logins are refused for
  the rest of the window.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from urllib.parse import urlsplit

COOKIE = "apple_flow_session"
SESSION_SECONDS = 30 * 24 * 3600
LOGIN_FAILURES = 10
LOGIN_WINDOW_SECONDS = 60.0


def new_token() -> str:
    return secrets.token_urlsafe(32)


class Guard:
    def __init__(self, token: str, clock: Callable[[], float] = time.time) -> None:
        self._key = token.encode()
        self._clock = clock
        self._failures: deque[float] = deque()
        self._lock = threading.Lock()

    # --- login -----------------------------------------------------------------------------------------------

    def login_allowed(self) -> bool:
        now = self._clock()
        with self._lock:
            while self._failures and self._failures[0] < now - LOGIN_WINDOW_SECONDS:
                self._failures.popleft()
            return len(self._failures) < LOGIN_FAILURES

    def check_token(self, given: str) -> bool:
        ok = hmac.compare_digest(given.strip().encode(), self._key)
        if not ok:
            with self._lock:
                self._failures.append(self._clock())
        return ok

    # --- session ---------------------------------------------------------------------------------------------

    def new_session(self) -> str:
        issued = str(int(self._clock()))
        return f"{issued}.{self._sign('session', issued)}"

    def session_valid(self, cookie: str | None) -> bool:
        if not cookie or "." not in cookie:
            return False
        issued, _, signature = cookie.partition(".")
        if not issued.isdigit() or not hmac.compare_digest(signature, self._sign("session", issued)):
            return False
        age = self._clock() - int(issued)
        return -60 <= age <= SESSION_SECONDS

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
