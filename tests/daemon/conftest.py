"""Fixtures for the daemon's tests: settings pointing at a temporary database and workspace."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from apple_flow.config import Settings


@pytest.fixture
def make_settings(tmp_path: Path) -> Any:
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)

    def make(**overrides: Any) -> Settings:
        values: dict[str, Any] = {
            "db_path": tmp_path / "state" / "relay.db",
            "default_workspace": workspace,
            "allowed_workspaces": [workspace],
            "allowed_senders": ["+15551234567", "ana@example.com"],
            "progress_interval_seconds": 0,
            "shutdown_grace_seconds": 2,
        }
        values.update(overrides)
        return Settings(_env_file=None, **values)  # type: ignore[call-arg]

    return make


@pytest.fixture(autouse=True)
def _restore_child_token(monkeypatch: pytest.MonkeyPatch) -> None:
    """An in-process daemon marks this process's environment for its children; undo it after each test."""
    from apple_flow.daemon.orphans import TOKEN_VARIABLE

    monkeypatch.setenv(TOKEN_VARIABLE, "pytest")
