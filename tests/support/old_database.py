"""A daemon database as an older apple-flow left it: the first ``version`` migrations applied, some rows put in,
``user_version`` set, closed; opening it with ``Store`` then runs the newer migrations, which is what the migration
tests check."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from apple_flow.daemon.store.migrations import MIGRATIONS, statements


def old_database(path: Path, version: int, *inserts: str) -> Path:
    db = sqlite3.connect(path)
    try:
        for migration in MIGRATIONS[:version]:
            for statement in statements(migration):
                db.execute(statement)
        for insert in inserts:
            db.execute(insert)
        db.execute(f"PRAGMA user_version = {version}")
        db.commit()
    finally:
        db.close()
    return path
