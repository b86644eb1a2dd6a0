"""The local model server's life (on the fast model, SmolLM2-135M): starts, answers a tool-calling chat
completion, stops leaving nothing behind."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest
from typer.testing import CliRunner

from apple_flow.cli import app
from apple_flow.localmodel import LocalModelError, LocalModelServer
from support.local_model import FAST_MODEL, free_port, require_local_model, running_local_model

pytestmark = pytest.mark.local_model

LIST_FILES_TOOL = {
    "type": "function",
    "function": {
        "name": "listDirectory",
        "description": "List the files in a folder.",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string", "description": "Folder to list."}},
            "required": ["path"],
        },
    },
}


def chat(url: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        f"{url}/chat/completions", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=120) as response:
        result: dict[str, Any] = json.load(response)
        return result


def test_answers_a_tool_call_for_a_plain_request(fast_model_server: LocalModelServer) -> None:
    reply = chat(
        fast_model_server.url,
        {
            "model": FAST_MODEL,
            "messages": [
                {"role": "system", "content": "You are a helpful assistant with tools."},
                {"role": "user", "content": "List the files in the folder 'src'."},
            ],
            "tools": [LIST_FILES_TOOL],
            "tool_choice": "auto",
            "temperature": 0,
        },
    )
    message = reply["choices"][0]["message"]
    calls = message.get("tool_calls")
    assert calls, f"no tool call in {message}"
    call = calls[0]
    assert call["type"] == "function"
    assert call["function"]["name"] == "listDirectory"
    arguments = json.loads(call["function"]["arguments"])
    assert isinstance(arguments, dict)
    assert isinstance(call["id"], str) and call["id"]


def test_start_is_idempotent_and_status_reports_it(fast_model_server: LocalModelServer) -> None:
    first = fast_model_server.status()
    again = fast_model_server.start(wait_seconds=30)
    assert first.running and again.pid == first.pid
    assert fast_model_server.answers()


def test_stop_leaves_no_process_behind(tmp_path: Path) -> None:
    require_local_model()
    server = LocalModelServer(port=free_port(), state_dir=tmp_path, model=FAST_MODEL)
    status = server.start(wait_seconds=120)
    assert status.pid is not None
    family = [psutil.Process(status.pid), *psutil.Process(status.pid).children(recursive=True)]
    assert server.stop() is True
    for process in family:
        assert not process.is_running() or process.status() == psutil.STATUS_ZOMBIE
    assert not server.pid_file.exists()
    assert not server.answers(timeout=0.5)
    assert server.stop() is False


def test_the_commands_without_a_port_find_the_server_started_on_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`apple-flow model start --port P`, then `model status` and `model stop` without --port: they act on that
    server (they used to look at the configured port only, and left it running)."""
    require_local_model()
    monkeypatch.chdir(tmp_path)  # no .env: the configured port is the default, not P
    port = free_port()
    state = ["--state-dir", str(tmp_path / "state")]
    server = LocalModelServer(port=port, state_dir=tmp_path / "state")
    try:
        started = CliRunner().invoke(app, ["model", "start", "--port", str(port), "--model", FAST_MODEL, *state])
        assert started.exit_code == 0, started.output
        pid = server.status().pid
        assert pid is not None and port != LocalModelServer().port
        status = CliRunner().invoke(app, ["model", "status", *state])
        assert status.exit_code == 0 and f"running pid {pid} at {server.url}" in status.output, status.output
        stopped = CliRunner().invoke(app, ["model", "stop", *state])
        assert stopped.exit_code == 0 and f"on port {port}" in stopped.output, stopped.output
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
        assert not server.answers(timeout=0.5)
        again = CliRunner().invoke(app, ["model", "stop", *state])
        assert "was not running" in again.output, again.output
    finally:
        server.stop()


