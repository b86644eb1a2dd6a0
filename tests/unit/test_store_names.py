"""Each public method of the store's tables has a name no other table uses, so that a call such as
``store.messages.take_message(...)`` or ``records.get_approval(...)`` leads to one definition in ``daemon/store/``,
whatever the receiver is called. A table is a class named ``...Table`` in that package."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

STORE = Path(__file__).resolve().parents[2] / "src" / "apple_flow" / "daemon" / "store"


def shared_method_names(folder: Path = STORE) -> dict[str, list[str]]:
    """Public method names defined in more than one table class: name -> the classes (module.Class)."""
    defined: dict[str, list[str]] = defaultdict(list)
    for path in sorted(folder.glob("*.py")):
        for node in ast.parse(path.read_text(), str(path)).body:
            if not (isinstance(node, ast.ClassDef) and node.name.endswith("Table")):
                continue
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and not item.name.startswith("_"):
                    defined[item.name].append(f"{path.stem}.{node.name}")
    return {name: owners for name, owners in sorted(defined.items()) if len(owners) > 1}


def test_no_two_store_tables_share_a_method_name() -> None:
    assert shared_method_names() == {}


def test_the_check_sees_a_shared_name(tmp_path: Path) -> None:
    # The rule above holds for the real store; here two planted tables both define ``get`` (and a private helper
    # and a non-table class with the same name, which do not count).
    (tmp_path / "alpha.py").write_text(
        "class AlphaTable:\n    def get(self, key: str) -> str: ...\n    def _put(self) -> None: ...\n"
        "    def alpha_only(self) -> None: ...\n"
    )
    (tmp_path / "beta.py").write_text(
        "class BetaTable:\n    def get(self, key: str) -> str: ...\n    def _put(self) -> None: ...\n"
        "class BetaView:\n    def alpha_only(self) -> None: ...\n"
    )
    assert shared_method_names(tmp_path) == {"get": ["alpha.AlphaTable", "beta.BetaTable"]}
