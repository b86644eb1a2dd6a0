"""The page runs inside the daemon: what its clients hold must never starve the agent. A real `apple-flow run`
started as launchd starts a service (256 open files), with 300 connections to its page left open, still runs the
agent (the real apple-code on the scripted model) and answers; a daemon allowed more raises its own limit."""

from __future__ import annotations

import re
import socket
from pathlib import Path

import psutil
import pytest

from support.chatdb import ChatDbWriter
from support.daemon_process import DaemonProcess, MakeDaemon, scripted_agent, wait_for
from support.scripted_server import ScriptedServer, answer

ANA = "+15551234567"
TOKEN = "limits-test-token-0123456789-0123456789"
WEB_LINE = re.compile(r"Web page: http://apple-flow\.localhost:(\d+)")


@pytest.fixture
def page_daemon(new_daemon: MakeDaemon, workspace: Path, apple_code_bin: Path) -> DaemonProcess:
    """The scripted agent's daemon serving its page on a free port."""
    return new_daemon(
        {**scripted_agent(apple_code_bin, workspace), "APPLE_FLOW_ALLOWED_SENDERS": ANA,
         "APPLE_FLOW_WEB_ENABLED": "true", "APPLE_FLOW_WEB_PORT": "0", "APPLE_FLOW_WEB_TOKEN": TOKEN},
    )


@pytest.mark.slow
def test_idle_connections_to_the_page_do_not_keep_the_agent_from_starting(
    page_daemon: DaemonProcess, chat_db: ChatDbWriter
) -> None:
    with ScriptedServer([answer("Still here.")]) as server:
        page_daemon.start({"APPLE_FLOW_AFM_BASE_URL": server.url}, open_files=(256, 256))
        assert page_daemon.process is not None
        assert psutil.Process(page_daemon.process.pid).rlimit(psutil.RLIMIT_NOFILE) == (256, 256)  # no higher allowed
        port = int(wait_for(lambda: WEB_LINE.search(page_daemon.log()), 20, "the page's address").group(1))
        idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(300)]
        try:
            chat_db.message("are you there?", sender=ANA)
            wait_for(lambda: [t for t in page_daemon.sends_to(ANA) if t.startswith("Still here.")], 60, "the reply")
        finally:
            for sock in idle:
                sock.close()
    assert "Too many open files" not in page_daemon.log() and "Traceback" not in page_daemon.log()


def test_the_daemon_raises_its_open_file_limit_at_start(page_daemon: DaemonProcess) -> None:
    page_daemon.start(open_files=(256, 2048))
    assert page_daemon.process is not None
    assert psutil.Process(page_daemon.process.pid).rlimit(psutil.RLIMIT_NOFILE) == (2048, 2048)
