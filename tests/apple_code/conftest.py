"""Fixtures of the apple-code tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A workspace holding notes.txt ("buy milk"); modules that need other files define their own."""
    folder = tmp_path / "ws"
    folder.mkdir()
    (folder / "notes.txt").write_text("buy milk\n")
    return folder
