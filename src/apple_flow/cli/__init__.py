"""The ``apple-flow`` command. Each group of subcommands lives in its own module and registers itself here.

``apple-flow run`` (what the service runs, all day) loads only its own module: the others (set-up, the doctor, the
service, the local model) would stay in the daemon's memory for nothing, about 2 MiB of an idle daemon's 50.
Everything else, and ``app`` for tests and tools, has every subcommand.
"""

from __future__ import annotations

import sys
from importlib import import_module
from typing import Any

import typer

from apple_flow import __version__

MODULES = ("setup", "model", "run", "diagnostics", "service", "mcp_tools")  # in the order `--help` lists them


def build(modules: tuple[str, ...] = MODULES) -> typer.Typer:
    """The command with the subcommands of ``modules`` registered."""
    command = typer.Typer(
        name="apple-flow",
        help="Text your Mac: an iMessage daemon for a private, on-device coding agent.",
        no_args_is_help=True,
        add_completion=False,
    )

    @command.callback()
    def root(
        version: bool = typer.Option(
            False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ) -> None:
        """apple-flow: the daemon, its diagnostics and its service."""

    for name in modules:
        import_module(f"apple_flow.cli.{name}").register(command)
    return command


def main(argv: list[str] | None = None) -> None:
    """The console script (and ``python -m apple_flow``)."""
    args = sys.argv[1:] if argv is None else argv
    build(("run",) if args[:1] == ["run"] else MODULES)(args=args)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"apple-flow {__version__}")
        raise typer.Exit()


def __getattr__(name: str) -> Any:
    # ``app``: the whole command, built on first use (importing a subcommand's module does not build it).
    if name == "app":
        app = build()
        globals()["app"] = app
        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
