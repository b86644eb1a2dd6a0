"""The daemon loads only what it runs: the console channel (Markdown rendering: rich.markdown, markdown_it and
pygments, about 2 MiB of the daemon's memory) only for `apple-flow run --channel console` and `apple-flow chat`;
the web page's stack (uvicorn, Starlette, Jinja2, the page's modules: about 7 MiB) only once someone opens it; and
`apple-flow run` none of the other subcommands' modules (set-up, the doctor, the service, the local model: about
2 MiB)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"
NOT_YET = ("rich.markdown", "markdown_it", "apple_flow.channels.console", "uvicorn", "starlette", "jinja2",
           "apple_flow.web.app")


def test_an_imessage_daemon_does_not_load_the_console_or_the_page_until_they_are_used() -> None:
    probe = (
        "import sys\n"
        "import apple_flow.cli.run, apple_flow.web.server, apple_flow.channels.imessage\n"
        f"print(sorted(m for m in sys.modules if m.startswith({NOT_YET!r})))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env={"PYTHONPATH": str(SRC)}, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_apple_flow_run_loads_no_other_subcommand() -> None:
    probe = (
        "import sys\n"
        "from apple_flow.cli import main\n"
        "try:\n"
        "    main(['run', '--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith(('apple_flow.cli.', 'apple_flow.health.doctor'))))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env={"PYTHONPATH": str(SRC)}, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "['apple_flow.cli.common', 'apple_flow.cli.run']"
