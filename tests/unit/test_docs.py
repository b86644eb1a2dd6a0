"""The README and docs/ hold together: every relative link resolves (to a file, and to a heading when it names
one), the README stays an entrance, and docs/configuration.md lists every setting, as generated from .env.example."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

from apple_flow.config import setting_variables

ROOT = Path(__file__).resolve().parents[2]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


def documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    return {slug(m.group(1)) for m in re.finditer(r"^#{1,6} (.+)$", text, re.MULTILINE)}


def broken_links(paths: list[Path], root: Path = ROOT) -> list[str]:
    broken = []
    for path in paths:
        text = FENCE.sub("", path.read_text(encoding="utf-8"))
        for target in LINK.findall(text):
            if re.match(r"[a-z]+:", target):
                continue  # http(s), mailto: not checked here
            file_part, _, anchor = target.partition("#")
            resolved = (path.parent / file_part).resolve() if file_part else path
            if not resolved.exists():
                broken.append(f"{path.relative_to(root)}: {target} (no such file)")
            elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
                broken.append(f"{path.relative_to(root)}: {target} (no such heading)")
    return broken


def test_every_relative_link_resolves() -> None:
    assert broken_links(documents()) == []


def test_a_broken_link_or_heading_is_found(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    (tmp_path / "other.md").write_text("# Other\n\n## Plan mode: `apple-code --plan`\n")
    page.write_text("[a](other.md#plan-mode-apple-code---plan) [b](missing.md) [c](other.md#nowhere) "
                    "[d](https://example.com/x) [e](#top)\n\n# Top\n")
    assert broken_links([page], tmp_path) == [
        "page.md: missing.md (no such file)", "page.md: other.md#nowhere (no such heading)",
    ]


def test_the_readme_is_an_entrance() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 150, f"README.md has {len(lines)} lines; move detail into docs/"
    assert "./scripts/run.sh" in lines[8] and "./scripts/test.sh" in lines[9]  # the two commands come first


def test_every_setting_is_in_the_configuration_page() -> None:
    page = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    names = [f"APPLE_FLOW_{name.upper()}" for name in setting_variables()]
    missing = [name for name in names if f"`{name}`" not in page]
    assert missing == [], f"docs/configuration.md lacks {missing}: run scripts/docs_configuration.py"


def test_the_configuration_page_is_generated_from_env_example() -> None:
    spec = importlib.util.spec_from_file_location("docs_configuration", ROOT / "scripts" / "docs_configuration.py")
    assert spec and spec.loader
    generator = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = generator  # its dataclasses look their module up
    spec.loader.exec_module(generator)
    wanted = generator.render((ROOT / ".env.example").read_text(encoding="utf-8"))
    assert (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8") == wanted, (
        "docs/configuration.md is out of date: run scripts/docs_configuration.py"
    )
