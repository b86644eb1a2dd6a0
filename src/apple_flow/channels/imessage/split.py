"""Splitting a long reply into numbered parts at paragraph, then line, then sentence, then word boundaries."""

from __future__ import annotations

import re

_SENTENCE_END = re.compile(r"(?<=[.!?…])\s+")


def split_reply(text: str, limit: int) -> list[str]:
    """``text`` as parts of at most ``limit`` characters each (numbering included). A text that fits is
    returned as is; otherwise each part is prefixed ``(i/n) ``."""
    text = text.strip()
    if len(text) <= limit:
        return [text] if text else []
    reserve = len("(9/9) ")  # room for the part number prefix, widened when there are 10 or more parts
    while True:
        budget = max(limit - reserve, 1)
        pieces = _pack(_paragraph_units(text, budget), budget)
        total = len(pieces)
        needed = len(f"({total}/{total}) ")
        if needed <= reserve:
            break
        reserve = needed
    return [f"({index}/{total}) {piece}" for index, piece in enumerate(pieces, start=1)]


def _paragraph_units(text: str, budget: int) -> list[tuple[str, str]]:
    """(separator-before, unit) pairs, each unit at most ``budget`` long."""
    units: list[tuple[str, str]] = []
    for paragraph in re.split(r"\n\s*\n", text):
        paragraph = paragraph.strip()
        if not paragraph:
            continue
        if len(paragraph) <= budget:
            units.append(("\n\n", paragraph))
            continue
        separator = "\n\n"
        for line in paragraph.split("\n"):  # lines (a list, a plan) before sentences: a line break stays one
            sentences = [line] if len(line) <= budget else _SENTENCE_END.split(line)
            for sentence in sentences:
                for piece in _cut_words(sentence, budget):
                    units.append((separator, piece))
                    separator = " "
            separator = "\n"
    return units


def _cut_words(sentence: str, budget: int) -> list[str]:
    if len(sentence) <= budget:
        return [sentence]
    # A single over-long word (a URL, a hash) is cut hard into budget-sized pieces, which never join others.
    units = [(" ", word[i : i + budget]) for word in sentence.split(" ") for i in range(0, max(len(word), 1), budget)]
    return _pack(units, budget)


def _pack(units: list[tuple[str, str]], budget: int) -> list[str]:
    pieces: list[str] = []
    current = ""
    for separator, unit in units:
        candidate = f"{current}{separator}{unit}" if current else unit
        if len(candidate) <= budget:
            current = candidate
        else:
            pieces.append(current)
            current = unit
    if current:
        pieces.append(current)
    return pieces
