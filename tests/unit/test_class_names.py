"""One meaning per name: no two classes in src/ are named alike (the same name, or one differing only in case, a
leading underscore or a plural "s") in different modules, so a reader who meets a class name knows which one it is.
A pair that must stay alike is listed here with why."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"

# Pairs named alike on purpose, each with why.
ALLOWED: dict[frozenset[str], str] = {
    frozenset({"Approval", "Approvals"}): "a stored approval (store/records.py) and the rules that decide on them",
}


def likeness(name: str) -> str:
    key = name.lstrip("_").lower()
    return key[:-1] if key.endswith("s") else key


def classes(src: Path = SRC) -> dict[str, set[tuple[str, str]]]:
    """Likeness -> the (class, module) pairs named so."""
    found: dict[str, set[tuple[str, str]]] = defaultdict(set)
    for path in sorted(src.rglob("*.py")):
        module = path.relative_to(src).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                found[likeness(node.name)].add((node.name, module))
    return found


def clashes(src: Path = SRC) -> list[str]:
    out = []
    for named in classes(src).values():
        if len({module for _, module in named}) < 2 or frozenset(name for name, _ in named) in ALLOWED:
            continue
        out.append(", ".join(f"{name} ({module})" for name, module in sorted(named)))
    return out


def test_no_two_classes_in_different_modules_are_named_alike() -> None:
    assert clashes() == [], "classes named alike in different modules; rename one (or list the pair in ALLOWED)"


def test_the_check_finds_a_clash_and_leaves_a_record_and_its_collection(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("class Database:\n    pass\n\n\nclass Row:\n    pass\n")
    (tmp_path / "b.py").write_text("class _database:\n    pass\n\n\nclass Rows:\n    pass\n")
    (tmp_path / "c.py").write_text("class Approvals:\n    pass\n")
    (tmp_path / "d.py").write_text("class Approval:\n    pass\n")
    assert clashes(tmp_path) == ["Database (a.py), _database (b.py)", "Row (a.py), Rows (b.py)"]


def test_every_allowed_pair_still_exists() -> None:
    names = {name for named in classes().values() for name, _ in named}
    assert [sorted(pair) for pair in ALLOWED if not pair <= names] == []
