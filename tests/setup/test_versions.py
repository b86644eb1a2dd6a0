"""The built artifacts run: `apple-code --version` from SwiftPM's build folder, `apple-flow --version` from the
venv's console script."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from apple_flow import __version__


def test_apple_code_version_runs_from_the_build(apple_code_bin: Path) -> None:
    done = subprocess.run([str(apple_code_bin), "--version"], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert re.fullmatch(r"apple-code \d+\.\d+\.\d+\n", done.stdout)


def test_apple_flow_version_runs_from_the_console_script() -> None:
    script = Path(sys.executable).with_name("apple-flow")
    assert script.is_file(), f"{script} missing: the venv was not set up with `pip install -e .`"
    done = subprocess.run([str(script), "--version"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"apple-flow {__version__}\n"
