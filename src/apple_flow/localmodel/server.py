"""The local OpenAI-compatible model server for machines without Apple Intelligence: starts it in the background
(its own session, a pid file and a log in ``state_dir``), says whether it runs, stops it and whatever it started.

What it serves is one model of the catalog (catalog.py), by default Qwen2.5-Coder-0.5B; the served process is
serve.py (llama.cpp's server with this project's tool-call handler).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import psutil

from apple_flow.localmodel.assembly import AssemblyError, installed_file
from apple_flow.localmodel.catalog import DEFAULT_MODEL, LocalModel, model_named

DEFAULT_STATE_DIR = Path("~/.apple-flow/local-model").expanduser()
DEFAULT_MODELS_DIR = Path("~/.apple-flow/models").expanduser()
DEFAULT_CONTEXT_TOKENS = 8192
SERVED_MODULE = "apple_flow.localmodel.serve"


class LocalModelError(RuntimeError):
    """The local model cannot be started; the message says what to do."""


@dataclass(frozen=True)
class Served:
    """What a running server says it serves (its ``GET /v1/models``)."""

    name: str
    file: str
    context_tokens: int | None


@dataclass(frozen=True)
class ServerStatus:
    running: bool
    pid: int | None
    url: str
    log: Path


def model_file(model: LocalModel | str = DEFAULT_MODEL, models_dir: Path = DEFAULT_MODELS_DIR) -> Path:
    """The model's GGUF file, installed and verified; LocalModelError saying how to install it otherwise."""
    chosen = model_named(model) if isinstance(model, str) else model
    try:
        return installed_file(chosen, models_dir)
    except AssemblyError as exc:
        raise LocalModelError(str(exc)) from exc


def server_available() -> bool:
    return importlib.util.find_spec("llama_cpp") is not None


def base_url(host: str, port: int) -> str:
    return f"http://{host}:{port}/v1"


def server_command(file: Path, name: str, host: str, port: int,
                   context_tokens: int = DEFAULT_CONTEXT_TOKENS) -> list[str]:
    return [sys.executable, "-m", SERVED_MODULE, "--model", str(file), "--name", name, "--host", host,
            "--port", str(port), "--context-tokens", str(context_tokens)]


