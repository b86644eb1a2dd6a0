"""`apple-flow service install|uninstall|status|restart|logs`: the launchd agent."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Adds this module's commands to ``app``."""
