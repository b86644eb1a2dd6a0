"""`apple-flow model start|stop|status`: the local llama.cpp server for machines without Apple Intelligence."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from apple_flow.config import load_settings
from apple_flow.localmodel import DEFAULT_STATE_DIR, LocalModelError, LocalModelServer, started_servers

model_app = typer.Typer(help="The local demo model server (SmolLM2-135M on llama.cpp).", no_args_is_help=True)
console = Console(stderr=True)


def _server(port: int | None, state_dir: Path) -> LocalModelServer:
    settings = load_settings()
    return LocalModelServer(settings.local_model_host, port or settings.local_model_port, state_dir)


def _started(port: int | None, state_dir: Path) -> list[LocalModelServer]:
    """The server on ``port``; without one, those ``start`` left running (on whatever port it was given), else the
    one on the configured port."""
    if port is None:
        running = started_servers(state_dir, load_settings().local_model_host)
        if running:
            return running
    return [_server(port, state_dir)]


PortOption = typer.Option(None, "--port", help="Port on 127.0.0.1 (default APPLE_FLOW_LOCAL_MODEL_PORT).")
StateOption = typer.Option(DEFAULT_STATE_DIR, "--state-dir", help="Where the pid file and log live.")


@model_app.command()
def start(port: int | None = PortOption, state_dir: Path = StateOption) -> None:
    """Start the server in the background and wait until it answers."""
    server = _server(port, state_dir)
    try:
        with console.status(f"Starting the local model server on {server.url} ..."):
            status = server.start()
    except LocalModelError as exc:
        console.print(f"[red]{exc}[/red]")
        raise typer.Exit(1) from exc
    console.print(f"[green]Local model server running[/green] (pid {status.pid}) at {status.url}; log: {status.log}")
    typer.echo(status.url)


@model_app.command()
def stop(port: int | None = PortOption, state_dir: Path = StateOption) -> None:
    """Stop the server and its children (without --port: every one `start` left running, whatever its port)."""
    stopped = [server.port for server in _started(port, state_dir) if server.stop()]
    for number in stopped:
        console.print(f"Stopped the local model server on port {number}.")
    if not stopped:
        console.print("The local model server was not running.")


@model_app.command()
def status(port: int | None = PortOption, state_dir: Path = StateOption) -> None:
    """Say whether the server runs and answers (exit 1 when not); without --port, the one `start` left running."""
    server = _started(port, state_dir)[0]
    state = server.status()
    if state.running and server.answers():
        console.print(f"[green]running[/green] pid {state.pid} at {state.url}")
        return
    console.print("running but not answering yet" if state.running else "not running")
    raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.add_typer(model_app, name="model")
