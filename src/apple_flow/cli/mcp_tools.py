"""`apple-flow mcp`: the MCP server other agents start over stdio (apple_flow.mcp_server)."""

from __future__ import annotations

import os
from pathlib import Path

import typer

from apple_flow.cli.common import settings_or_exit


def register(app: typer.Typer) -> None:
    app.command(name="mcp")(mcp)


EnvFileOption = typer.Option(
    Path(".env"), "--env-file",
    help="The daemon's settings file (its APPLE_FLOW_* variables in the environment win over it).",
)


def mcp(env_file: Path = EnvFileOption) -> None:
    """Serve the Mac's model and agent to an MCP client (Claude Code, Codex, Cursor) on stdin/stdout."""
    settings = settings_or_exit(env_file if env_file.is_file() else None)
    if env_file.is_file():
        # The daemon's settings file (its web token among them) is hidden from apple-code's tools and commands
        # wherever it is; the connector itself hides only a .env in the folder it runs in.
        hidden = [os.environ.get("APPLE_CODE_HIDE", ""), str(env_file.resolve())]
        os.environ["APPLE_CODE_HIDE"] = ":".join(path for path in hidden if path)
    # Imported here: the SDK is only needed by this command.
    from apple_flow.mcp_server.server import serve

    serve(settings)
