"""attributedBody decoding: the real blobs, derived blobs with hard text, truncated, extra-data, corrupt."""

from __future__ import annotations

import pytest

from apple_flow.channels.imessage.body import UndecodableBody, decode_attributed_body
from support.chatdb import REAL_BODIES, make_body

HARD_TEXTS = [
    "Noter test",
    "café naïve façade Ünïcödé",
    "emoji 👋🏽 family 👨‍👩‍👧‍👦 flag 🇫🇷",
    "中文字符 日本語テキスト 한국어",
    "𝐁𝐨𝐥𝐝 𝑖𝑡𝑎𝑙𝑖𝑐 𝔣𝔯𝔞𝔨𝔱𝔲𝔯 𝟙𝟚𝟛",
    "photo: \ufffc and another \ufffc",
    "line one\nline two\ttabbed",
    "x" * 200,  # length needs the 2-byte integer form
    "y" * 40000,  # and the 4-byte one for the UTF-16 run length
]


@pytest.mark.parametrize(
    ("name", "expected"),
    [("AttributedBodyTextOnly.bin", "Noter test"), ("AttributedBodyTextOnly2.bin", "Test 3"), ("Blank.bin", "")],
)
def test_real_blobs(name: str, expected: str) -> None:
    assert decode_attributed_body((REAL_BODIES / name).read_bytes()) == expected


def test_derived_blob_reproduces_the_real_one() -> None:
    # The builder the other tests rely on is exact: "Test 3" gives the real blob byte for byte.
    assert make_body("Test 3") == (REAL_BODIES / "AttributedBodyTextOnly2.bin").read_bytes()


@pytest.mark.parametrize("text", HARD_TEXTS)
def test_text_survives_exactly(text: str) -> None:
    assert decode_attributed_body(make_body(text)) == text


@pytest.mark.parametrize("text", HARD_TEXTS)
def test_extra_data_after_the_archive_is_ignored(text: str) -> None:
    assert decode_attributed_body(make_body(text) + b"\x86\x84\x00garbage\xff\xfe") == text


@pytest.mark.parametrize("text", ["Noter test", "emoji 👋🏽 ok", "中文字符", "𝐁𝐨𝐥𝐝"])
def test_truncated_after_the_text_keeps_the_whole_text(text: str) -> None:
    blob = make_body(text)
    end_of_text = blob.index(text.encode()) + len(text.encode())
    assert decode_attributed_body(blob[: end_of_text + 3]) == text


def test_truncated_inside_a_character_keeps_the_whole_characters_before_it() -> None:
    text = "ab👋🏽"
    blob = make_body(text)
    cut = blob.index(text.encode()) + len(b"ab") + 2  # two bytes into the four-byte emoji
    assert decode_attributed_body(blob[:cut]) == "ab"


def test_real_blob_truncated_mid_text() -> None:
    blob = (REAL_BODIES / "AttributedBodyTextOnly.bin").read_bytes()
    cut = blob.index(b"Noter") + len(b"Noter")
    assert decode_attributed_body(blob[:cut]) == "Noter"


@pytest.mark.parametrize(
    "blob",
    [b"", b"\x00\x01\x02", b"streamtyped but nothing else", (REAL_BODIES / "Blank.bin").read_bytes()[:0x30]],
)
def test_corrupt_blobs_raise_a_clear_error(blob: bytes) -> None:
    with pytest.raises(UndecodableBody):
        decode_attributed_body(blob)
