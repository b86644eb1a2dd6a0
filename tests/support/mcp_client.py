"""Driving ``apple-flow mcp`` with the MCP SDK's own client over stdio, as Claude Code or Codex would: the server is
this checkout's ``python -m apple_flow mcp`` in its own process, with only the settings the test gives it.

    with McpServerProcess(env, cwd) as calls:  # a session, initialized
        calls.call("run_task", {"prompt": "..."})  # -> (CallToolResult, [progress messages])
"""

from __future__ import annotations

import json
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.types import CallToolResult, TextContent, Tool

from apple_flow.paths import PROJECT_ROOT

T = TypeVar("T")


def server_parameters(env: dict[str, str], cwd: Path, env_file: Path | None = None) -> StdioServerParameters:
    """``apple-flow mcp`` with ``env`` over the SDK's safe default environment (HOME, PATH ...) and ``env_file`` as
    its settings file (none: no .env is read)."""
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "apple_flow", "mcp", "--env-file", str(env_file or cwd / "no.env")],
        env={"PYTHONPATH": str(PROJECT_ROOT / "src"), **env},
        cwd=str(cwd),
    )


def with_session(
    env: dict[str, str], cwd: Path, body: Callable[[ClientSession], Awaitable[T]], env_file: Path | None = None,
) -> T:
    """Starts the server, initializes a session, runs ``body`` with it and stops the server."""
    async def main() -> T:
        with (cwd / "mcp-server.stderr").open("w") as errlog:
            async with (
                stdio_client(server_parameters(env, cwd, env_file), errlog=errlog) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                return await body(session)

    return anyio.run(main)


async def call(session: ClientSession, name: str, arguments: dict[str, Any]) -> tuple[CallToolResult, list[str]]:
    """One tool call and the progress messages the server sent for it."""
    messages: list[str] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        messages.append(message or "")

    result = await session.call_tool(name, arguments, progress_callback=progress)
    return result, messages


async def tools(session: ClientSession) -> list[Tool]:
    return list((await session.list_tools()).tools)


def text_of(result: CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, TextContent))


def structured(result: CallToolResult) -> dict[str, Any]:
    """The tool's returned object (structured content, else the JSON of its text)."""
    assert not result.is_error, text_of(result)
    if result.structured_content is not None:
        return dict(result.structured_content)
    value = json.loads(text_of(result))
    assert isinstance(value, dict)
    return value
