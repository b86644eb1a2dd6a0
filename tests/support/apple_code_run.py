"""Running the real ``apple-code`` binary in tests, and the request budget rule it documents."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

MAX_LINE_BYTES = 16 * 1024


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
    """Port of TokenEstimator.estimate: one token per 3 UTF-8 bytes, rounded up, plus one."""
    return (len(text.encode()) + 2) // 3 + 1


def compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def request_tokens(body: dict[str, Any]) -> int:
    """The documented request estimate: estimate(messages JSON) + estimate(tools JSON) + max_tokens."""
    tools = estimate(compact(body["tools"])) if body.get("tools") else 0
    return estimate(compact(body["messages"])) + tools + int(body["max_tokens"])
