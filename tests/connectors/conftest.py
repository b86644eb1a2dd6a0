"""Fixtures for the connector tests: a fake apple-code (and fake codex/claude) on disk, settings pointing at
them, and the record of what each run received."""

from __future__ import annotations

import json
import stat
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from apple_flow.config import Settings, load_settings

HERE = Path(__file__).parent


def install_script(source: Path, target: Path) -> Path:
    """Copies a Python script to ``target`` as an executable that runs on this interpreter."""
    body = source.read_text(encoding="utf-8").split("\n", 1)[1]
    target.write_text(f"#!{sys.executable}\n{body}", encoding="utf-8")
    target.chmod(target.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return target


@pytest.fixture
def fake_apple_code(tmp_path: Path) -> Path:
    (tmp_path / "bin").mkdir(exist_ok=True)
    return install_script(HERE / "fake_apple_code.py", tmp_path / "bin" / "apple-code")


@pytest.fixture
def fake_bin(tmp_path: Path) -> Path:
    """A folder with fake ``codex`` and ``claude`` executables (tests/connectors/fake_cli.py)."""
    folder = tmp_path / "fakes"
    folder.mkdir()
    for name in ("codex", "claude"):
        install_script(HERE / "fake_cli.py", folder / name)
    return folder


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "workspace"
    path.mkdir()
    return path


@pytest.fixture
def record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[], list[dict[str, Any]]]:
    """Every run of a fake CLI appends what it received here; call the fixture's value to read the runs."""
    path = tmp_path / "runs.jsonl"
    monkeypatch.setenv("FAKE_APPLE_CODE_RECORD", str(path))
    monkeypatch.setenv("FAKE_CLI_RECORD", str(path))

    def runs() -> list[dict[str, Any]]:
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]

    return runs


@pytest.fixture
def make_settings(fake_apple_code: Path, workspace: Path) -> Callable[..., Settings]:
    def make(**overrides: Any) -> Settings:
        values: dict[str, Any] = {"afm_command": str(fake_apple_code), "default_workspace": workspace}
        values.update(overrides)
        return load_settings(env_file=None, **values)

    return make
