"""Where things are: the project checkout, the built ``apple-code`` binary, the daemon's state folder."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

# src/apple_flow/paths.py -> project root (only meaningful in a checkout, not in an installed wheel).
PROJECT_ROOT = Path(__file__).resolve().parents[2]
APPLE_CODE_PACKAGE = PROJECT_ROOT / "apple_code"


def built_apple_code() -> Path | None:
    """The newest SwiftPM build of ``apple-code`` in this checkout (release preferred), if any."""
    for config in ("release", "debug"):
        candidate = APPLE_CODE_PACKAGE / ".build" / config / "apple-code"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def built_launcher() -> Path:
    """Where ``scripts/build-launcher.sh`` (run by ``scripts/setup.sh``) puts ``apple-flow-launcher``, the executable
    of ``Apple Flow.app``: a release build of its own, made reproducibly, so that the same source and toolchain give
    the same bytes (and keep macOS's grants) wherever the checkout is and however often it is rebuilt."""
    return APPLE_CODE_PACKAGE / ".build" / "launcher" / "release" / "apple-flow-launcher"


def resolve_apple_code(command: str = "apple-code") -> Path | None:
    """Finds the binary for ``apple_flow_afm_command``: an explicit path as given; the bare name on PATH,
    else this checkout's build."""
    if os.sep in command:
        path = Path(command).expanduser()
        return path if path.is_file() and os.access(path, os.X_OK) else None
    found = shutil.which(command)
    if found:
        return Path(found)
    return built_apple_code() if command == "apple-code" else None


def state_folder() -> Path:
    """apple-flow's own folder (``~/.apple-flow``): the database, its lock and the service's logs by default. It
    holds every request, reply and diff: readable by its owner only (0700)."""
    return Path.home() / ".apple-flow"


def is_state_folder(folder: Path) -> bool:
    """Whether ``folder`` is apple-flow's own state folder (tightened at every start), not one the user chose."""
    try:
        return folder.resolve() == state_folder().resolve()
    except (OSError, RuntimeError):
        return False
