"""`apple-flow run` and `apple-flow chat`: the daemon and the console channel."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Adds this module's commands to ``app``."""
