"""A fake ``codesign`` (macOS-only) for the tests of ``Apple Flow.app``: it records every argv as one JSON line in
``calls.jsonl`` beside it and, like the real one, changes the bundle's executable: it appends a stand-in signature
naming the identifier. ``FAKE_CODESIGN_FAIL`` set: it refuses with codesign's own kind of message, exit 1."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

SCRIPT = r'''#!{python}
import json, os, plistlib, sys
here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, "calls.jsonl"), "a") as log:
    log.write(json.dumps(sys.argv[1:]) + "\n")
if os.environ.get("FAKE_CODESIGN_FAIL"):
    sys.stderr.write(sys.argv[-1] + ": internal error in Code Signing subsystem\n")
    sys.exit(1)
bundle = sys.argv[-1]
identifier = sys.argv[sys.argv.index("--identifier") + 1]
with open(os.path.join(bundle, "Contents", "Info.plist"), "rb") as f:
    executable = plistlib.load(f)["CFBundleExecutable"]
with open(os.path.join(bundle, "Contents", "MacOS", executable), "ab") as f:
    f.write(b"\n--fake ad-hoc signature: " + identifier.encode() + b"--\n")
'''


class FakeCodesign:
    def __init__(self, folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.log = folder / "calls.jsonl"
        path = folder / "codesign"
        path.write_text(SCRIPT.format(python=sys.executable))
        path.chmod(0o755)
        self._monkeypatch = monkeypatch
        monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
        monkeypatch.delenv("FAKE_CODESIGN_FAIL", raising=False)

    def fail(self, failing: bool = True) -> None:
        if failing:
            self._monkeypatch.setenv("FAKE_CODESIGN_FAIL", "1")
        else:
            self._monkeypatch.delenv("FAKE_CODESIGN_FAIL", raising=False)

    def calls(self) -> list[list[Any]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines()]
