"""Running the real ``apple-code`` binary in tests, and the request budget rule it documents."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from support.scripted_server import ScriptedServer, Step

MAX_LINE_BYTES = 16 * 1024


def scripted_args(url: str, workspace: Path, *extra: str) -> list[str]:
    """apple-code against the scripted server at ``url``, in ``workspace``, with stream-json and --verbose."""
    return ["--backend", "openai", "--base-url", url, "--model", "scripted", "--cwd", str(workspace),
            "--output-format", "stream-json", "--verbose", *extra]


def run_scripted(
    binary: Path, workspace: Path, steps: list[Step], prompt: str, *extra: str, streaming: bool = True
) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]], list[dict[str, Any]]]:
    """One apple-code run against a scripted server: the finished process, its events, the requests received."""
    with ScriptedServer(steps, streaming=streaming) as server:
        done = run_apple_code(binary, *scripted_args(server.url, workspace, *extra), prompt)
        return done, events(done.stdout), server.requests()


def clean_env(**extra: str) -> dict[str, str]:
    """The test process environment without any APPLE_CODE_* setting (so a developer's shell cannot leak in)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("APPLE_CODE_")}
    env.update(extra)
    return env


def run_apple_code(
    binary: Path, *args: str, stdin: str | None = None, timeout: float = 30, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(binary), *args],
        input=stdin,
        stdin=None if stdin is not None else subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env if env is not None else clean_env(),
    )


def events(stdout: str) -> list[dict[str, Any]]:
    """stream-json lines as dicts; every line must be JSON and within the 16 KiB limit."""
    lines = stdout.splitlines()
    for line in lines:
        assert len(line.encode()) < MAX_LINE_BYTES, f"line over 16 KiB: {len(line.encode())} bytes"
    return [json.loads(line) for line in lines]


def estimate(text: str) -> int:
    """Port of TokenEstimator.estimate: per UTF-8 byte, an ASCII digit 1 token, a non-ASCII byte 0.7, any other
    ASCII byte 1/3; rounded up, plus one."""
    data = text.encode()
    digits = sum(1 for byte in data if 0x30 <= byte <= 0x39)
    wide = sum(1 for byte in data if byte >= 0x80)
    units = (len(data) - digits - wide) * 10 + digits * 30 + wide * 21
    return (units + 29) // 30 + 1


def compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def request_tokens(body: dict[str, Any]) -> int:
    """The documented request estimate: estimate(messages JSON) + estimate(tools JSON) + max_tokens."""
    tools = estimate(compact(body["tools"])) if body.get("tools") else 0
    return estimate(compact(body["messages"])) + tools + int(body["max_tokens"])
