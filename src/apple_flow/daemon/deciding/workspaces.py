"""Which folder a turn runs in: the default workspace, or a configured `@alias`, and only inside
``allowed_workspaces``."""

from __future__ import annotations

from pathlib import Path

from apple_flow.config import Settings


class WorkspaceError(ValueError):
    """The requested workspace cannot be used; the message tells the sender why."""


class Workspaces:
    def __init__(self, settings: Settings) -> None:
        self._default = settings.workspaces.default
        self._aliases = settings.workspaces.aliases
        self._roots = [p.resolve() for p in settings.workspaces.allowed]

    @property
    def default(self) -> Path:
        return self._default

    def resolve(self, alias: str | None) -> Path:
        if alias is None:
            return self._default
        path = self._aliases.get(alias.lower())
        if path is None:
            known = ", ".join(f"@{name}" for name in sorted(self._aliases)) or "none configured"
            raise WorkspaceError(f"Unknown workspace @{alias} (known: {known}).")
        if not self._permitted(path):
            raise WorkspaceError(f"@{alias} points outside the allowed workspaces; ask the owner to allow it.")
        if not path.is_dir():
            raise WorkspaceError(f"@{alias} points to {path}, which is not a folder on this Mac.")
        return path

    def _permitted(self, path: Path) -> bool:
        real = path.resolve()
        return any(real == root or real.is_relative_to(root) for root in self._roots)
