"""`apple-flow doctor`, `inbox`, `send` and `config`: checking and trying the set-up."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Adds this module's commands to ``app``."""