class LocalModelServer:
    def __init__(self, host: str = "127.0.0.1", port: int = 8765, state_dir: Path = DEFAULT_STATE_DIR,
                 context_tokens: int = DEFAULT_CONTEXT_TOKENS, model: LocalModel | str = DEFAULT_MODEL,
                 models_dir: Path = DEFAULT_MODELS_DIR) -> None:
        self.host = host
        self.port = port
        # The model's context window (llama.cpp's n_ctx): apple-code's --context-tokens must not exceed it.
        self.context_tokens = context_tokens
        self.model = model_named(model) if isinstance(model, str) else model
        self.models_dir = models_dir
        self.state_dir = state_dir
        self.pid_file = state_dir / f"server-{port}.pid"
        self.log_file = state_dir / f"server-{port}.log"

    @property
    def url(self) -> str:
        return base_url(self.host, self.port)

    def _pid(self) -> int | None:
        """The pid in the pid file if that process is alive and is our server; a stale file is removed."""
        try:
            pid = int(self.pid_file.read_text().strip())
        except (OSError, ValueError):
            return None
        try:
            process = psutil.Process(pid)
            alive = process.is_running() and process.status() != psutil.STATUS_ZOMBIE
            ours = alive and SERVED_MODULE in process.cmdline()
        except psutil.Error:
            ours = False
        if not ours:
            self.pid_file.unlink(missing_ok=True)
            return None
        return pid

    def status(self) -> ServerStatus:
        pid = self._pid()
        return ServerStatus(running=pid is not None, pid=pid, url=self.url, log=self.log_file)

    def answers(self, timeout: float = 2.0) -> bool:
        return self.served(timeout) is not None

    def served(self, timeout: float = 2.0) -> Served | None:
        """The model the server on this port answers with, or None when nothing answers as a model server."""
        try:
            with urllib.request.urlopen(f"{self.url}/models", timeout=timeout) as response:
                data = json.load(response).get("data") if response.status == 200 else None
        except (OSError, ValueError, AttributeError, urllib.error.URLError):
            return None
        if not isinstance(data, list):
            return None
        first = data[0] if data and isinstance(data[0], dict) else {}
        window = first.get("context_window")
        return Served(name=str(first.get("id", "")), file=str(first.get("file", "")),
                      context_tokens=window if isinstance(window, int) else None)

    def start(self, wait_seconds: float = 120.0) -> ServerStatus:
        """Starts the server in the background (if not running) and waits until it answers."""
        if not server_available():
            raise LocalModelError(
                "llama-cpp-python is not installed in this environment. Run: scripts/local-model.sh install"
            )
        file = model_file(self.model, self.models_dir)
        self.state_dir.mkdir(parents=True, exist_ok=True)
        pid = self._pid()
        started: subprocess.Popen[bytes] | None = None
        if pid is None:
            if self.answers(timeout=0.5):
                raise LocalModelError(
                    f"Port {self.port} already answers but not from a server this tool started; "
                    f"stop it or choose another port (APPLE_FLOW_LOCAL_MODEL_PORT)."
                )
            with open(self.log_file, "ab") as log:
                started = subprocess.Popen(
                    server_command(file, self.model.name, self.host, self.port, self.context_tokens),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
        try:
            if started is not None:
                self.pid_file.write_text(f"{started.pid}\n")
            return self._wait_until_answering(started, wait_seconds)
        except BaseException:
            # Nothing this call started outlives its failure: a crash, a timeout, an interrupt.
            if started is not None:
                self._end_group(started)
            raise

    def _wait_until_answering(self, started: subprocess.Popen[bytes] | None, wait_seconds: float) -> ServerStatus:
        deadline = time.monotonic() + wait_seconds
        while time.monotonic() < deadline:
            if self.answers(timeout=1.0):
                return self.status()
            # The child started here is followed by its handle: until it has exec'd, its command line is this
            # process's, which _pid() would take for a stranger.
            if (started.poll() is not None) if started is not None else self._pid() is None:
                raise LocalModelError(f"The model server exited while starting. Last log lines:\n{self.log_tail()}")
            time.sleep(0.25)
        if started is None:
            self.stop()
        raise LocalModelError(
            f"The model server did not answer within {wait_seconds:.0f}s; see {self.log_file}:\n{self.log_tail()}"
        )

    def _end_group(self, process: subprocess.Popen[bytes], grace_seconds: float = 5.0) -> None:
        """Ends the process started by start() and everything in its process group (its own: a new session),
        also when it has exited already and left children behind."""
        for sig in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, sig)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=grace_seconds)
            if not _group_alive(process.pid, grace_seconds if sig == signal.SIGTERM else 1.0):
                break
        self.pid_file.unlink(missing_ok=True)

    def stop(self, grace_seconds: float = 5.0) -> bool:
        """Stops the server and everything in its process group. Returns whether one was running."""
        pid = self._pid()
        if pid is None:
            return False
        try:
            process = psutil.Process(pid)
            family = [process, *process.children(recursive=True)]
        except psutil.Error:
            family = []
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGTERM)
        _, alive = psutil.wait_procs(family, timeout=grace_seconds)
        if alive:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
            psutil.wait_procs(alive, timeout=grace_seconds)
        self.pid_file.unlink(missing_ok=True)
        return True

    def log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


def started_servers(state_dir: Path, host: str = "127.0.0.1") -> list[LocalModelServer]:
    """The servers ``start`` left running with ``state_dir``, whatever their port (each pid file's name holds it),
    lowest port first."""
    servers = []
    for pid_file in state_dir.glob("server-*.pid"):
        port = pid_file.stem.removeprefix("server-")
        if port.isdigit():
            server = LocalModelServer(host, int(port), state_dir)
            if server.status().running:
                servers.append(server)
    return sorted(servers, key=lambda server: server.port)


def _group_alive(pgid: int, wait_seconds: float) -> bool:
    """Whether a process other than a zombie is still in the process group after waiting up to `wait_seconds`."""
    deadline = time.monotonic() + wait_seconds
    while True:
        members = []
        for process in psutil.process_iter():
            # A process that exits meanwhile: psutil's error, or getpgid's ProcessLookupError.
            with contextlib.suppress(psutil.Error, ProcessLookupError):
                if os.getpgid(process.pid) == pgid and process.status() != psutil.STATUS_ZOMBIE:
                    members.append(process)
        if not members or time.monotonic() >= deadline:
            return bool(members)
        time.sleep(0.1)
