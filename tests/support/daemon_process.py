"""A real `apple-flow run --channel imessage` process on a chat.db built from the real schema, with a fake
`osascript` on PATH (tests/support/fake_osascript.py) that records every send (argv and script) and leaves its row
in chat.db, as Messages does, instead of driving Messages."""

from __future__ import annotations

import json
import os
import resource
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

from apple_flow.paths import PROJECT_ROOT
from support import fake_osascript
from support.waiting import wait_for

READY = "apple-flow daemon ready"
__all__ = ["DaemonProcess", "MakeDaemon", "scripted_agent", "wait_for"]  # wait_for: for the tests that import it here


class DaemonProcess:
    """One folder with the daemon's database, logs and fake osascript; ``start`` may be called again after
    ``kill`` (a restart on the same state)."""

    def __init__(self, root: Path, chat_db: Path, env: dict[str, str]) -> None:
        self.root = root
        self.bin = root / "bin"
        fake_osascript.install(self.bin)
        self.sends_log = root / "osascript.jsonl"
        self.db_path = root / "state" / "relay.db"
        self.env = {
            **os.environ,
            "PATH": f"{self.bin}{os.pathsep}{os.environ.get('PATH', '')}",
            # This checkout's code, whatever the venv has installed.
            "PYTHONPATH": str(PROJECT_ROOT / "src"),
            "FAKE_OSASCRIPT_LOG": str(self.sends_log),
            "FAKE_OSASCRIPT_CHATDB": str(chat_db),
            "APPLE_FLOW_MESSAGES_DB_PATH": str(chat_db),
            "APPLE_FLOW_DB_PATH": str(self.db_path),
            "APPLE_FLOW_POLL_INTERVAL_SECONDS": "0.1",
            "APPLE_FLOW_SEND_RETRIES": "0",
            "APPLE_FLOW_PROGRESS_INTERVAL_SECONDS": "0",
            **env,
        }
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    @property
    def log_path(self) -> Path:
        return self.root / f"daemon-{self.starts}.log"

    def start(
        self, extra_env: dict[str, str] | None = None, timeout: float = 30, ready: str = READY,
        open_files: tuple[int, int] | None = None,
    ) -> DaemonProcess:
        """Starts the daemon and waits until its log shows ``ready``. ``open_files``: its (soft, hard) limit on
        open files as it starts (launchd gives services 256)."""
        self.starts += 1
        log = self.log_path.open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "apple_flow", "run", "--channel", "imessage"],
            env={**self.env, **(extra_env or {})}, cwd=self.root, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
            preexec_fn=None if open_files is None else lambda: resource.setrlimit(resource.RLIMIT_NOFILE, open_files),
        )
        log.close()
        wait_for(lambda: ready in self.log() or self.process is None or self.process.poll() is not None,
                 timeout, "the daemon to start")
        if self.process.poll() is not None:
            raise AssertionError(f"the daemon exited with {self.process.returncode}:\n{self.log()}")
        return self

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def kill9(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def terminate(self, timeout: float = 30) -> int:
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def calls(self) -> list[dict[str, Any]]:
        """Every osascript call that sends (not the Automation probe at start): argv and script (stdin), in order."""
        if not self.sends_log.exists():
            return []
        text = self.sends_log.read_text()
        # The fake osascript may be writing its line right now: only whole lines (ending in a newline) are read.
        entries = [json.loads(line) for line in text[:text.rfind("\n") + 1].splitlines() if line.strip()]
        return [e for e in entries if len(e["argv"]) >= 3]

    def sends(self) -> list[tuple[str, str]]:
        """(recipient, text) of every text sent, in order."""
        return [(e["argv"][1], e["argv"][2]) for e in self.calls() if "send theFile" not in e["stdin"]]

    def file_sends(self) -> list[dict[str, Any]]:
        """The calls that send a file (argv and script), in order."""
        return [e for e in self.calls() if "send theFile" in e["stdin"]]

    def sends_to(self, recipient: str) -> list[str]:
        return [text for who, text in self.sends() if who == recipient]

    def cursor(self) -> int:
        """The chat.db row the daemon's cursor has passed (0 before it saved one)."""
        if not self.db_path.exists():
            return 0
        with closing(sqlite3.connect(self.db_path)) as db:
            row = db.execute("SELECT last_rowid FROM cursor WHERE channel = 'imessage'").fetchone()
        return int(row[0]) if row else 0

    def wait_passed(self, rowid: int, timeout: float = 20) -> None:
        """Until the cursor has passed ``rowid``: the daemon has read it and everything before it, and finished
        with them (replied, sent, or skipped). What a test checks did not happen then has not."""
        wait_for(lambda: self.cursor() >= rowid, timeout, f"the cursor to pass row {rowid}")

    def message_states(self) -> dict[int, str]:
        """The state the daemon recorded for each message it handled, by chat.db row."""
        with closing(sqlite3.connect(self.db_path)) as db:
            return dict(db.execute("SELECT rowid, state FROM messages WHERE channel = 'imessage'").fetchall())


# What the ``new_daemon`` fixture gives: the test's daemon process (not yet started) with these settings.
MakeDaemon = Callable[[dict[str, str]], DaemonProcess]


def scripted_agent(apple_code_bin: Path, workspace: Path) -> dict[str, str]:
    """The settings of a daemon whose agent is the real apple-code on the scripted model (its URL comes with each
    start: ``APPLE_FLOW_AFM_BASE_URL``), working in ``workspace``. Approved tasks run one agent loop: plan-and-
    execute has its own tests in apple-code."""
    return {
        "APPLE_FLOW_DEFAULT_WORKSPACE": str(workspace),
        "APPLE_FLOW_ALLOWED_WORKSPACES": str(workspace),
        "APPLE_FLOW_AFM_COMMAND": str(apple_code_bin),
        "APPLE_FLOW_AFM_BACKEND": "openai",
        "APPLE_FLOW_AFM_MODEL": "scripted",
        "APPLE_FLOW_AFM_PLAN_TASKS": "false",
        "APPLE_FLOW_AFM_TIMEOUT_SECONDS": "30",
        "APPLE_FLOW_SHUTDOWN_GRACE_SECONDS": "1",
    }
