"""The daemon's database: one SQLite file (WAL), its schema brought up to date on opening (``migrations``), one
connection shared by the daemon's threads behind a re-entrant lock. ``transaction()`` groups writes, so that, for
example, a reply, the files it sends and the approval it announces are recorded together or not at all; the
tables (one class per concern, over this object) write through it.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from apple_flow.daemon.store.migrations import MIGRATIONS, SCHEMA_VERSION, statements
from apple_flow.paths import is_state_folder
from apple_flow.privatefile import private_files, private_folder


class StoreError(RuntimeError):
    """The database cannot be used; the message says which file and what to do."""


class Database:
    def __init__(self, path: Path, clock: Callable[[], float] = time.time) -> None:
        self.path = path
        self._clock = clock
        self._lock = threading.RLock()
        self._depth = 0
        try:
            # Every request, reply and diff is in here: the folder 0700 and the files 0600, whatever the umask, and
            # those an older apple-flow left readable tightened.
            private_folder(path.parent, tighten=is_state_folder(path.parent))
            private_files(path, *(Path(f"{path}{suffix}") for suffix in ("-wal", "-shm", "-journal")))
            self._db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False, timeout=10)
            self._db.row_factory = sqlite3.Row
            self._db.execute("PRAGMA journal_mode=WAL")
            # NORMAL is durable against a killed process (the WAL is in the OS cache); only power loss could
            # drop the newest transactions.
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA foreign_keys=ON")
            # SQLite's lower() knows ASCII only; searches compare Python-casefolded text (accents, CJK, emoji).
            self._db.create_function("casefolded", 1, _casefolded, deterministic=True)
            self._migrate()
        except sqlite3.DatabaseError as exc:
            raise StoreError(
                f"Cannot use the daemon database {path}: {exc}. If it is not an apple-flow database, move it "
                "away or set APPLE_FLOW_DB_PATH to another file."
            ) from exc
        except OSError as exc:
            raise StoreError(f"Cannot create the daemon database {path}: {exc.strerror}. Check the folder.") from exc

    def _migrate(self) -> None:
        version = int(self._db.execute("PRAGMA user_version").fetchone()[0])
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"The daemon database {self.path} has schema version {version}, newer than this apple-flow "
                f"understands ({SCHEMA_VERSION}). Upgrade apple-flow or use another APPLE_FLOW_DB_PATH."
            )
        for index in range(version, SCHEMA_VERSION):
            with self.transaction():
                for statement in statements(MIGRATIONS[index]):
                    self._db.execute(statement)
                self._db.execute(f"PRAGMA user_version = {index + 1}")

    def now(self) -> float:
        """The database's clock (what rows are stamped with)."""
        return self._clock()

    @property
    def schema_version(self) -> int:
        with self._lock:
            return int(self._db.execute("PRAGMA user_version").fetchone()[0])

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """All writes inside happen together or not at all. Nests (inner blocks join the outer one)."""
        with self._lock:
            if self._depth:
                self._depth += 1
                try:
                    yield
                finally:
                    self._depth -= 1
                return
            self._db.execute("BEGIN IMMEDIATE")
            self._depth = 1
            try:
                yield
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            else:
                self._db.execute("COMMIT")
            finally:
                self._depth = 0

    def write(self, sql: str, args: tuple[Any, ...] = ()) -> sqlite3.Cursor:
        """One statement, in the caller's transaction or in one of its own."""
        with self.transaction():
            return self._db.execute(sql, args)

    def rows(self, sql: str, args: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
        with self._lock:
            return list(self._db.execute(sql, args).fetchall())

    def trace(self, callback: Callable[[str], object] | None) -> None:
        """Calls ``callback`` with each statement SQLite runs (``scripts/bench_path`` names transactions so)."""
        self._db.set_trace_callback(callback)

    def close(self) -> None:
        with self._lock:
            self._db.close()


def _casefolded(value: str | None) -> str | None:
    return value.casefold() if isinstance(value, str) else value
