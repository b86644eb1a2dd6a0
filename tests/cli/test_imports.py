"""The daemon loads only what it runs: the console channel (Markdown rendering: rich.markdown, markdown_it and
pygments, about 2 MiB of the daemon's memory) only for `apple-flow run --channel console` and `apple-flow chat`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"


def test_the_cli_does_not_load_the_console_channel_until_it_is_used() -> None:
    probe = (
        "import sys; import apple_flow.cli.daemon\n"
        "print(sorted(m for m in sys.modules if m.startswith(('rich.markdown', 'markdown_it', "
        "'apple_flow.channels.console'))))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env={"PYTHONPATH": str(SRC)}, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
