"""A fake ``tccutil`` (macOS-only): it records every argv as one JSON line in ``calls.jsonl`` beside it and exits 0,
as ``tccutil reset AppleEvents <bundle id>`` does; ``FAKE_TCCUTIL_FAIL`` set: it refuses as the real one does for
an unknown service."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

SCRIPT = r'''#!{python}
import json, os, sys
here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, "calls.jsonl"), "a") as log:
    log.write(json.dumps(sys.argv[1:]) + "\n")
if os.environ.get("FAKE_TCCUTIL_FAIL"):
    sys.stderr.write("tccutil: Failed to reset AppleEvents approval status for com.apple-flow.launcher\n")
    sys.exit(1)
'''


class FakeTccutil:
    def __init__(self, folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.log = folder / "calls.jsonl"
        path = folder / "tccutil"
        path.write_text(SCRIPT.format(python=sys.executable))
        path.chmod(0o755)
        self._monkeypatch = monkeypatch
        monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
        monkeypatch.delenv("FAKE_TCCUTIL_FAIL", raising=False)

    def fail(self) -> None:
        self._monkeypatch.setenv("FAKE_TCCUTIL_FAIL", "1")

    def calls(self) -> list[list[Any]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines()]
