"""Installing the fake agent CLIs of ``tests/support`` into a test's own folder as executables."""

from __future__ import annotations

import stat
import sys
from pathlib import Path

SUPPORT = Path(__file__).resolve().parent
FAKE_APPLE_CODE = SUPPORT / "fake_apple_code.py"  # follows apple_code/CONTRACT.md
FAKE_CLI = SUPPORT / "fake_cli.py"  # codex, claude, gemini, cline or kilo, by the name it is installed under


def install_script(source: Path, target: Path) -> Path:
    """Copies a Python script to ``target`` as an executable that runs on this interpreter."""
    body = source.read_text(encoding="utf-8").split("\n", 1)[1]
    target.write_text(f"#!{sys.executable}\n{body}", encoding="utf-8")
    target.chmod(target.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return target