def test_start_tasks_serves_the_task_model_on_its_port_and_status_shows_both(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_local_model()
    monkeypatch.chdir(tmp_path)
    chat_port, task_port = free_port(), free_port()
    state = ["--state-dir", str(tmp_path / "state")]
    monkeypatch.setenv("APPLE_FLOW_LOCAL_MODEL", "qwen2.5-coder-0.5b")
    monkeypatch.setenv("APPLE_FLOW_LOCAL_TASK_MODEL", FAST_MODEL)
    monkeypatch.setenv("APPLE_FLOW_LOCAL_TASK_MODEL_PORT", str(task_port))
    servers = [LocalModelServer(port=port, state_dir=tmp_path / "state") for port in (chat_port, task_port)]
    try:
        chat = CliRunner().invoke(app, ["model", "start", "--port", str(chat_port), "--model", FAST_MODEL, *state])
        tasks = CliRunner().invoke(app, ["model", "start", "--tasks", *state])
        assert chat.exit_code == 0 and tasks.exit_code == 0, chat.output + tasks.output
        assert tasks.stdout.strip() == servers[1].url  # what run.sh gives the daemon for approved tasks
        assert servers[1].served() is not None and servers[1].served().name == FAST_MODEL
        status = CliRunner().invoke(app, ["model", "status", *state])
        assert status.exit_code == 0, status.output
        assert all(f"at {server.url}: {FAST_MODEL}" in status.output for server in servers), status.output
    finally:
        for server in servers:
            server.stop()


def test_start_tasks_serves_nothing_when_tasks_use_the_chat_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for same in ("", "qwen2.5-coder-0.5b"):
        monkeypatch.setenv("APPLE_FLOW_LOCAL_MODEL", "qwen2.5-coder-0.5b")
        monkeypatch.setenv("APPLE_FLOW_LOCAL_TASK_MODEL", same)
        done = CliRunner().invoke(app, ["model", "start", "--tasks", "--state-dir", str(tmp_path / "state")])
        assert done.exit_code == 0 and done.stdout == "", done.output
        assert "use the chat model" in done.stderr
        assert not list((tmp_path / "state").glob("server-*.pid"))


def test_start_tasks_serves_nothing_when_the_task_model_would_not_fit_in_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second model that does not fit would make both swap: tasks go to the chat model, and it says what to do."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("APPLE_FLOW_LOCAL_TASK_MODEL", "qwen2.5-coder-1.5b")
    free = type("Memory", (), {"available": 1_500_000_000})()
    monkeypatch.setattr(psutil, "virtual_memory", lambda: free)
    done = CliRunner().invoke(app, ["model", "start", "--tasks", "--state-dir", str(tmp_path / "state")])
    assert done.exit_code == 0 and done.stdout == "", done.output  # no URL: run.sh gives the daemon none
    said = " ".join(done.stderr.split())  # rich wraps it at the terminal's width
    assert "Not enough free memory for qwen2.5-coder-1.5b: 1.5 GB free, about 2.2 GB needed." in said
    assert "Tasks use the chat model. Free memory, or set APPLE_FLOW_LOCAL_TASK_MODEL= (empty) in .env" in said
    assert not list((tmp_path / "state").glob("server-*.pid"))


def test_list_marks_the_chat_model_and_the_task_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("APPLE_FLOW_LOCAL_MODEL", "qwen2.5-coder-0.5b")
    monkeypatch.setenv("APPLE_FLOW_LOCAL_TASK_MODEL", "qwen2.5-coder-1.5b")
    listed = CliRunner().invoke(app, ["model", "list"])
    assert listed.exit_code == 0, listed.output
    marks = {line[2:].split()[0]: line[0] for line in listed.stdout.splitlines()}
    assert marks == {"qwen2.5-coder-0.5b": "*", "qwen2.5-coder-1.5b": "+", FAST_MODEL: " "}


def test_missing_model_package_says_how_to_install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)  # what localmodel asks
    with pytest.raises(LocalModelError, match=r"scripts/local-model\.sh install"):
        LocalModelServer(port=free_port(), state_dir=tmp_path).start()


