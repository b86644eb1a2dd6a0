"""Which command says whether an approved task's work is done: ``APPLE_FLOW_VERIFY_COMMAND``, or the
test command the workspace's own files name. apple-code runs it (``--verify``, in its sandbox); this module only
reads a few files at the workspace's top level, and runs nothing.

The project's own entry point wins: a Makefile ``test`` target, then the ``test`` script of package.json, then
the language's test runner (``swift test``, ``cargo test``, ``go test ./...``, pytest for a Python project with
tests). Only the workspace folder itself is looked at, not its sub-folders: a check has to run from there.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from apple_flow.config import Settings

# Project files are read up to this size (a workspace is the user's, but a huge file is not a manifest).
READ_LIMIT = 1_000_000
MAKEFILES = ("GNUmakefile", "makefile", "Makefile")  # make's own order
_MAKE_TEST_TARGET = re.compile(r"^test\s*:(?!=)", re.MULTILINE)  # `test:` or `test: deps`, not `test := value`
# What `npm init` writes when there are no tests: not a check.
_NPM_PLACEHOLDER = "no test specified"
_PYTHON_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", "tox.ini", "pytest.ini", "requirements.txt")
_TEST_FOLDERS = ("tests", "test")


@dataclass(frozen=True)
class VerifyCommand:
    """A workspace's verify command (its check): the command, and where it came from (for ``status``)."""

    command: str
    source: str  # e.g. "APPLE_FLOW_VERIFY_COMMAND", "the test target of Makefile"


class VerifyCommands:
    """The verify command of each workspace, from the settings."""

    def __init__(self, settings: Settings) -> None:
        self._command = settings.verify.command
        self._detect = settings.verify.detect

    def for_workspace(self, workspace: Path) -> VerifyCommand | None:
        if self._command is not None:
            return VerifyCommand(self._command, "APPLE_FLOW_VERIFY_COMMAND")
        if not self._detect:
            return None
        return detect(workspace)

    def describe(self, workspace: Path) -> str:
        """One line for ``status``: the check of ``workspace``, or why there is none."""
        check = self.for_workspace(workspace)
        if check is not None:
            return f"Check for approved tasks in {workspace}: `{check.command}` ({check.source})."
        if not self._detect:
            return "Approved tasks are not checked (APPLE_FLOW_VERIFY_DETECT=false, no APPLE_FLOW_VERIFY_COMMAND)."
        return (f"No check found in {workspace} (no test target, test script or tests); approved tasks are not "
                "checked. APPLE_FLOW_VERIFY_COMMAND sets one.")


def detect(workspace: Path) -> VerifyCommand | None:
    """The test command the workspace's files name, or None."""
    for finder in (_make, _npm, _swift, _cargo, _go, _pytest):
        found = finder(workspace)
        if found is not None:
            return found
    return None


def _read(path: Path) -> str | None:
    try:
        if not path.is_file() or path.stat().st_size > READ_LIMIT:
            return None
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def _make(workspace: Path) -> VerifyCommand | None:
    for name in MAKEFILES:
        text = _read(workspace / name)
        if text is not None:  # make reads the first of these it finds, and only that one
            return VerifyCommand("make test", f"the test target of {name}") if _MAKE_TEST_TARGET.search(text) else None
    return None


def _npm(workspace: Path) -> VerifyCommand | None:
    text = _read(workspace / "package.json")
    if text is None:
        return None
    try:
        manifest = json.loads(text)
    except ValueError:
        return None
    scripts = manifest.get("scripts") if isinstance(manifest, dict) else None
    script = scripts.get("test") if isinstance(scripts, dict) else None
    if not isinstance(script, str) or not script.strip() or _NPM_PLACEHOLDER in script:
        return None
    runner = "npm"
    for lockfile, name in (("pnpm-lock.yaml", "pnpm"), ("yarn.lock", "yarn"), ("bun.lockb", "bun"),
                           ("bun.lock", "bun")):
        if (workspace / lockfile).is_file():
            runner = name
            break
    # `bun test` is bun's own runner, not the script: `bun run test` runs the script.
    command = "bun run test" if runner == "bun" else f"{runner} test"
    return VerifyCommand(command, "the test script of package.json")


def _swift(workspace: Path) -> VerifyCommand | None:
    if not (workspace / "Package.swift").is_file():
        return None
    # SwiftPM sandboxes its own manifest build, and macOS refuses a sandbox inside apple-code's (CONTRACT.md).
    command = "swift test --disable-sandbox" if sys.platform == "darwin" else "swift test"
    return VerifyCommand(command, "Package.swift")


def _cargo(workspace: Path) -> VerifyCommand | None:
    return VerifyCommand("cargo test", "Cargo.toml") if (workspace / "Cargo.toml").is_file() else None


def _go(workspace: Path) -> VerifyCommand | None:
    return VerifyCommand("go test ./...", "go.mod") if (workspace / "go.mod").is_file() else None


def _pytest(workspace: Path) -> VerifyCommand | None:
    markers = [name for name in _PYTHON_MARKERS if (workspace / name).is_file()]
    tests = _python_tests(workspace)
    if not tests or not (markers or _has_python(workspace)):
        return None
    # The project's own environment when it has one (its packages), else the python on PATH.
    python = next((f".venv/bin/{name}" for name in ("python", "python3")
                   if (workspace / ".venv" / "bin" / name).exists()), "python3")
    source = f"{markers[0] if markers else 'Python files'} and {tests}"
    return VerifyCommand(f"{python} -m pytest -q", source)


def _python_tests(workspace: Path) -> str | None:
    """Where the workspace's Python tests are ("tests/", "test_app.py"), or None."""
    for folder in _TEST_FOLDERS:
        path = workspace / folder
        if path.is_dir() and _has_test_files(path):
            return f"{folder}/"
    for path in _entries(workspace):
        if _is_test_file(path):
            return path.name
    return None


def _has_test_files(folder: Path, depth: int = 3) -> bool:
    """Test files in ``folder`` or its sub-folders, ``depth`` levels down (symlinked folders are not followed)."""
    for path in _entries(folder):
        if _is_test_file(path):
            return True
        if depth > 0 and path.is_dir() and not path.is_symlink() and path.name != "__pycache__" \
                and _has_test_files(path, depth - 1):
            return True
    return False


def _is_test_file(path: Path) -> bool:
    return path.suffix == ".py" and (path.name.startswith("test_") or path.stem.endswith("_test")) and path.is_file()


def _has_python(workspace: Path) -> bool:
    return any(path.suffix == ".py" for path in _entries(workspace))


def _entries(folder: Path, limit: int = 2000) -> list[Path]:
    """A folder's entries, sorted, at most ``limit`` (a huge folder is not read whole); none when unreadable."""
    try:
        entries = []
        for index, path in enumerate(folder.iterdir()):
            if index >= limit:
                break
            entries.append(path)
        return sorted(entries)
    except OSError:
        return []
