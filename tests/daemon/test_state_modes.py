"""The daemon's database holds every request, reply, diff and command output: its folder is 0700 and its files
0600 whatever the umask, and those an older apple-flow left readable by everyone are tightened at start."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

from apple_flow.paths import PROJECT_ROOT


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def open_store(db: Path, umask: int, home: Path) -> dict[str, int]:
    """A daemon's start in a process of its own (the umask is the whole process's): the lock, then the store, one
    write so that SQLite makes its -wal and -shm files. Returns the modes of the folder's entries while it is open
    (a clean close removes the -wal file)."""
    code = (
        "import json, os, stat, sys; from pathlib import Path\n"
        f"os.umask({umask})\n"
        "from apple_flow.daemon.running.lock import InstanceLock\n"
        "from apple_flow.daemon.store import Store\n"
        "db = Path(sys.argv[1]); lock = InstanceLock(db); lock.acquire()\n"
        "store = Store(db); store.meta.set_meta('k', 'v')\n"
        "print(json.dumps({p.name: stat.S_IMODE(p.stat().st_mode) for p in db.parent.iterdir()}))\n"
        "store.close(); lock.release()\n"
    )
    env = {**os.environ, "HOME": str(home), "PYTHONPATH": str(PROJECT_ROOT / "src")}
    done = subprocess.run([sys.executable, "-c", code, str(db)], env=env, check=True, timeout=60,
                          capture_output=True, text=True)
    return dict(json.loads(done.stdout))


FILES = ("relay.db", "relay.db-wal", "relay.db-shm", "relay.db.lock")


def test_a_new_state_folder_and_its_files_are_private_whatever_the_umask(tmp_path: Path) -> None:
    for umask in (0o000, 0o022):
        db = tmp_path / f"umask-{umask:o}" / "state" / "relay.db"
        modes = open_store(db, umask, tmp_path)
        assert mode(db.parent) == 0o700 and mode(db.parent.parent) == 0o700, umask
        assert {name: modes[name] for name in FILES} == dict.fromkeys(FILES, 0o600), umask


def test_the_state_folder_an_older_version_left_open_is_tightened(tmp_path: Path) -> None:
    home = tmp_path / "home"
    state = home / ".apple-flow"
    state.mkdir(parents=True)
    db = state / "relay.db"
    open_store(db, 0o022, home)
    state.chmod(0o755)
    for name in ("relay.db", "relay.db.lock"):
        (state / name).chmod(0o644)
    (state / "relay.db-shm").write_bytes(b"")  # as a killed daemon may leave it
    (state / "relay.db-shm").chmod(0o644)
    modes = open_store(db, 0o022, home)
    assert mode(state) == 0o700
    assert {name: modes[name] for name in FILES} == dict.fromkeys(FILES, 0o600)


def test_a_folder_the_user_chose_keeps_its_mode_and_the_files_in_it_are_private(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o755)
    (shared / "relay.db").touch()
    (shared / "relay.db").chmod(0o644)
    modes = open_store(shared / "relay.db", 0o022, tmp_path / "home")
    assert mode(shared) == 0o755
    assert {name: modes[name] for name in FILES} == dict.fromkeys(FILES, 0o600)
