"""The web page's logins, kept so that the server can end them: a session per browser that logged in (its cookie
holds a random secret; the table its SHA-256), and one-time login links texted by `web` (the daemon records one
with the reply that holds it; the page redeems it).

- A session lasts what the page gives it (``APPLE_FLOW_WEB_SESSION_DAYS``); logging out deletes it, so a copied
  cookie dies with it. A new web token ends every session (the token's fingerprint is kept in ``meta``).
- A login link works once, for ``APPLE_FLOW_WEB_LINK_MINUTES``: redeeming it marks it used in the same statement
  that checks it, so two taps cannot both log in.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass

from apple_flow.daemon.store.database import Database
from apple_flow.daemon.store.meta import MetaTable

TOKEN_FINGERPRINT_KEY = "web_token_fingerprint"
SECRET_BYTES = 32  # 256 bits: as strong as the token itself
MAX_SECRET_CHARS = 200  # anything longer is no secret of ours (and is not hashed)
KEEP_USED_LINKS_SECONDS = 24 * 3600


@dataclass(frozen=True)
class Session:
    created_at: float
    expires_at: float
    via: str  # token | link:<sender>


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def _plausible(secret: str | None) -> bool:
    return bool(secret) and len(secret or "") <= MAX_SECRET_CHARS


class WebLoginTable:
    def __init__(self, db: Database, meta: MetaTable) -> None:
        self._db = db
        self._meta = meta

    def forget_if_token_changed(self, token: str) -> bool:
        """Ends every session when the login token is not the one they were made under. True if it ended them."""
        fingerprint = digest(f"apple-flow web token:{token}")
        with self._db.transaction():
            known = self._meta.get_meta(TOKEN_FINGERPRINT_KEY)
            if known == fingerprint:
                return False
            self._db.write("DELETE FROM web_sessions")
            self._meta.set_meta(TOKEN_FINGERPRINT_KEY, fingerprint)
            return known is not None

    # --- sessions --------------------------------------------------------------------------------------------

    def start_session(self, via: str, seconds: float) -> str:
        """A new session for ``seconds``; returns the cookie's value (kept nowhere but in the browser)."""
        secret = secrets.token_urlsafe(SECRET_BYTES)
        now = self._db.now()
        with self._db.transaction():
            self._db.write("DELETE FROM web_sessions WHERE expires_at <= ?", (now,))
            self._db.write(
                "INSERT INTO web_sessions (id, created_at, expires_at, via) VALUES (?, ?, ?, ?)",
                (digest(secret), now, now + seconds, via),
            )
        return secret

    def session(self, cookie: str | None) -> Session | None:
        """The live session this cookie holds, or None (no cookie, ended, expired, made up)."""
        if cookie is None or not _plausible(cookie):
            return None
        rows = self._db.rows(
            "SELECT created_at, expires_at, via FROM web_sessions WHERE id = ? AND expires_at > ?",
            (digest(cookie), self._db.now()),
        )
        return Session(float(rows[0][0]), float(rows[0][1]), str(rows[0][2])) if rows else None

    def end_session(self, cookie: str | None) -> bool:
        if cookie is None or not _plausible(cookie):
            return False
        return self._db.write("DELETE FROM web_sessions WHERE id = ?", (digest(cookie),)).rowcount > 0

    def count_sessions(self) -> int:
        rows = self._db.rows("SELECT COUNT(*) FROM web_sessions WHERE expires_at > ?", (self._db.now(),))
        return int(rows[0][0])

    # --- one-time login links --------------------------------------------------------------------------------

    def add_link(self, secret: str, sender: str, seconds: float) -> None:
        """Records a login link's secret (made by the `web` command for ``sender``), valid once for ``seconds``;
        in the transaction that records the reply holding it."""
        now = self._db.now()
        with self._db.transaction():
            self._db.write("DELETE FROM web_links WHERE expires_at <= ?", (now - KEEP_USED_LINKS_SECONDS,))
            self._db.write(
                "INSERT INTO web_links (id, sender, created_at, expires_at) VALUES (?, ?, ?, ?)",
                (digest(secret), sender, now, now + seconds),
            )

    def link_usable(self, secret: str) -> bool:
        """Whether this link would log in now (shown before the tap; redeeming decides)."""
        if not _plausible(secret):
            return False
        rows = self._db.rows(
            "SELECT 1 FROM web_links WHERE id = ? AND used_at IS NULL AND expires_at > ?",
            (digest(secret), self._db.now()),
        )
        return bool(rows)

    def redeem_link(self, secret: str) -> str | None:
        """Uses the link up; returns the sender it was made for, or None (unknown, used or expired)."""
        if not _plausible(secret):
            return None
        now = self._db.now()
        with self._db.transaction():
            used = self._db.write(
                "UPDATE web_links SET used_at = ? WHERE id = ? AND used_at IS NULL AND expires_at > ?",
                (now, digest(secret), now),
            )
            if used.rowcount != 1:
                return None
            rows = self._db.rows("SELECT sender FROM web_links WHERE id = ?", (digest(secret),))
        return str(rows[0][0])
