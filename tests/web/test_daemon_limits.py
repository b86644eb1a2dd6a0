"""The page runs inside the daemon: what its clients hold must never starve the agent. A real `apple-flow run`
started as launchd starts a service (256 open files), with 300 connections to its page left open, still runs the
agent (the real apple-code on the scripted model) and answers; a daemon allowed more raises its own limit."""

from __future__ import annotations

import re
import socket
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from support.chatdb import ChatDbWriter
from support.daemon_process import DaemonProcess, scripted_agent, wait_for
from support.scripted_server import ScriptedServer, answer

ANA = "+15551234567"
TOKEN = "limits-test-token-0123456789-0123456789"
WEB_LINE = re.compile(r"Web page: http://apple-flow\.localhost:(\d+)")


@pytest.fixture
def daemon(tmp_path: Path, chat_db: ChatDbWriter, workspace: Path, apple_code_bin: Path) -> Iterator[DaemonProcess]:
    process = DaemonProcess(
        tmp_path / "daemon", chat_db.path,
        {**scripted_agent(apple_code_bin, workspace), "APPLE_FLOW_ALLOWED_SENDERS": ANA,
         "APPLE_FLOW_WEB_ENABLED": "true", "APPLE_FLOW_WEB_PORT": "0", "APPLE_FLOW_WEB_TOKEN": TOKEN},
    )
    yield process
    process.stop()


def test_idle_connections_to_the_page_do_not_keep_the_agent_from_starting(
    daemon: DaemonProcess, chat_db: ChatDbWriter
) -> None:
    with ScriptedServer([answer("Still here.")]) as server:
        daemon.start({"APPLE_FLOW_AFM_BASE_URL": server.url}, open_files=(256, 256))
        assert daemon.process is not None
        assert psutil.Process(daemon.process.pid).rlimit(psutil.RLIMIT_NOFILE) == (256, 256)  # no higher allowed
        port = int(wait_for(lambda: WEB_LINE.search(daemon.log()), 20, "the page's address").group(1))
        idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(300)]
        try:
            chat_db.message("are you there?", sender=ANA)
            wait_for(lambda: [t for t in daemon.sends_to(ANA) if t.startswith("Still here.")], 60, "the reply")
        finally:
            for sock in idle:
                sock.close()
    assert "Too many open files" not in daemon.log() and "Traceback" not in daemon.log()


def test_the_daemon_raises_its_open_file_limit_at_start(daemon: DaemonProcess) -> None:
    daemon.start(open_files=(256, 2048))
    assert daemon.process is not None
    assert psutil.Process(daemon.process.pid).rlimit(psutil.RLIMIT_NOFILE) == (2048, 2048)
