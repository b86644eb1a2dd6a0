"""Agent processes left behind by a daemon that was killed with ``kill -9`` (which gives it no chance to kill its
children): every process the daemon starts inherits a per-run token in its environment, and the next daemon kills
the processes that still carry the previous token before it redoes their messages."""

from __future__ import annotations

import contextlib
import logging
import os
import secrets

import psutil

from apple_flow.connectors.environment import RUN_MARKER

log = logging.getLogger(__name__)

TOKEN_VARIABLE = RUN_MARKER  # the one variable of the daemon every agent is given
GRACE_SECONDS = 3.0


def mark_children() -> str:
    """Sets a fresh token in this process's environment (children inherit it) and returns it."""
    token = secrets.token_hex(8)
    os.environ[TOKEN_VARIABLE] = token
    return token


def kill_orphans(token: str) -> int:
    """Kills every other process whose environment carries ``token``; returns how many there were."""
    found: list[psutil.Process] = []
    me = os.getpid()
    for process in psutil.process_iter():
        if process.pid == me:
            continue
        try:
            if process.environ().get(TOKEN_VARIABLE) == token:
                found.append(process)
        except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess, OSError):
            continue
    for process in found:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.terminate()
    _, alive = psutil.wait_procs(found, timeout=GRACE_SECONDS)
    for process in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.kill()
    if found:
        log.warning("killed %d process(es) left running by the previous daemon", len(found))
    return len(found)
