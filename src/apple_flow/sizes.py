"""A byte count as people read it, in the replies and notes that name a file's size."""

from __future__ import annotations


def human_size(size: int) -> str:
    if size < 0:
        return "size unknown"
    if size < 1024:
        return f"{size} bytes"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KB"
    return f"{size / (1024 * 1024):.1f} MB"
