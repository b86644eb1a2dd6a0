#!/usr/bin/env python3
"""A fake ``codex``, ``claude``, ``gemini``, ``cline`` or ``kilo`` (chosen by the name it is installed under) for the
CLI connector tests.

Every run appends ``{"argv", "cwd", "stdin", "env"}`` as one JSON line to ``$FAKE_CLI_RECORD``. ``$FAKE_CLI_MODE``:
ok (default), fail (stderr + exit 2), empty (no answer), error-result (claude: exit 0 with is_error true; gemini:
exit 0 with an error event and a result whose status is error), auth (gemini: not signed in, exit 41),
broken-version (``--version`` fails). ``--version`` prints a version; it is recorded too. The gemini fake speaks
Gemini CLI's headless stream-json (init, message, tool_use, tool_result, error, result; docs/cli/headless.md); the
cline fake Cline CLI's ``--json`` ClineMessages (say text, tool, command, completion_result, error); the kilo fake
``kilo run --format json`` events (text, tool_use, step_start, step_finish, error). error-result is, for cline and
kilo, an error message and no answer with exit 0.
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
        handle.write(json.dumps(
            {"argv": sys.argv[1:], "cwd": os.getcwd(), "stdin": stdin_text, "env": dict(os.environ)}
        ) + "\n")
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
elif name == "gemini":
    # Gemini CLI's stream-json (docs/cli/headless.md): the answer comes as assistant message deltas, the result
    # event carries status and stats.
    emit({"type": "init", "session_id": "s1", "model": "gemini-2.5-flash"})
    prompt = next((a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--prompt=")), "")
    emit({"type": "message", "role": "user", "content": prompt})
    if mode == "auth":
        emit({"type": "result", "status": "error",
              "error": {"type": "FatalAuthenticationError", "message": "Please set an Auth method"},
              "stats": {"input_tokens": 0, "output_tokens": 0, "duration_ms": 1}})
        sys.exit(41)
    emit({"type": "message", "role": "assistant", "content": "Let me look.", "delta": True})
    emit({"type": "tool_use", "tool_name": "read_file", "tool_id": "t1", "parameters": {"path": "src/app.py"}})
    emit({"type": "tool_result", "tool_id": "t1", "status": "success", "output": "print(1)"})
    emit({"type": "tool_use", "tool_name": "write_file", "tool_id": "t2",
          "parameters": {"file_path": "src/app.py", "content": "print(2)"}})
    emit({"type": "tool_result", "tool_id": "t2", "status": "success"})
    emit({"type": "tool_use", "tool_name": "run_shell_command", "tool_id": "t3",
          "parameters": {"command": "pytest -q"}})
    emit({"type": "tool_result", "tool_id": "t3", "status": "success", "output": "1 passed"})
    for piece in ([answer[:4], answer[4:]] if answer else []):
        emit({"type": "message", "role": "assistant", "content": piece, "delta": True})
    if mode == "error-result":
        emit({"type": "error", "message": "Quota exceeded for gemini-2.5-flash"})
    emit({"type": "result", "status": "error" if mode == "error-result" else "success",
          "stats": {"total_tokens": 1234, "input_tokens": 1200, "output_tokens": 34, "duration_ms": 4321,
                    "tool_calls": 3}})
elif name == "cline":
    # Cline CLI --json: one ClineMessage a line; partial messages come again whole.
    emit({"type": "say", "say": "text", "text": "Let me look.", "ts": 1})
    emit({"type": "say", "say": "tool", "text": json.dumps({"tool": "readFile", "path": "src/app.py"}), "ts": 2})
    emit({"type": "say", "say": "tool", "text": json.dumps({"tool": "editedExistingFile", "path": "src/app.py"}),
          "ts": 3})
    emit({"type": "say", "say": "command", "text": "pytest -q", "partial": True, "ts": 4})
    emit({"type": "say", "say": "command", "text": "pytest -q", "ts": 4})
    if mode == "error-result":
        emit({"type": "say", "say": "error", "text": "API request failed: 401 invalid x-api-key", "ts": 5})
    elif answer:
        emit({"type": "say", "say": "completion_result", "text": answer[:5], "partial": True, "ts": 5})
        emit({"type": "say", "say": "completion_result", "text": answer, "ts": 5})
elif name == "kilo":
    # kilo run --format json: raw events, one a line, each with a part.
    def part(kind: str, **fields: object) -> None:
        emit({"type": kind, "timestamp": 1, "sessionID": "ses_1", "part": fields})

    part("step_start")
    part("text", type="text", text="Let me look.")
    part("tool_use", tool="read", state={"status": "completed", "input": {"filePath": "src/app.py"}})
    part("tool_use", tool="edit", state={"status": "completed", "input": {"filePath": "src/app.py"}})
    part("tool_use", tool="bash", state={"status": "completed", "input": {"command": "pytest -q"}})
    part("step_finish", tokens={"input": 1000, "output": 20})
    if mode == "error-result":
        emit({"type": "error", "timestamp": 2, "sessionID": "ses_1",
              "error": {"name": "APIError", "data": {"message": "Insufficient credits"}}})
    elif answer:
        part("text", type="text", text=answer)
    part("step_finish", tokens={"input": 200, "output": 14})
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
