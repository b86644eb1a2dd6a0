#!/usr/bin/env python3
"""A fake ``apple-code`` that follows the CLI contract (version 1) for the connector tests.

Options are parsed as the contract defines them (a bad option or a bad ``--cwd`` is a usage error, exit 2); the
prompt is read from stdin for ``-`` (or when absent). ``OPTIONS`` and ``VERSION`` must match the real binary: a test
(tests/apple_code/test_fake_apple_code.py) compares ``--help`` and ``--version`` of both, so the fake cannot drift.
Every run (``--version``, ``--help``, ``--check`` and ``--sandbox-check`` too) appends
``{"argv", "cwd", "stdin", "env"}`` as one JSON line to ``$FAKE_APPLE_CODE_RECORD`` when set. What the run does is
chosen by ``$FAKE_APPLE_CODE_MODE``:

answer (default)  a start event, two tool calls (readFile src/app.py, runCommand make test), a text delta, and a
                  success result whose text is $FAKE_APPLE_CODE_ANSWER (default "fake answer")
echo              a success result whose text is the prompt it received
empty             a success result with an empty answer
fail              "backend error: connection refused" on stderr, result error_backend, exit 1
unavailable       result error_model_unavailable ("Apple Intelligence is not enabled"), exit 3; ``--check`` says
                  why: $FAKE_APPLE_CODE_REASON (default the same). ``--check`` alone says so for the server
                  $FAKE_APPLE_CODE_UNAVAILABLE_AT (its --base-url) in any mode
timeout           honours --timeout: waits it out, then result error_timeout with a partial answer, exit 124
interrupted       result error_interrupted, exit 130 (as after a SIGTERM from someone else)
hang              prints a start event and never ends (ignores --timeout and SIGTERM)
no-result         a start event and a tool call, then exit 0 without a result event
quick             only the result event, at once (for the benchmark)
verify-fail       with --verify: the failing check before the work (a verify event with "before"), a verify
                  event that failed, then result error_verify, exit 5, with the partial
                  answer $FAKE_APPLE_CODE_ANSWER and files_changed ["src/app.py"]

With ``--verify CMD`` a result carries ``verify`` as the contract says (in ``answer`` mode after a ``verify`` event
that passed; in the others as a check that never ran, except ``verify-fail``).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

VERSION = "1.0.0"
# Every option of the real apple-code: its value's placeholder, None for one without a value.
OPTIONS: dict[str, str | None] = {
    "--cwd": "DIR", "--system": "TEXT", "--system-file": "PATH", "--timeout": "SECONDS",
    "--backend": "auto|fm|openai", "--base-url": "URL", "--model": "NAME", "--api-key": "KEY",
    "--output-format": "text|json|stream-json", "--max-turns": "N", "--read-only": None, "--no-commands": None,
    "--no-tools": None, "--temperature": "T", "--max-tokens": "N", "--mcp-config": "FILE",
    "--context-tokens": "N", "--plan": None, "--max-subtasks": "N", "--parallel": None, "--verify": "CMD",
    "--verify-rounds": "N", "--fallback-openai": None, "--hide": "PATH", "--deny-port": "PORT", "--check": None,
    "--sandbox-check": None, "--verbose": None, "--version": None, "--help": None,
}
ALIASES = {"-h": "--help"}
VALUE_OPTIONS = {name for name, value in OPTIONS.items() if value is not None}
FLAG_OPTIONS = {name for name, value in OPTIONS.items() if value is None}


def emit(event: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


VERIFY: dict[str, object] | None = None  # the result's ``verify`` object, with --verify


def verify_report(command: str, passed: bool, runs: int) -> dict[str, object]:
    tail = "1 passed" if passed else "FAILED test_app.py::test_main - assert 1 == 2"
    return {"command": command, "passed": passed, "rounds": 0 if passed else 2, "runs": runs,
            "exit_code": 0 if passed else 1, "output_tail": f"exit code {0 if passed else 1}\n{tail}"}


def result(subtype: str, text: str, code: int, files_changed: list[str] | None = None) -> None:
    event: dict[str, object] = {
        "type": "result", "subtype": subtype, "is_error": subtype != "success", "result": text, "num_turns": 1,
        "duration_ms": 5, "usage": {"input_tokens": 10, "output_tokens": 5, "estimated": True},
        "files_changed": files_changed or [], "commands_run": 0, "backend": "openai", "model": "fake",
    }
    if VERIFY is not None:
        event["verify"] = VERIFY
    emit(event)
    sys.exit(code)


def usage_error(message: str) -> None:
    sys.stderr.write(f"apple-code: {message}\n")
    result("error_usage", message, 2)


def record_run(stdin_text: str) -> None:
    record = os.environ.get("FAKE_APPLE_CODE_RECORD")
    if record:
        with open(record, "a", encoding="utf-8") as handle:
            handle.write(json.dumps({"argv": sys.argv[1:], "cwd": os.getcwd(), "stdin": stdin_text,
                                 "env": dict(os.environ)}) + "\n")


def parse(argv: list[str]) -> tuple[dict[str, str], set[str], str | None]:
    values: dict[str, str] = {}
    flags: set[str] = set()
    prompt: str | None = None
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            prompt = " ".join(argv[i + 1 :])
            break
        if arg.startswith("--") and "=" in arg and arg.split("=", 1)[0] in VALUE_OPTIONS:
            name, values[name] = arg.split("=", 1)
            i += 1
            continue
        if arg in VALUE_OPTIONS:
            if i + 1 >= len(argv):
                usage_error(f"{arg} needs a value")
            values[arg] = argv[i + 1]
            i += 2
            continue
        if arg in FLAG_OPTIONS or arg in ALIASES:
            flags.add(ALIASES.get(arg, arg))
        elif arg == "-" or not arg.startswith("-"):
            prompt = arg
        else:
            usage_error(f"unknown option {arg}")
        i += 1
    return values, flags, prompt


def usage() -> str:
    """The option lines of the real ``--help`` (``  --name VALUE, -alias   help``), with the fake's own help."""
    aliases = {name: [alias for alias, target in ALIASES.items() if target == name] for name in OPTIONS}
    lines = ["usage: apple-code [OPTIONS] [--] [PROMPT]", "", "A fake apple-code for apple-flow's tests.", ""]
    for name, value in OPTIONS.items():
        left = ", ".join([f"{name} {value}" if value else name, *aliases[name]])
        lines.append(f"  {left:<31}  (fake)")
    return "\n".join(lines)


