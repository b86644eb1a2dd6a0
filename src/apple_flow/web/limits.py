"""Bounds on what a client can hold of the daemon's process through the page: open connections and the time to send
a request. The page runs inside the daemon, so every socket it keeps is a file descriptor the agent's next run
cannot have; uvicorn alone closes an idle connection only after a response, never one that sends nothing or half a
request.

``limited_protocol`` is uvicorn's HTTP/1.1 protocol (h11) with two additions: a connection beyond
``max_connections`` is closed as soon as it is accepted, and a request whose headers and body have not all arrived
``request_seconds`` after its first byte (or after the connection opened) is cut off.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Limits:
    max_connections: int = 64  # open at once; a browser polling the page keeps one to six
    request_seconds: float = 10.0  # to send a whole request (headers and body)
    keep_alive_seconds: float = 5.0  # idle between requests
    max_header_bytes: int = 16 * 1024  # h11's buffer for an incomplete request line and headers
    # Connections taken from the kernel's queue in one go: asyncio accepts this many before any of them is closed,
    # so it bounds the descriptors a burst holds for a moment (uvicorn's default is 2048).
    accept_burst: int = 16


class QuietLog:
    """Logs a kind of event that a client can cause at will (a refused connection, a request cut short) as one
    line the first time and then at most once a ``interval`` with the count since: never a traceback per event."""

    def __init__(self, what: str, interval: float = 60.0) -> None:
        self._what = what
        self._interval = interval
        self._lock = threading.Lock()
        self._count = 0
        self._last = -interval
        self.noted = 0  # events told of in all, logged or not

    def note(self) -> None:
        now = time.monotonic()
        with self._lock:
            self.noted += 1
            self._count += 1
            if now - self._last < self._interval:
                return
            count, self._count, self._last = self._count, 0, now
        log.warning("web page: %s (%d since the last note)", self._what, count)


REFUSED = QuietLog("a connection over the limit was closed")
CUT_OFF = QuietLog("a request that was not sent in time was cut off")
OUT_OF_FILES = QuietLog("no file descriptor left to accept a connection (the open-file limit); it waits in the queue")
OVER_CONCURRENCY = QuietLog("a request at the connection limit was answered 503 (uvicorn: Exceeded concurrency limit)")


class _CountedOverConcurrency(logging.Filter):
    """uvicorn logs "Exceeded concurrency limit." once per request it answers 503 (3,780 lines in 15 s under a
    flood): each is counted in ``OVER_CONCURRENCY`` instead, which says so at most once a minute."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.getMessage().startswith("Exceeded concurrency limit"):
            OVER_CONCURRENCY.note()
            return False
        return True


_OVER_CONCURRENCY_FILTER = _CountedOverConcurrency()


def _quiet_accept_errors(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """asyncio logs every failed accept with a traceback (once a second while the limit lasts); one line a minute
    says as much. Anything else goes to asyncio's own handler."""
    if str(context.get("message", "")).startswith("socket.accept() out of system resource"):
        OUT_OF_FILES.note()
        return
    loop.default_exception_handler(context)


def limited_protocol(limits: Limits) -> type[H11Protocol]:
    # uvicorn's own logger for its protocols; adding the same filter again does nothing.
    logging.getLogger("uvicorn.error").addFilter(_OVER_CONCURRENCY_FILTER)

    class LimitedH11Protocol(H11Protocol):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._request_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            if self.loop.get_exception_handler() is None:
                self.loop.set_exception_handler(_quiet_accept_errors)
            super().connection_made(transport)
            if len(self.connections) > limits.max_connections:
                REFUSED.note()
                transport.abort()
                return
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            if self._request_timer is None and self.conn.their_state in (h11.IDLE, h11.SEND_BODY):
                self._arm()
            super().data_received(data)
            if self.conn.their_state not in (h11.IDLE, h11.SEND_BODY):  # the request is all in (or the end)
                self._disarm()

        def _arm(self) -> None:
            self._disarm()
            self._request_timer = self.loop.call_later(limits.request_seconds, self._too_slow)

        def _disarm(self) -> None:
            if self._request_timer is not None:
                self._request_timer.cancel()
                self._request_timer = None

        def _too_slow(self) -> None:
            self._request_timer = None
            if self.conn.their_state in (h11.IDLE, h11.SEND_BODY) and not self.transport.is_closing():
                if self.conn.their_state is h11.SEND_BODY or self.conn.trailing_data[0]:
                    CUT_OFF.note()  # a request was under way (a connection opened and left unused is no news)
                self.transport.abort()

    return LimitedH11Protocol
