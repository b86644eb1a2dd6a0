"""The daemon's own folders (the one its .env is in, the one its state is in) must not be inside a workspace its
agent may change: the agent's commands run there. Their secrets are hidden from the agent and cannot be uncovered
by renaming a folder around them (apple-code binds those folders, and knows hidden files by inode), but a layout
that keeps them apart needs neither; the daemon says so when it starts."""

from __future__ import annotations

from pathlib import Path

from apple_flow.config import Settings


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def own_folder_warnings(settings: Settings, home: Path | None = None) -> list[str]:
    """One warning for each of the daemon's folders inside a workspace it may change. A workspace that is the home
    folder or above it is left out: apple-code runs no command there and only reads."""
    home = (home or Path.home()).resolve()
    own = {"its state": settings.db_path.expanduser().absolute().parent.resolve()}
    if settings.env_file_read is not None:  # the .env it read (none: its settings came from the environment)
        own["its .env"] = settings.env_file_read.parent.resolve()
    workspaces = [settings.workspaces.default, *settings.workspaces.allowed, *settings.workspaces.aliases.values()]
    warnings = []
    for workspace in dict.fromkeys(w.expanduser().resolve() for w in workspaces):
        if _inside(home, workspace):
            continue
        for what, folder in own.items():
            if _inside(folder, workspace):
                warnings.append(
                    f"{folder} (the daemon's folder, {what}) is inside the workspace {workspace}, where the agent "
                    "runs commands. Its secrets stay hidden from them, but keep the daemon's folder outside every "
                    "workspace: move one of them."
                )
    return warnings
