"""Running an ingress generator in a test without ever hanging it."""

from __future__ import annotations

import threading
from collections.abc import Iterator

from apple_flow.channels.base import InboundMessage, Skipped
from apple_flow.channels.imessage.ingress import IMessageIngress


def take(
    ingress: IMessageIngress, after: int, count: int, timeout: float = 5.0, skipped: list[Skipped] | None = None
) -> list[InboundMessage]:
    """Up to ``count`` messages after ``after`` (the rows skipped meanwhile go to ``skipped``); gives up (stopping
    the ingress) after ``timeout`` seconds."""
    stop = threading.Event()
    timer = threading.Timer(timeout, stop.set)
    timer.start()
    got: list[InboundMessage] = []
    try:
        if count == 0:
            return got
        for item in ingress.messages(after, stop):
            if isinstance(item, Skipped):
                if skipped is not None:
                    skipped.append(item)
                continue
            got.append(item)
            if len(got) >= count:
                break
    finally:
        stop.set()
        timer.cancel()
    return got


def next_message(items: Iterator[InboundMessage | Skipped], skipped: list[Skipped] | None = None) -> InboundMessage:
    """The next message an ingress yields, the rows it skips on the way going to ``skipped``."""
    for item in items:
        if isinstance(item, Skipped):
            if skipped is not None:
                skipped.append(item)
            continue
        return item
    raise AssertionError("the ingress ended without another message")
