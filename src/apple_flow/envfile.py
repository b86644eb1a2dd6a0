"""Editing a ``.env`` file: values set, every other line kept byte for byte, the file replaced in one atomic step
and left readable by its owner only (0600), since it holds secrets such as the web page's token.

``EnvEdit`` gathers changes and writes them together (``save``), so an interrupted edit leaves the old file whole;
``set_value`` is one change written at once. Lines are parsed by python-dotenv's own parser, the one the settings
are read with, so what counts as a setting here is what counts when it is read.
"""

from __future__ import annotations

import io
import re
import secrets
from collections.abc import Callable
from pathlib import Path

from dotenv.parser import Binding, parse_stream

from apple_flow.privatefile import write_private

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_BARE = re.compile(r"[A-Za-z0-9_@%+=:,./~^-]*")  # written unquoted: no spaces, quotes, '#', '$' or backslash


class EnvFileError(RuntimeError):
    """The file cannot be read or written; the message names it and says what to do."""


def format_value(value: str) -> str:
    """``value`` as the reader will give it back: bare when that is safe, else in single quotes with ``\\`` and
    ``'`` escaped. ``${`` cannot be written (the reader expands it in any quotes), nor a line break."""
    if "\n" in value or "\r" in value or "${" in value:
        raise ValueError(f"{value!r} cannot be written as one .env value (line breaks and '${{' are not kept)")
    if _BARE.fullmatch(value):
        return value
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def new_secret() -> str:
    return secrets.token_urlsafe(32)


class EnvEdit:
    """Pending changes to one ``.env``; nothing is written before ``save``."""

    def __init__(self, path: Path, template: str = "") -> None:
        """Reads ``path``; a missing file starts from ``template`` (e.g. the documented ``.env.example``)."""
        self.path = path
        self.existed = path.is_file()
        try:
            text = path.read_text(encoding="utf-8") if self.existed else template
        except (OSError, UnicodeDecodeError) as exc:
            raise EnvFileError(f"cannot read {path}: {exc}; fix or move it, then start again") from exc
        self._bindings: list[Binding] = list(parse_stream(io.StringIO(text)))
        self._changes: dict[str, str] = {}

    def get(self, name: str) -> str | None:
        """The value the reader would take from this file (the last line that sets ``name`` wins), changes
        included; None when the file does not set it."""
        if name in self._changes:
            return self._changes[name]
        index = self._last(name)
        return None if index is None else self._bindings[index].value

    def set(self, name: str, value: str) -> None:
        if not _NAME.fullmatch(name):
            raise ValueError(f"{name!r} is not a variable name")
        format_value(value)  # refuse now, not at save
        if self.get(name) != value:
            self._changes[name] = value

    def secret(self, name: str, make: Callable[[], str] = new_secret) -> str:
        """The secret ``name`` holds, or a new one from ``make`` set in its place (one call)."""
        current = self.get(name)
        if current:
            return current
        value = make()
        self.set(name, value)
        return value

    @property
    def changed(self) -> list[str]:
        return list(self._changes)

    def text(self) -> str:
        pieces = [binding.original.string for binding in self._bindings]
        appended: list[str] = []
        inserted: dict[int, list[str]] = {}
        for name, value in self._changes.items():
            line = f"{name}={format_value(value)}\n"
            index = self._last(name)
            hint = self._commented(name)
            if index is not None:
                pieces[index] = line
            elif hint is not None:
                inserted.setdefault(hint, []).append(line)
            else:
                appended.append(line)
        out = []
        for index, piece in enumerate(pieces):
            out.append(piece)
            if index in inserted:
                out.extend(inserted[index])
        text = "".join(out)
        if appended and text and not text.endswith("\n"):
            text += "\n"
        return text + "".join(appended)

    def save(self) -> None:
        """Writes the file in one step, mode 0600 (also when nothing changed: it may hold secrets)."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_private(self.path, self.text().encode("utf-8"))
        except OSError as exc:
            raise EnvFileError(
                f"cannot write {self.path}: {exc.strerror or exc}; check the folder's permissions"
            ) from exc

    def _last(self, name: str) -> int | None:
        """The line that sets ``name`` (the reader ignores case, and the last one wins)."""
        found = None
        for index, binding in enumerate(self._bindings):
            if binding.key is not None and binding.key.upper() == name.upper():
                found = index
        return found

    def _commented(self, name: str) -> int | None:
        """A commented-out ``# NAME=`` line, where a new setting of ``name`` belongs."""
        hint = re.compile(rf"^\s*#\s*{re.escape(name)}\s*=", re.IGNORECASE)
        found = None
        for index, binding in enumerate(self._bindings):
            if binding.key is None and hint.match(binding.original.string):
                found = index
        return found


def set_value(path: Path, name: str, value: str) -> None:
    """Sets ``NAME=value``: replaces the line that sets it (the last one wins, as for the reader), else adds it
    after a commented-out ``# NAME=`` line, else at the end."""
    edit = EnvEdit(path)
    edit.set(name, value)
    edit.save()


def make_private(path: Path) -> bool:
    """Makes ``path`` readable by its owner only; True when its mode had to change."""
    mode = path.stat().st_mode & 0o777
    if mode & 0o077:
        path.chmod(mode & 0o700)
        return True
    return False
