"""Processes left by a daemon killed with -9 are found by the token in their environment and killed."""

from __future__ import annotations

import os
import subprocess

from apple_flow.daemon.running.orphans import TOKEN_VARIABLE, kill_orphans


def test_only_processes_with_the_token_are_killed() -> None:
    def sleeper(token: str) -> subprocess.Popen[bytes]:
        return subprocess.Popen(["sleep", "60"], env={**os.environ, TOKEN_VARIABLE: token})

    orphan, bystander = sleeper("old-run"), sleeper("someone-else")
    try:
        assert kill_orphans("old-run") == 1
        assert orphan.wait(5) is not None
        assert bystander.poll() is None
        assert kill_orphans("old-run") == 0
    finally:
        for process in (orphan, bystander):
            process.kill()
            process.wait()
