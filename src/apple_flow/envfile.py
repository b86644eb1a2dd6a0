"""Writing one setting into a ``.env`` file: every other line kept as it was, the file replaced atomically and left
readable by its owner only (0600), since it holds secrets such as the web page's token."""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path


class EnvFileError(RuntimeError):
    """The file cannot be read or written; the message names it and says what to do."""


def set_value(path: Path, name: str, value: str) -> None:
    """Sets ``NAME=value``: replaces the line that sets it (the last one wins, as for the reader), else adds it
    after a commented-out ``# NAME=`` line, else at the end."""
    if not re.fullmatch(r"[A-Z_][A-Z0-9_]*", name) or "\n" in value:
        raise ValueError(f"cannot write {name!r}={value!r} as one .env line")
    try:
        lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    except (OSError, UnicodeDecodeError) as exc:
        raise EnvFileError(f"cannot read {path}: {exc}; fix or move it, then start again") from exc
    setting = re.compile(rf"^\s*(export\s+)?{name}\s*=", re.IGNORECASE)
    commented = re.compile(rf"^\s*#\s*{name}\s*=", re.IGNORECASE)
    line = f"{name}={value}"
    active = [i for i, text in enumerate(lines) if setting.match(text)]
    hints = [i for i, text in enumerate(lines) if commented.match(text)]
    if active:
        lines[active[-1]] = line
    elif hints:
        lines.insert(hints[-1] + 1, line)
    else:
        lines.append(line)
    _write_private(path, "\n".join(lines) + "\n")


def make_private(path: Path) -> bool:
    """Makes ``path`` readable by its owner only; True when its mode had to change."""
    mode = path.stat().st_mode & 0o777
    if mode & 0o077:
        path.chmod(mode & 0o700)
        return True
    return False


def _write_private(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    except OSError as exc:
        raise EnvFileError(f"cannot write {path}: {exc.strerror}; check the folder's permissions") from exc
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:  # mkstemp creates it 0600
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except OSError as exc:
        Path(temporary).unlink(missing_ok=True)
        raise EnvFileError(f"cannot write {path}: {exc.strerror}; check the folder's permissions") from exc
