"""The channel registry: the one place a channel is named. A channel defined here, in the tests, joins through the
registry alone (no edit to src/) and carries a turn end to end: `apple-flow run --channel tiny` in-process, the
real daemon built by ``assemble``, the real apple-code connector on the tests' fake apple-code, the reply out on the
tiny channel, its sender ids kept as the channel gave them."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import get_args

import pytest
from typer.testing import CliRunner

from apple_flow import host
from apple_flow.channels import registry
from apple_flow.channels.base import Channel, ChannelNeeds, Egress, InboundMessage, Ingress, Skipped
from apple_flow.cli import app
from apple_flow.config import ChannelName
from apple_flow.daemon.store import Store
from support.install import FAKE_APPLE_CODE, install_script

CHAT_ID = "5551234567"  # a chat id of the tiny channel: iMessage's normal form would make it +15551234567


class TinyIngress(Ingress):
    """The texts given, in order, then the end of input (the daemon then finishes its turns and exits)."""

    def __init__(self, texts: list[tuple[str, str]]) -> None:
        self._texts = texts

    def messages(self, after_rowid: int, stop: threading.Event) -> Iterator[InboundMessage | Skipped]:
        for rowid, (sender, text) in enumerate(self._texts, start=1):
            if rowid > after_rowid:
                yield InboundMessage(rowid, sender, text, datetime.now(UTC))


class TinyEgress(Egress):
    def __init__(self) -> None:
        self.sent: list[tuple[str, str]] = []

    def send(self, recipient: str, text: str) -> None:
        self.sent.append((recipient, text))


class TinyChannel:
    """The channel's entry: ``build`` is what the registry calls; ``built`` what it made (for the test to read)."""

    def __init__(self, texts: list[tuple[str, str]]) -> None:
        self.texts = texts
        self.built: list[Channel] = []
        self.needs: list[ChannelNeeds] = []

    def build(self, needs: ChannelNeeds) -> Channel:
        self.needs.append(needs)
        channel = Channel("tiny", TinyIngress(self.texts), TinyEgress())  # the base Senders: ids as given
        self.built.append(channel)
        return channel


def test_a_channel_from_the_tests_runs_a_turn_through_the_registry_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The owner's chat id, and a different chat whose id is the same digits with a plus: to iMessage's normaliser
    # they were one person, here they are two, and only the allowed one is answered.
    tiny = TinyChannel([(CHAT_ID, "hello"), (f"+1{CHAT_ID}", "let me in")])
    monkeypatch.setitem(registry.REGISTRY, "tiny", registry.ChannelEntry("tiny", tiny.build, preferred=lambda: False))
    monkeypatch.chdir(tmp_path)  # no stray .env
    workspace = tmp_path / "ws"
    workspace.mkdir()
    env = {
        "APPLE_FLOW_DB_PATH": str(tmp_path / "relay.db"),
        "APPLE_FLOW_DEFAULT_WORKSPACE": str(workspace),
        "APPLE_FLOW_ALLOWED_SENDERS": CHAT_ID,
        "APPLE_FLOW_AFM_COMMAND": str(install_script(FAKE_APPLE_CODE, tmp_path / "apple-code")),
        "APPLE_FLOW_WEB_ENABLED": "false",
    }
    result = CliRunner().invoke(app, ["run", "--channel", "tiny"], env=env)
    assert result.exit_code == 0, result.output
    [channel] = tiny.built
    assert isinstance(channel.egress, TinyEgress)
    assert channel.egress.sent == [(CHAT_ID, "fake answer")]
    assert tiny.needs[0].service is None and not tiny.needs[0].terminal
    store = Store(tmp_path / "relay.db")
    try:
        assert [exchange.user for exchange in store.history.recent_exchanges(CHAT_ID, 10)] == ["hello"]
        assert store.history.recent_exchanges(f"+1{CHAT_ID}", 10) == []
        assert store.cursors.get_cursor("tiny") == 2  # both rows passed, under the key the channel gave
    finally:
        store.close()


def test_an_unknown_channel_is_named_with_the_ones_there_are(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["run", "--channel", "telegraph"], env={
        "APPLE_FLOW_DB_PATH": str(tmp_path / "relay.db"), "APPLE_FLOW_DEFAULT_WORKSPACE": str(tmp_path)})
    assert result.exit_code == 2
    said = " ".join(result.output.split())
    assert "No channel named 'telegraph'" in said and "auto, imessage, console" in said
    assert not (tmp_path / "relay.db").exists()  # refused before anything was opened


def test_auto_is_the_first_channel_this_system_prefers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(host, "is_macos", lambda: True)
    assert registry.entry("auto").name == "imessage"
    monkeypatch.setattr(host, "is_macos", lambda: False)
    assert registry.entry("auto").name == "console"


def test_the_settings_accept_the_registrys_names() -> None:
    # APPLE_FLOW_CHANNEL's values are listed in config (a Literal, for the generated docs): the two must agree.
    assert set(get_args(ChannelName)) == set(registry.names())


def test_the_health_view_checks_chat_db_for_the_channels_whose_entry_reads_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from apple_flow.config import load_settings
    from apple_flow.health.running import DaemonState, health_checks

    tiny = TinyChannel([])
    monkeypatch.setitem(registry.REGISTRY, "tiny", registry.ChannelEntry("tiny", tiny.build, preferred=lambda: False))
    settings = load_settings(env_file=None, db_path=tmp_path / "relay.db", messages_db_path=tmp_path / "chat.db")
    store = Store(settings.db_path)
    try:
        def names(channel: str) -> list[str]:
            return [check.name for check in health_checks(settings, store, DaemonState(channel, "afm", "ready", 0.0))]

        assert names("imessage")[1:3] == ["chat.db", "Full Disk Access"]
        assert names("console")[1] == names("tiny")[1] == "messages"  # not applicable: no chat.db
    finally:
        store.close()
