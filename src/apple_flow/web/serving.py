"""uvicorn, quiet: a server whose event loop sleeps between requests, and responses dated as they are sent."""

from __future__ import annotations

import asyncio
import contextlib
from email.utils import formatdate

import uvicorn
from starlette.types import ASGIApp, Message, Receive, Scope, Send


class QuietServer(uvicorn.Server):
    """uvicorn's server without its 10 Hz tick: between requests the event loop has nothing to do and sleeps.
    ``request_exit()`` (from any thread) replaces setting ``should_exit``, which only the tick would see."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._exit: asyncio.Event | None = None

    async def main_loop(self) -> None:
        self._loop, self._exit = asyncio.get_running_loop(), asyncio.Event()
        await self.on_tick(0)  # the default headers, once (without Date: see DatedApp)
        if not self.should_exit:  # checked after _exit is set: a request_exit() before it is seen either way
            await self._exit.wait()

    def request_exit(self) -> None:
        self.should_exit = True
        loop, event = self._loop, self._exit
        if loop is not None and event is not None:
            with contextlib.suppress(RuntimeError):  # the loop has already closed
                loop.call_soon_threadsafe(event.set)


class DatedApp:
    """Adds the ``Date`` header to each HTTP response as it starts (uvicorn's own is refreshed by its tick)."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return

        async def send_dated(message: Message) -> None:
            if message["type"] == "http.response.start":
                date = (b"date", formatdate(usegmt=True).encode())
                message = {**message, "headers": [date, *message.get("headers", [])]}
            await send(message)

        await self._app(scope, receive, send_dated)