def main() -> None:
    global VERIFY
    values, flags, prompt = parse(sys.argv[1:])
    if flags & {"--version", "--check", "--help", "--sandbox-check"}:
        record_run("")
    if "--help" in flags:
        print(usage())
        return
    if "--version" in flags:
        print(f"apple-code {VERSION}")
        return
    if "--sandbox-check" in flags:
        print("sandbox: none (fake)")
        return
    mode = os.environ.get("FAKE_APPLE_CODE_MODE", "answer")
    if "--check" in flags:
        if mode == "unavailable" or values.get("--base-url", "") == os.environ.get("FAKE_APPLE_CODE_UNAVAILABLE_AT"):
            reason = os.environ.get("FAKE_APPLE_CODE_REASON", "Apple Intelligence is not enabled")
            print(json.dumps({"backend": "fm", "available": False, "reason": reason}))
            sys.exit(3)
        print(json.dumps({"backend": values.get("--backend", "openai"), "available": True, "reason": None}))
        return
    stdin_text = ""
    if prompt == "-" or (prompt is None and not sys.stdin.isatty()):
        stdin_text = sys.stdin.read()
        prompt = stdin_text
    record_run(stdin_text)
    cwd = values.get("--cwd", os.getcwd())
    if not os.path.isdir(cwd):
        usage_error(f"--cwd {cwd} is not a directory")
    if not prompt:
        usage_error("no prompt")
    if "--verify" in values:
        VERIFY = {"command": values["--verify"], "passed": False, "rounds": 0, "runs": 0, "output_tail": ""}
    if mode == "quick":
        result("success", "ok", 0)
    emit({"type": "start", "version": VERSION, "backend": "openai", "model": "fake", "cwd": cwd,
          "context_tokens": 4096, "tools": ["readFile", "runCommand"]})
    if mode == "hang":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        while True:
            time.sleep(1)
    if mode == "answer":
        emit({"type": "tool_call", "id": "c1", "name": "readFile", "arguments": {"path": "src/app.py"}})
        emit({"type": "tool_result", "id": "c1", "name": "readFile", "ok": True, "summary": "src/app.py lines 1-3",
              "truncated": False})
        emit({"type": "tool_call", "id": "c2", "name": "runCommand", "arguments": {"command": "make test"}})
        emit({"type": "tool_result", "id": "c2", "name": "runCommand", "ok": True, "summary": "exit 0",
              "truncated": False})
        answer = os.environ.get("FAKE_APPLE_CODE_ANSWER", "fake answer")
        emit({"type": "text", "delta": answer})
        if VERIFY is not None:
            VERIFY = verify_report(values["--verify"], True, 1)
            emit({"type": "verify", **VERIFY})
        result("success", answer, 0)
    if mode == "verify-fail":
        if VERIFY is None:
            usage_error("fake: verify-fail needs --verify")
        # The real binary runs the check once before the work; it fails here too.
        emit({"type": "verify", **verify_report(values["--verify"], False, 1), "rounds": 0, "before": True})
        answer = os.environ.get("FAKE_APPLE_CODE_ANSWER", "fake answer")
        emit({"type": "text", "delta": answer})
        VERIFY = verify_report(values["--verify"], False, 3)
        emit({"type": "verify", **VERIFY})
        message = f"the check `{values['--verify']}` still fails after 2 repair rounds, exit code 1: FAILED"
        sys.stderr.write(f"apple-code: error_verify: {message}\n")
        result("error_verify", f"{answer}\n\n({message})", 5, ["src/app.py"])
    if mode == "echo":
        result("success", prompt or "", 0)
    if mode == "empty":
        result("success", "", 0)
    if mode == "fail":
        sys.stderr.write("warming up\nbackend error: connection refused\n")
        result("error_backend", "backend error: connection refused", 1)
    if mode == "unavailable":
        result("error_model_unavailable", "Apple Intelligence is not enabled", 3)
    if mode == "timeout":
        time.sleep(float(values.get("--timeout", "120")))
        result("error_timeout", "partial: read 2 files", 124)
    if mode == "interrupted":
        sys.stderr.write("apple-code: error_interrupted: interrupted by SIGTERM\n")
        result("error_interrupted", "interrupted by SIGTERM", 130)
    if mode == "no-result":
        emit({"type": "tool_call", "id": "c1", "name": "listDirectory", "arguments": {}})
        sys.exit(0)
    usage_error(f"fake: unknown FAKE_APPLE_CODE_MODE {mode}")


if __name__ == "__main__":
    main()
