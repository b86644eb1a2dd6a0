"""The ``apple-flow`` command. Each group of subcommands lives in its own module and registers itself here."""

from __future__ import annotations

import typer

from apple_flow import __version__
from apple_flow.cli import diagnostics, model, run, service, setup

app = typer.Typer(
    name="apple-flow",
    help="Text your Mac: an iMessage daemon for a private, on-device coding agent.",
    no_args_is_help=True,
    add_completion=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"apple-flow {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """apple-flow: the daemon, its diagnostics and its service."""


for module in (setup, model, run, diagnostics, service):
    module.register(app)
