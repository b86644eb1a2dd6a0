"""Reply splitting: whole paragraphs, then sentences, then words; numbered; nothing lost."""

from __future__ import annotations

import re

import pytest

from apple_flow.channels.imessage.outgoing import OutgoingText, Target, split_reply

NUMBER = re.compile(r"^\((\d+)/(\d+)\) ")


def strip_numbers(parts: list[str]) -> list[str]:
    return [NUMBER.sub("", part, count=1) for part in parts]


def words(text: str) -> list[str]:
    return text.split()


def test_a_short_reply_is_one_unnumbered_part() -> None:
    assert split_reply("  All done.  ", 1500) == ["All done."]


def test_an_empty_reply_sends_nothing() -> None:
    assert split_reply(" \n ", 1500) == []


def test_paragraphs_are_kept_whole_and_parts_numbered() -> None:
    paragraphs = [f"Paragraph {i}. " + "word " * 30 for i in range(6)]
    text = "\n\n".join(p.strip() for p in paragraphs)

    parts = split_reply(text, 400)

    assert len(parts) > 1
    assert all(len(part) <= 400 for part in parts)
    assert [NUMBER.match(p).groups() for p in parts] == [  # type: ignore[union-attr]
        (str(i), str(len(parts))) for i in range(1, len(parts) + 1)
    ]
    for body in strip_numbers(parts):
        for paragraph in body.split("\n\n"):
            assert paragraph.startswith("Paragraph ")  # no paragraph was cut
    assert words(" ".join(strip_numbers(parts))) == words(text)


def test_a_long_paragraph_is_cut_at_sentence_ends() -> None:
    sentences = [f"Sentence number {i} says something useful." for i in range(40)]
    text = " ".join(sentences)

    parts = strip_numbers(split_reply(text, 300))

    assert all(part.endswith(".") for part in parts)
    assert words(" ".join(parts)) == words(text)


def test_a_sentence_longer_than_a_part_is_cut_between_words_and_a_huge_word_hard() -> None:
    text = "start " + "lorem " * 100 + "x" * 700 + " end"

    parts = split_reply(text, 200)

    assert all(len(part) <= 200 for part in parts)
    body = strip_numbers(parts)
    assert all(not part.startswith(" ") and not part.endswith(" ") for part in body)
    assert "".join(body).replace(" ", "") == text.replace(" ", "")


@pytest.mark.parametrize("limit", [100, 1500])
def test_many_parts_still_fit_with_wider_numbers(limit: int) -> None:
    text = " ".join(f"Sentence {i}." for i in range(3000))

    parts = split_reply(text, limit)

    assert len(parts) >= 10
    assert all(len(part) <= limit for part in parts)
    assert parts[-1].startswith(f"({len(parts)}/{len(parts)}) ")


def test_emoji_and_cjk_are_not_mangled() -> None:
    text = ("你好世界。" * 50 + "\n\n" + "👋🏽 hi! " * 60).strip()
    parts = strip_numbers(split_reply(text, 150))
    assert "".join(parts).replace(" ", "").replace("\n", "") == text.replace(" ", "").replace("\n", "")


def test_line_breaks_inside_a_long_paragraph_survive_the_split() -> None:
    # A numbered plan or a list is one paragraph of lines; cut at sentence ends, its lines must stay lines.
    lines = [f"{i}. Change module_{i}.py so that it does the right thing." for i in range(1, 41)]
    parts = strip_numbers(split_reply("\n".join(lines), 300))
    assert len(parts) > 1
    kept = [line for part in parts for line in part.split("\n")]
    assert kept == lines


def test_a_text_going_out_is_split_in_the_form_osascript_takes_and_noted_in_the_form_its_copies_come_back_in() -> None:
    text = "Hello\x00  world, this is long.\n\nSecond   paragraph here."
    outgoing = OutgoingText.of("SMS;-;+1 (555) 123-4567", text, "US", 30)
    assert outgoing.target == Target("sms", "+15551234567")
    assert outgoing.parts == tuple(split_reply("Hello  world, this is long.\n\nSecond   paragraph here.", 30))
    assert len(outgoing.parts) == 3  # the NUL is gone before the split, as it is from what is sent
    assert outgoing.echoes == tuple(" ".join(part.split()) for part in outgoing.parts)
