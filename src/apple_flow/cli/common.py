"""What the daemon's CLI commands share: loading the settings (exit 2 with the named variable when invalid),
printing an error without letting its text be read as rich markup. The one platform check is ``apple_flow.host``."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape

from apple_flow.config import Settings, SettingsError, load_settings

err = Console(stderr=True)


def print_error(message: object) -> None:
    err.print(f"[red]{escape(str(message))}[/red]")


def settings_or_exit(env_file: str | Path | None = ".env") -> Settings:
    try:
        return load_settings(env_file)
    except SettingsError as exc:
        print_error(exc)
        raise typer.Exit(2) from exc
