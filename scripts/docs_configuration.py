"""Writes docs/configuration.md from .env.example, so the settings' reference cannot drift from the file that
documents each setting with its default (which tests/connectors/test_env_example.py holds to the settings class).

    .venv/bin/python scripts/docs_configuration.py          # rewrite docs/configuration.md
    .venv/bin/python scripts/docs_configuration.py --check  # exit 1 if it is out of date
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENV_EXAMPLE = ROOT / ".env.example"
TARGET = ROOT / "docs" / "configuration.md"
SECTION = re.compile(r"^# --- (.+?) -*$")
SETTING = re.compile(r"^(#\s*)?(APPLE_FLOW_[A-Z0-9_]+)=(.*)$")

HEADER = """# Configuration

Every setting is an environment variable with the prefix `APPLE_FLOW_` (case does not matter), read from the
environment and from `.env` in the folder apple-flow runs in; a variable set in the environment wins over `.env`.
Lists take `a,b,c` or a JSON list; maps take JSON. An invalid value stops the daemon with the variable's name and
what is wrong (exit 2). `apple-flow config` prints the effective settings, secrets masked. `apple-flow setup` writes
the ones a first run needs.

This page is generated from [`.env.example`](../.env.example) by `scripts/docs_configuration.py` (a test keeps it
current; after changing a setting, run that script). "unset" means the setting has no value unless you give one.
"""


@dataclass
class Group:
    """Settings documented by one comment block."""

    comment: list[str] = field(default_factory=list)
    settings: list[tuple[str, str, bool]] = field(default_factory=list)  # name, value, set by default


def parse(text: str) -> list[tuple[str, list[Group]]]:
    sections: list[tuple[str, list[Group]]] = []
    pending: list[str] = []
    for line in text.splitlines():
        if match := SECTION.match(line):
            sections.append((match.group(1).strip(), []))
            pending = []
        elif match := SETTING.match(line):
            if not sections:
                continue
            groups = sections[-1][1]
            if pending or not groups:
                groups.append(Group(comment=pending))
                pending = []
            groups[-1].settings.append((match.group(2), match.group(3), match.group(1) is None))
        elif line.startswith("#") and sections:
            pending.append(line.lstrip("#").strip())
        elif not line.strip():
            pending = []
    return sections


def cell(text: str) -> str:
    return text.replace("|", "\\|")


def render(text: str) -> str:
    out = [HEADER]
    for title, groups in parse(text):
        out += [f"## {title}", "", "| setting | default | what it does |", "|---|---|---|"]
        for group in groups:
            about = cell(" ".join(group.comment)) or "see the setting above"
            for index, (name, value, is_set) in enumerate(group.settings):
                default = f"`{cell(value)}`" if value else "(empty)" if is_set else "unset"
                out.append(f"| `{name}` | {default} | {about if index == 0 else '(as above)'} |")
        out.append("")
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="exit 1 if docs/configuration.md is out of date")
    args = parser.parse_args()
    wanted = render(ENV_EXAMPLE.read_text(encoding="utf-8"))
    if args.check:
        current = TARGET.read_text(encoding="utf-8") if TARGET.exists() else ""
        if current != wanted:
            print(f"{TARGET.relative_to(ROOT)} is out of date: run scripts/docs_configuration.py", file=sys.stderr)
            return 1
        return 0
    TARGET.write_text(wanted, encoding="utf-8")
    print(f"wrote {TARGET.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