def test_a_server_that_dies_while_starting_reports_its_log(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    require_local_model()
    import apple_flow.localmodel.server as localmodel

    # A real child that exits at once with an error, standing in for a broken model file.
    monkeypatch.setattr(
        localmodel, "server_command",
        lambda file, name, host, port, context_tokens=4096: [
            "python3", "-c", "import sys; print('apple_flow.localmodel.serve boom'); sys.exit(3)"],
    )
    server = LocalModelServer(port=free_port(), state_dir=tmp_path, model=FAST_MODEL)
    with pytest.raises(LocalModelError, match="exited while starting"):
        server.start(wait_seconds=20)


def test_a_server_not_yet_recognisable_is_waited_for(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Between fork and exec the child's command line is still its parent's (no "llama_cpp.server"): on a busy
    machine start() took that for a server that had died and gave up at once. The child it started is followed
    by its own handle instead."""
    require_local_model()
    import apple_flow.localmodel.server as localmodel

    monkeypatch.setattr(localmodel, "server_command",
                        lambda *served, **options: ["python3", "-c", "import time; time.sleep(3)"])
    server = LocalModelServer(port=free_port(), state_dir=tmp_path, model=FAST_MODEL)
    started = time.monotonic()
    with pytest.raises(LocalModelError, match="exited while starting"):
        server.start(wait_seconds=20)
    assert time.monotonic() - started >= 2.5


# --- a failed start leaves nothing running ----------------------------------------------------------------------


@dataclass
class FakeServer:
    """What start() launches instead of llama.cpp: it starts a child in its own process group, then exits with an
    error after `lifetime` seconds, never answering. Both carry `marker` in their command line."""

    marker: str
    lifetime: float = 0.0


def processes_with(marker: str) -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter(["cmdline"]):
        with contextlib.suppress(psutil.Error):
            if marker in (process.info["cmdline"] or []) and process.status() != psutil.STATUS_ZOMBIE:
                found.append(process)
    return found


def nothing_left(marker: str) -> bool:
    # A killed process can take a moment to go; generous for a loaded machine.
    deadline = time.monotonic() + 30
    while processes_with(marker):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


@pytest.fixture
def fake_server(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FakeServer]:
    """start() launches a FakeServer (no llama.cpp or model needed); whatever carries its marker is killed after."""
    import apple_flow.localmodel.server as localmodel

    fake = FakeServer(marker=f"leftover-{uuid.uuid4().hex}")
    code = (
        "import subprocess, sys, time\n"
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)', sys.argv[1]])\n"
        "time.sleep(float(sys.argv[2]))\n"
        "sys.exit(3)\n"
    )
    monkeypatch.setattr(localmodel, "server_available", lambda: True)
    monkeypatch.setattr(localmodel, "model_file", lambda *model: tmp_path / "model.gguf")
    monkeypatch.setattr(
        localmodel,
        "server_command",
        lambda *served, **options: [sys.executable, "-c", code, fake.marker, str(fake.lifetime)],
    )
    try:
        yield fake
    finally:
        for process in processes_with(fake.marker):
            with contextlib.suppress(psutil.Error):
                process.kill()


def test_a_server_that_exits_while_starting_leaves_nothing_behind(fake_server: FakeServer, tmp_path: Path) -> None:
    server = LocalModelServer(port=free_port(), state_dir=tmp_path)
    with pytest.raises(LocalModelError, match="exited while starting"):
        server.start(wait_seconds=60)
    assert nothing_left(fake_server.marker), "a process the failed start launched is still running"
    assert not server.pid_file.exists()


def test_a_server_that_never_answers_leaves_nothing_behind(fake_server: FakeServer, tmp_path: Path) -> None:
    fake_server.lifetime = 300
    server = LocalModelServer(port=free_port(), state_dir=tmp_path)
    with pytest.raises(LocalModelError, match="did not answer within"):
        server.start(wait_seconds=3)
    assert nothing_left(fake_server.marker), "a process the timed-out start launched is still running"
    assert not server.pid_file.exists()


def test_an_interrupted_start_leaves_nothing_behind(
    fake_server: FakeServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake_server.lifetime = 300

    def interrupted(self: LocalModelServer, timeout: float = 2.0) -> bool:
        if self.pid_file.exists():
            raise KeyboardInterrupt
        return False

    monkeypatch.setattr(LocalModelServer, "answers", interrupted)
    server = LocalModelServer(port=free_port(), state_dir=tmp_path)
    with pytest.raises(KeyboardInterrupt):
        server.start(wait_seconds=60)
    assert nothing_left(fake_server.marker), "a process the interrupted start launched is still running"
    assert not server.pid_file.exists()


def test_the_test_helper_leaves_nothing_behind_when_start_fails(fake_server: FakeServer, tmp_path: Path) -> None:
    require_local_model()
    fake_server.lifetime = 300
    with pytest.raises(LocalModelError), running_local_model(tmp_path, wait_seconds=3):
        pytest.fail("the helper yielded a server that never answered")
    assert nothing_left(fake_server.marker), "running_local_model left a process of its failed start running"
