"""`.env.example` documents every setting with its default, and loads as it stands."""

from __future__ import annotations

import re
from pathlib import Path

from apple_flow.config import load_settings, setting_variables

ENV_EXAMPLE = Path(__file__).resolve().parents[2] / ".env.example"
LINE = re.compile(r"^(?:# )?APPLE_FLOW_([A-Z0-9_]+)=(.*)$")


def documented() -> dict[str, str]:
    entries: dict[str, str] = {}
    for line in ENV_EXAMPLE.read_text(encoding="utf-8").splitlines():
        match = LINE.match(line)
        if match:
            entries[match.group(1).lower()] = match.group(2)
    return entries


def test_every_setting_is_documented() -> None:
    missing = sorted(set(setting_variables()) - set(documented()))
    assert not missing, f".env.example lacks: {', '.join('APPLE_FLOW_' + m.upper() for m in missing)}"


def test_nothing_documented_that_is_not_a_setting() -> None:
    assert set(documented()) <= set(setting_variables())


def test_env_example_loads_and_gives_the_defaults() -> None:
    from_file = load_settings(env_file=ENV_EXAMPLE)
    defaults = load_settings(env_file=None)
    assert from_file.model_dump() == defaults.model_dump()
