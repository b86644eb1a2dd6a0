"""Fixtures for the iMessage channel: a real-schema chat.db and a fake ``osascript`` on PATH."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from apple_flow.config import Settings, load_settings
from support import fake_osascript as fake_osascript_script
from support.chatdb import ChatDbWriter


class FakeOsascript:
    """tests/support/fake_osascript.py on PATH, leaving each sent text in ``chat_db`` as Messages does."""

    def __init__(self, folder: Path, monkeypatch: pytest.MonkeyPatch, chat_db: Path | None = None) -> None:
        self.log = folder / "calls.jsonl"
        self.path = fake_osascript_script.install(folder)
        self._monkeypatch = monkeypatch
        monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ.get('PATH', '')}")
        monkeypatch.setenv("FAKE_OSASCRIPT_LOG", str(self.log))
        if chat_db is not None:
            monkeypatch.setenv("FAKE_OSASCRIPT_CHATDB", str(chat_db))
        self.mode("ok")

    def mode(self, mode: str) -> None:
        self._monkeypatch.setenv("FAKE_OSASCRIPT_MODE", mode)

    def rows(self, row: str) -> None:
        """What a send leaves in chat.db: sent, queued, error, none, none-for-buddy (see the fake)."""
        self._monkeypatch.setenv("FAKE_OSASCRIPT_ROW", row)

    def owner(self, address: str, received_copy: bool = False) -> None:
        """The Mac's own address; with ``received_copy``, a text sent to it is also stored as received."""
        self._monkeypatch.setenv("FAKE_OSASCRIPT_OWNER", address)
        self._monkeypatch.setenv("FAKE_OSASCRIPT_SELF_COPY", "1" if received_copy else "0")

    def calls(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text(encoding="utf-8").splitlines()]


@pytest.fixture
def fake_osascript(tmp_path: Path, chat_db: ChatDbWriter, monkeypatch: pytest.MonkeyPatch) -> FakeOsascript:
    return FakeOsascript(tmp_path / "bin", monkeypatch, chat_db.path)


@pytest.fixture
def make_settings(tmp_path: Path) -> Any:
    def make(**overrides: Any) -> Settings:
        values: dict[str, Any] = {
            "messages_db_path": tmp_path / "Messages" / "chat.db",
            "poll_interval_seconds": 0.2,
            "send_retry_backoff_seconds": 0,
            "send_timeout_seconds": 5,
            "send_confirm_seconds": 1,
        }
        values.update(overrides)
        return load_settings(env_file=None, **values)

    return make
