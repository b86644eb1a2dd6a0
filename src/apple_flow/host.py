"""What system this is. Called through this module (``host.is_macos()``), so one replacement in a test covers
every caller."""

from __future__ import annotations

import sys


def is_macos() -> bool:
    """Where Messages, launchd and Apple's model are."""
    return sys.platform == "darwin"
