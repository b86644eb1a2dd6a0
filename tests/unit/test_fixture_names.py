"""Each fixture name is defined once in the test tree: a fixture redefined in a test module silently replaces the
shared one for that module, so a reader who finds the name in tests/conftest.py reads the wrong code."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def fixture_name(function: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    """The name a function is a fixture under (``name=`` wins), or None if it is not a fixture."""
    for decorator in function.decorator_list:
        called = decorator.func if isinstance(decorator, ast.Call) else decorator
        if ast.unparse(called) not in ("pytest.fixture", "fixture"):
            continue
        if isinstance(decorator, ast.Call):
            for keyword in decorator.keywords:
                if keyword.arg == "name" and isinstance(keyword.value, ast.Constant):
                    return str(keyword.value.value)
        return function.name
    return None


def fixtures_in(root: Path) -> dict[str, list[str]]:
    """Every fixture name under ``root`` with where it is defined (``path:line``)."""
    found: dict[str, list[str]] = defaultdict(list)
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and (name := fixture_name(node)):
                found[name].append(f"{path.relative_to(root)}:{node.lineno}")
    return found


def test_no_fixture_name_is_defined_twice() -> None:
    twice = {name: places for name, places in fixtures_in(TESTS).items() if len(places) > 1}
    assert twice == {}


def test_the_check_finds_a_fixture_defined_twice(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text("import pytest\n\n@pytest.fixture\ndef store():\n    return 1\n")
    (tmp_path / "test_a.py").write_text(
        "import pytest\nfrom pytest import fixture\n\n@fixture(scope='module')\ndef store():\n    return 2\n\n"
        "@pytest.fixture(name='store')\ndef other_store():\n    return 3\n\ndef test_it(store):\n    pass\n"
    )
    assert fixtures_in(tmp_path) == {"store": ["conftest.py:4", "test_a.py:5", "test_a.py:9"]}
