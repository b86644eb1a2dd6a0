#!/usr/bin/env python3
"""A fake ``codex`` or ``claude`` (chosen by the name it is installed under) for the CLI connector tests.

Every run appends ``{"argv", "cwd", "stdin"}`` as one JSON line to ``$FAKE_CLI_RECORD``. ``$FAKE_CLI_MODE``:
ok (default), fail (stderr + exit 2), empty (no answer), error-result (claude: exit 0 with is_error true),
broken-version (``--version`` fails). ``--version`` prints a version; it is recorded too.
"""

from __future__ import annotations

import json
import os
import sys

name = os.path.basename(sys.argv[0])
stdin_text = "" if "--version" in sys.argv else sys.stdin.read()
record = os.environ.get("FAKE_CLI_RECORD")
if record:
    with open(record, "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"argv": sys.argv[1:], "cwd": os.getcwd(), "stdin": stdin_text}) + "\n")
mode = os.environ.get("FAKE_CLI_MODE", "ok")
if "--version" in sys.argv:
    if mode == "broken-version":
        sys.stderr.write("dyld: Library not loaded: libfake.dylib\n")
        sys.exit(1)
    print(f"{name} 9.9.9 (fake)")
    sys.exit(0)
if mode == "fail":
    sys.stderr.write("thinking...\nerror: not logged in\n")
    sys.exit(2)
answer = "" if mode == "empty" else f"{name} answer"


def emit(event: dict[str, object]) -> None:
    print(json.dumps(event), flush=True)


if name == "codex":
    sys.stderr.write("codex progress goes to stderr\n")
    if answer:
        print(answer)
else:
    emit({"type": "system", "subtype": "init", "cwd": os.getcwd()})
    emit({"type": "assistant", "message": {"content": [
        {"type": "text", "text": "Let me look."},
        {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "src/app.py"}},
        {"type": "tool_use", "id": "t2", "name": "Bash", "input": {"command": "pytest -q"}},
    ]}})
    is_error = mode == "error-result"
    emit({"type": "result", "subtype": "error_max_turns" if is_error else "success", "is_error": is_error,
          "result": "stopped after 10 turns" if is_error else answer, "num_turns": 2, "duration_ms": 9})
