"""Project-wide pytest fixtures: where the built artifacts are, and an empty chat.db with the real schema."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from apple_flow.config import Settings
from apple_flow.paths import APPLE_CODE_PACKAGE, PROJECT_ROOT
from support.chatdb import ChatDbWriter


@pytest.fixture(autouse=True)
def _no_developer_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """The suite must not depend on the developer's APPLE_FLOW_* / APPLE_CODE_* variables (a shell that sets
    APPLE_FLOW_AFM_BACKEND=openai, as the README suggests on Linux, would change what every test runs)."""
    settings = {f"APPLE_FLOW_{field.upper()}" for field in Settings.model_fields}
    for name in list(os.environ):  # test switches such as APPLE_FLOW_REQUIRE_LOCAL_MODEL stay
        if name.upper() in settings or name.upper().startswith("APPLE_CODE_"):
            monkeypatch.delenv(name)
    # Daemons started by tests (in-process or as children) serve no web page unless the test asks for one: parallel
    # runs would all want port 8787, and a page wants a token in the test's .env.
    monkeypatch.setenv("APPLE_FLOW_WEB_ENABLED", "false")


@pytest.fixture(scope="session")
def project_root() -> Path:
    return PROJECT_ROOT


@pytest.fixture(scope="session")
def apple_code_bin() -> Path:
    """The debug build of apple-code made by `scripts/setup.sh` (`swift build`). Missing is a failure, not a
    skip: the README's test command builds it first."""
    path = APPLE_CODE_PACKAGE / ".build" / "debug" / "apple-code"
    if not (path.is_file() and os.access(path, os.X_OK)):
        pytest.fail(f"{path} is missing: run scripts/setup.sh (or `cd apple_code && swift build`) first")
    return path


@pytest.fixture
def chat_db(tmp_path: Path) -> Iterator[ChatDbWriter]:
    """An empty Messages database with the real schema (tables of macOS 15 and 26)."""
    writer = ChatDbWriter(tmp_path / "Messages" / "chat.db")
    yield writer
    writer.close()
