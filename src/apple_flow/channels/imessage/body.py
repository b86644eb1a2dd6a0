"""Text of a message's ``attributedBody``: a typedstream (NSArchiver) archive of an NSAttributedString.

``pytypedstream`` decodes well-formed archives; real blobs are sometimes truncated or carry extra data after the
root object, so the first root value is read on its own and, failing that, the string is located in the raw
bytes. Both paths decode UTF-8 exactly, so emoji, accents, CJK and U+FFFC attachment markers survive.
"""

from __future__ import annotations

import codecs
import logging
from typing import Any

from typedstream.archiving import GenericArchivedObject, TypedGroup, Unarchiver
from typedstream.types.foundation import NSString

log = logging.getLogger(__name__)

# The first NSString of an NSAttributedString archive: the class name, then (after the class version and a
# superclass reference) a new type-encoding string "+" (0x84, length 1, '+') and the byte length of the text.
_NSSTRING_CLASS = b"NSString"
_TEXT_MARKER = b"\x84\x01+"
_INT16, _INT32 = 0x81, 0x82  # typedstream tags: a 2- or 4-byte little-endian integer follows


class UndecodableBody(ValueError):
    """The blob holds no text this module can find."""


def decode_attributed_body(blob: bytes) -> str:
    """The plain text of ``blob`` (possibly empty). Raises ``UndecodableBody`` when no text can be found."""
    try:
        return _decode_archive(blob)
    except Exception as exc:  # any library failure falls through to the byte scan
        log.debug("typedstream could not decode a %d-byte attributedBody (%s); scanning bytes", len(blob), exc)
    return _scan_for_text(blob)


def _decode_archive(blob: bytes) -> str:
    # Only the first root value: trailing bytes after it (seen in real blobs) would fail a whole-stream decode.
    with Unarchiver.from_data(blob) as unarchiver:
        root = unarchiver.decode_typed_values(_lookahead=next(unarchiver.reader))
    text = _first_string(root)
    if text is None:
        raise UndecodableBody("the archive holds no string")
    return text


def _first_string(value: Any) -> str | None:
    """Depth-first search for the attributed string's text (its first NSString)."""
    if isinstance(value, NSString):
        return str(value.value)
    if isinstance(value, TypedGroup):
        for item in value.values:
            found = _first_string(item)
            if found is not None:
                return found
    if isinstance(value, GenericArchivedObject):
        for group in value.contents:
            found = _first_string(group)
            if found is not None:
                return found
    return None


def _scan_for_text(blob: bytes) -> str:
    start = blob.find(_NSSTRING_CLASS)
    marker = blob.find(_TEXT_MARKER, max(start, 0))
    if marker < 0:
        raise UndecodableBody("no NSString in the attributedBody")
    position = marker + len(_TEXT_MARKER)
    length, position = _read_length(blob, position)
    raw = blob[position : position + length]
    # A truncated blob may end inside a character: decode incrementally so a cut-off last one is dropped,
    # not turned into U+FFFD.
    return codecs.getincrementaldecoder("utf-8")(errors="replace").decode(raw, final=len(raw) >= length)


def _read_length(blob: bytes, position: int) -> tuple[int, int]:
    if position >= len(blob):
        raise UndecodableBody("the attributedBody ends before the text length")
    tag = blob[position]
    if tag == _INT16:
        return int.from_bytes(blob[position + 1 : position + 3], "little"), position + 3
    if tag == _INT32:
        return int.from_bytes(blob[position + 1 : position + 5], "little"), position + 5
    if tag >= 0x80:
        raise UndecodableBody(f"unexpected length tag 0x{tag:02x} in the attributedBody")
    return tag, position + 1
