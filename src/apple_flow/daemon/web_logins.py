"""The web page's logins, kept in the daemon's database so that the server can end them: a session per browser that
logged in (its cookie holds a random secret; the table its SHA-256), and one-time login links texted by `web`.

- A session lasts ``APPLE_FLOW_WEB_SESSION_DAYS``; logging out deletes it, so a copied cookie dies with it.
  A new web token ends every session (the token's fingerprint is kept in ``meta``).
- A login link works once, for ``APPLE_FLOW_WEB_LINK_MINUTES``: redeeming it marks it used in the same statement
  that checks it, so two clicks cannot both log in.

Here, below the web page, because the daemon records a link with the reply that holds it; the page checks and ends
sessions through the same class.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass

from apple_flow.daemon.store import Store

TOKEN_FINGERPRINT_KEY = "web_token_fingerprint"
SECRET_BYTES = 32  # 256 bits: as strong as the token itself


@dataclass(frozen=True)
class Session:
    created_at: float
    expires_at: float
    via: str  # token | link:<sender>


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


class WebLogins:
    """Sessions and login links over the store's connection (its lock and transactions)."""

    def __init__(self, store: Store, session_days: int, link_minutes: int) -> None:
        self._store = store
        self.session_seconds = session_days * 24 * 3600
        self.link_seconds = link_minutes * 60

    def forget_if_token_changed(self, token: str) -> bool:
        """Ends every session when the login token is not the one they were made under. True if it ended them."""
        fingerprint = digest(f"apple-flow web token:{token}")
        with self._store.transaction():
            known = self._store.meta(TOKEN_FINGERPRINT_KEY)
            if known == fingerprint:
                return False
            self._store._write("DELETE FROM web_sessions")
            self._store.set_meta(TOKEN_FINGERPRINT_KEY, fingerprint)
            return known is not None

    # --- sessions --------------------------------------------------------------------------------------------

    def start(self, via: str) -> str:
        """A new session; returns the cookie's value (kept nowhere but in the browser)."""
        secret = secrets.token_urlsafe(SECRET_BYTES)
        now = self._store.now()
        with self._store.transaction():
            self._store._write("DELETE FROM web_sessions WHERE expires_at <= ?", (now,))
            self._store._write(
                "INSERT INTO web_sessions (id, created_at, expires_at, via) VALUES (?, ?, ?, ?)",
                (digest(secret), now, now + self.session_seconds, via),
            )
        return secret

    def session(self, cookie: str | None) -> Session | None:
        """The live session this cookie holds, or None (no cookie, ended, expired, made up)."""
        if not cookie or len(cookie) > 200:
            return None
        rows = self._store._rows(
            "SELECT created_at, expires_at, via FROM web_sessions WHERE id = ? AND expires_at > ?",
            (digest(cookie), self._store.now()),
        )
        return Session(float(rows[0][0]), float(rows[0][1]), str(rows[0][2])) if rows else None

    def end(self, cookie: str | None) -> bool:
        if not cookie:
            return False
        return self._store._write("DELETE FROM web_sessions WHERE id = ?", (digest(cookie),)).rowcount > 0

    def end_all(self) -> int:
        return int(self._store._write("DELETE FROM web_sessions").rowcount)

    def count(self) -> int:
        rows = self._store._rows("SELECT COUNT(*) FROM web_sessions WHERE expires_at > ?", (self._store.now(),))
        return int(rows[0][0])

    # --- one-time login links --------------------------------------------------------------------------------

    def add_link(self, secret: str, sender: str) -> None:
        """Records a login link's secret (made by the `web` command for ``sender``), valid once for
        ``link_seconds``. Called inside the transaction that records the reply holding it."""
        now = self._store.now()
        with self._store.transaction():
            self._store._write("DELETE FROM web_links WHERE expires_at <= ?", (now - 24 * 3600,))
            self._store._write(
                "INSERT INTO web_links (id, sender, created_at, expires_at) VALUES (?, ?, ?, ?)",
                (digest(secret), sender, now, now + self.link_seconds),
            )

    def link_usable(self, secret: str) -> bool:
        """Whether this link would log in now (shown before the click; redeeming decides)."""
        if not secret or len(secret) > 200:
            return False
        rows = self._store._rows(
            "SELECT 1 FROM web_links WHERE id = ? AND used_at IS NULL AND expires_at > ?",
            (digest(secret), self._store.now()),
        )
        return bool(rows)

    def redeem_link(self, secret: str) -> str | None:
        """Uses the link up; returns the sender it was made for, or None (unknown, used or expired)."""
        if not secret or len(secret) > 200:
            return None
        now = self._store.now()
        with self._store.transaction():
            used = self._store._write(
                "UPDATE web_links SET used_at = ? WHERE id = ? AND used_at IS NULL AND expires_at > ?",
                (now, digest(secret), now),
            )
            if used.rowcount != 1:
                return None
            rows = self._store._rows("SELECT sender FROM web_links WHERE id = ?", (digest(secret),))
        return str(rows[0][0])
