"""A workspace's check: APPLE_FLOW_VERIFY_COMMAND, or the test command its own files name."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from apple_flow.config import Settings
from apple_flow.daemon.deciding.verify_command import VerifyCommand, VerifyCommands, detect


def write(folder: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return folder


SWIFT = "swift test --disable-sandbox" if sys.platform == "darwin" else "swift test"


@pytest.mark.parametrize(("files", "command"), [
    ({"pyproject.toml": "[project]\nname='x'\n", "tests/test_app.py": "def test_x(): pass\n"},
     "python3 -m pytest -q"),
    ({"setup.py": "", "test_app.py": ""}, "python3 -m pytest -q"),
    ({"app.py": "", "tests/unit/test_deep.py": ""}, "python3 -m pytest -q"),  # no manifest, but Python files
    ({"pyproject.toml": "", "tests/test_app.py": "", ".venv/bin/python": ""}, ".venv/bin/python -m pytest -q"),
    ({"Package.swift": "// swift-tools-version:6.0\n"}, SWIFT),
    ({"package.json": json.dumps({"scripts": {"test": "vitest run"}})}, "npm test"),
    ({"package.json": json.dumps({"scripts": {"test": "jest"}}), "pnpm-lock.yaml": ""}, "pnpm test"),
    ({"package.json": json.dumps({"scripts": {"test": "jest"}}), "yarn.lock": ""}, "yarn test"),
    ({"package.json": json.dumps({"scripts": {"test": "jest"}}), "bun.lockb": ""}, "bun run test"),
    ({"Cargo.toml": "[package]\nname='x'\n"}, "cargo test"),
    ({"go.mod": "module x\n"}, "go test ./..."),
    ({"Makefile": "build:\n\tcc x.c\n\ntest: build\n\t./run-tests\n"}, "make test"),
    ({"GNUmakefile": "test:\n\ttrue\n"}, "make test"),
    # The project's own entry point wins over the language's runner.
    ({"Makefile": "test:\n\tpytest -x\n", "pyproject.toml": "", "tests/test_a.py": ""}, "make test"),
    ({"package.json": json.dumps({"scripts": {"test": "node t.js"}}), "Cargo.toml": ""}, "npm test"),
])
def test_the_check_is_found_from_the_workspace(tmp_path: Path, files: dict[str, str], command: str) -> None:
    found = detect(write(tmp_path, files))
    assert found is not None and found.command == command, found


@pytest.mark.parametrize("files", [
    {},
    {"README.md": "# notes\n"},
    {"pyproject.toml": "", "app.py": ""},  # Python, but no tests
    {"tests/notes.txt": ""},  # a tests folder without Python tests
    {"package.json": json.dumps({"scripts": {"test": 'echo "Error: no test specified" && exit 1'}})},  # npm init's
    {"package.json": json.dumps({"scripts": {"build": "tsc"}})},
    {"package.json": "{ not json"},
    {"Makefile": "TEST := 1\ntest := value\nbuild:\n\tcc\n"},  # no test target
    {"Makefile": "test:\n\ttrue\n", "makefile": "build:\n\tcc\n"},  # make reads makefile, not Makefile
])
def test_no_check_is_found_where_there_is_none(tmp_path: Path, files: dict[str, str]) -> None:
    assert detect(write(tmp_path, files)) is None


def test_an_unreadable_or_missing_workspace_has_no_check(tmp_path: Path) -> None:
    assert detect(tmp_path / "missing") is None


def test_a_symlink_loop_under_tests_does_not_hang_the_search(tmp_path: Path) -> None:
    write(tmp_path, {"pyproject.toml": "", "tests/readme.txt": ""})
    (tmp_path / "tests" / "loop").symlink_to(tmp_path / "tests")
    assert detect(tmp_path) is None


def test_the_setting_overrides_what_the_workspace_says(
    tmp_path: Path, daemon_settings: Callable[..., Settings]
) -> None:
    write(tmp_path, {"Makefile": "test:\n\ttrue\n"})
    commands = VerifyCommands(daemon_settings(verify_command="  ./ci/check.sh --fast "))
    assert commands.for_workspace(tmp_path) == VerifyCommand("./ci/check.sh --fast", "APPLE_FLOW_VERIFY_COMMAND")
    assert "`./ci/check.sh --fast` (APPLE_FLOW_VERIFY_COMMAND)" in commands.describe(tmp_path)


def test_detection_can_be_turned_off(tmp_path: Path, daemon_settings: Callable[..., Settings]) -> None:
    write(tmp_path, {"Makefile": "test:\n\ttrue\n"})
    commands = VerifyCommands(daemon_settings(verify_detect=False))
    assert commands.for_workspace(tmp_path) is None
    assert "APPLE_FLOW_VERIFY_DETECT=false" in commands.describe(tmp_path)
    found = VerifyCommands(daemon_settings())
    assert found.describe(tmp_path) == (
        f"Check for approved tasks in {tmp_path}: `make test` (the test target of Makefile).")
    assert "No check found in" in found.describe(tmp_path / "missing")


def test_an_empty_setting_means_unset(daemon_settings: Callable[..., Settings]) -> None:
    assert daemon_settings(verify_command="  ").verify.command is None
