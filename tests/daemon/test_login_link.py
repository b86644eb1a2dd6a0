"""`web`: a one-time login link for the page, texted only to an allowed sender, only over iMessage, never into a
group; the link is recorded (as a digest) with the reply that holds it."""

from __future__ import annotations

import re
import socket
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from apple_flow import host, local_name
from apple_flow.channels.base import InboundMessage
from apple_flow.config import Settings
from apple_flow.daemon.deciding.commands import parse
from apple_flow.daemon.deciding.decisions import LoginLinks, Reply, View
from apple_flow.daemon.store.web_logins import WebLoginTable, digest
from support.daemon_harness import ANA, Harness, ask, wait_until

LINK = re.compile(r"(http://\S+)/login/link/(\S+)")


def sessions(h: Harness) -> WebLoginTable:
    return h.store.web_logins


def test_web_texts_a_link_that_logs_in_once(harness: Callable[..., Harness]) -> None:
    h = harness().start()
    h.daemon.page_started("http://apple-flow.localhost:8787")
    text = ask(h, ANA, "web")
    found = LINK.search(text)
    assert found is not None and found.group(1) == "http://apple-flow.localhost:8787", text
    assert "works once, for 5 minutes" in text and "opens on this Mac only" in text
    secret = found.group(2)
    rows = h.store.db.rows("SELECT id, sender FROM web_links")
    assert [tuple(r) for r in rows] == [(digest(secret), ANA)]  # the secret itself is not kept
    assert sessions(h).redeem_link(secret) == ANA
    assert sessions(h).redeem_link(secret) is None
    second = LINK.search(ask(h, ANA, "web"))
    assert second is not None and second.group(2) != secret


def test_the_link_goes_to_the_base_url_when_one_is_set(harness: Callable[..., Harness]) -> None:
    h = harness(web_base_url="https://mac.tailnet.ts.net", web_link_minutes=3).start()
    h.daemon.page_started("http://apple-flow.localhost:8787")
    text = ask(h, ANA, "web")
    assert text.startswith("Log in to apple-flow's page (the link works once, for 3 minutes): "
                           "https://mac.tailnet.ts.net/login/link/")
    assert "this Mac only" not in text


def test_no_link_without_the_page_or_over_another_channel_or_to_a_stranger(
    harness: Callable[..., Harness], daemon_settings: Callable[..., Settings]
) -> None:
    h = harness().start()
    assert "web page is not running" in ask(h, ANA, "web")  # the page never started
    console = Harness(daemon_settings(db_path=h.settings.db_path.with_name("console.db")), channel="console:1",
                      login_links=False)
    console.start()
    try:
        console.daemon.page_started("http://apple-flow.localhost:8787")
        assert ask(console, ANA, "web") == "Login links are not sent on this channel: text `web` from your phone."
    finally:
        console.daemon.request_stop()
    h.daemon.page_started("http://apple-flow.localhost:8787")
    h.ingress.add("+15559999999", "web")
    h.ingress.add(ANA, "status")
    wait_until(lambda: h.egress.to(ANA))
    assert h.egress.to("+15559999999") == []
    assert h.store.db.rows("SELECT COUNT(*) FROM web_links")[0][0] == 0


def test_a_link_is_never_sent_into_a_group(harness: Callable[..., Harness]) -> None:
    h = harness()
    orchestrator = h.daemon.orchestrator
    orchestrator.login_links = LoginLinks("http://apple-flow.localhost:8787", 5, mac_only=True, channel_carries=True)
    group = InboundMessage(7, ANA, "web", datetime.now(UTC), chat_identifier="chat42", reply_to="chat42")
    decision = orchestrator.decide(group, parse("web"), "imessage:7", View())
    assert isinstance(decision, Reply) and decision.login_link is None
    assert "never sent into a group" in decision.text


def test_the_link_a_mac_whose_safari_cannot_open_the_pages_name_gets_says_how_to_make_it_open(
    harness: Callable[..., Harness], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Safari asks macOS's resolver, which knows only the bare localhost (Chrome and Firefox resolve .localhost
    names themselves); the link keeps the page's name, so the cookie stays off other local servers, and says how
    to make the name resolve."""
    monkeypatch.setattr(host, "is_macos", lambda: True)
    asked: list[str] = []

    def macos_resolver(name: str, port: object) -> list[Any]:
        asked.append(name)
        raise socket.gaierror(8, "nodename nor servname provided, or not known")

    monkeypatch.setattr(local_name, "RESOLVE", macos_resolver)
    h = harness().start()
    h.daemon.page_started("http://apple-flow.localhost:8787")
    text = ask(h, ANA, "web")
    found = LINK.search(text)
    assert found is not None and found.group(1) == "http://apple-flow.localhost:8787"
    assert text.endswith(
        "\nSafari cannot open apple-flow.localhost on this Mac yet (Chrome and Firefox can): run once in Terminal: "
        "echo '127.0.0.1 apple-flow.localhost' | sudo tee -a /etc/hosts; sudo killall -HUP mDNSResponder"
    )
    assert asked == ["apple-flow.localhost"]

    # With that line in /etc/hosts the resolver answers 127.0.0.1: the link alone.
    monkeypatch.setattr(local_name, "RESOLVE", lambda name, port: [(socket.AF_INET, 1, 6, "", ("127.0.0.1", 0))])
    h.daemon.page_started("http://apple-flow.localhost:8787")
    assert "Safari" not in ask(h, ANA, "web")
    # A name that resolves elsewhere does not count (only loopback is this Mac).
    monkeypatch.setattr(local_name, "RESOLVE", lambda name, port: [(socket.AF_INET, 1, 6, "", ("10.0.0.7", 0))])
    h.daemon.page_started("http://apple-flow.localhost:8787")
    assert "Safari cannot open" in ask(h, ANA, "web")
