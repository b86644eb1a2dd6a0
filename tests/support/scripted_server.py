"""A scripted OpenAI-compatible server for integration tests: a real HTTP server in its own process on 127.0.0.1
speaking the real ``/v1/chat/completions`` wire format (non-streaming JSON), replaying a script of steps and
recording every request body.

    from support.scripted_server import ScriptedServer, tool_call, tool_calls, answer, http_error, hang, raw_body
    with ScriptedServer([tool_call("listDirectory", {"path": "."}), answer("done")]) as server:
        server.url          # "http://127.0.0.1:PORT/v1"
        server.requests()   # recorded chat request bodies (dicts), in order

Each step answers one chat request; when the script runs out it answers "(script exhausted)". ``GET /v1/models``
answers a one-model list. The server runs as a separate process (this file run as a script) so a client that
hangs, crashes or is killed cannot take the test process with it; the port is chosen by the server and reported
back on its stdout.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any

Step = dict[str, Any]
EXHAUSTED = "(script exhausted)"
MODEL_ID = "scripted"


# ---------------------------------------------------------------- steps (plain dicts: they cross the process line)

def tool_call(name: str, args: dict[str, Any] | str, id: str | None = None) -> Step:
    """One assistant message with one tool call. ``args`` as a dict is sent JSON-encoded; as a str it is sent
    verbatim (to script malformed arguments)."""
    return {"kind": "tool_calls", "calls": [{"name": name, "args": args, "id": id}]}


def tool_calls(*calls: Step, content: str | None = None) -> Step:
    """One assistant message carrying several tool calls (each made with ``tool_call``), optionally with text."""
    merged = [call for step in calls for call in step["calls"]]
    return {"kind": "tool_calls", "calls": merged, "content": content}


def answer(text: str, delay: float = 0.0) -> Step:
    """A plain assistant answer (no tool calls), optionally after ``delay`` seconds."""
    return {"kind": "answer", "text": text, "delay": delay}


def http_error(status: int, body: str = '{"error":{"message":"scripted failure"}}') -> Step:
    return {"kind": "http_error", "status": status, "body": body}


def hang() -> Step:
    """Accept the request and never answer (until the server stops)."""
    return {"kind": "hang"}


def raw_body(text: str, status: int = 200) -> Step:
    """Answer with ``text`` as the body verbatim (e.g. not JSON), content type application/json."""
    return {"kind": "raw_body", "text": text, "status": status}


# ---------------------------------------------------------------- the client side (runs in the test process)

class ScriptedServer:
    def __init__(self, steps: Sequence[Step], startup_timeout: float = 10.0) -> None:
        self._steps = list(steps)
        self._startup_timeout = startup_timeout
        self._dir: tempfile.TemporaryDirectory[str] | None = None
        self._process: subprocess.Popen[str] | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def _log(self) -> Path:
        assert self._dir is not None, "the server is not running"
        return Path(self._dir.name) / "requests.jsonl"

    def start(self) -> ScriptedServer:
        self._dir = tempfile.TemporaryDirectory(prefix="scripted-server-")
        script = Path(self._dir.name) / "script.json"
        script.write_text(json.dumps(self._steps))
        self._process = subprocess.Popen(
            [sys.executable, __file__, "--script", str(script), "--log", str(self._log)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            text=True,
        )
        stdout = self._process.stdout
        assert stdout is not None
        # The server prints "PORT <n>" once it listens; a reader thread bounds the wait.
        line: list[str] = []
        reader = threading.Thread(target=lambda: line.append(stdout.readline()), daemon=True)
        reader.start()
        reader.join(self._startup_timeout)
        if not line or not line[0].startswith("PORT "):
            self.stop()
            raise RuntimeError(f"scripted server did not start: {line!r}")
        self.port = int(line[0].split()[1])
        return self

    def stop(self) -> None:
        if self._process is not None:
            self._process.terminate()
            try:
                self._process.wait(5)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(5)
            if self._process.stdout is not None:
                self._process.stdout.close()
            self._process = None

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None

    def _entries(self) -> list[dict[str, Any]]:
        if not self._log.exists():
            return []
        return [json.loads(line) for line in self._log.read_text().splitlines() if line.strip()]

    def requests(self) -> list[dict[str, Any]]:
        """Bodies of the chat completion requests, in arrival order (a body that was not JSON: {"_raw": text})."""
        return [entry["body"] for entry in self._entries() if entry["path"].endswith("/chat/completions")]

    def request_log(self) -> list[dict[str, Any]]:
        """Every request: method, path, headers (lower-case names), body."""
        return self._entries()


# ---------------------------------------------------------------- the server side (runs as its own process)

def _assistant_message(step: Step, ids: itertools.count[int]) -> dict[str, Any]:
    if step["kind"] == "answer":
        return {"role": "assistant", "content": step["text"]}
    calls = []
    for call in step["calls"]:
        args = call["args"] if isinstance(call["args"], str) else json.dumps(call["args"])
        calls.append({
            "id": call["id"] or f"call_{next(ids)}",
            "type": "function",
            "function": {"name": call["name"], "arguments": args},
        })
    # Real servers send content null next to tool calls; clients must cope.
    return {"role": "assistant", "content": step.get("content"), "tool_calls": calls}


def _completion(message: dict[str, Any], number: int) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{number}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": MODEL_ID,
        "choices": [{
            "index": 0,
            "message": message,
            "finish_reason": "tool_calls" if message.get("tool_calls") else "stop",
        }],
    }


def serve(script: Path, log: Path) -> None:
    steps: list[Step] = json.loads(script.read_text())
    lock = threading.Lock()
    call_ids = itertools.count(1)
    completion_ids = itertools.count(1)
    stop = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _record(self, body: Any) -> None:
            with lock:
                entry = {"method": self.command, "path": self.path,
                         "headers": {k.lower(): v for k, v in self.headers.items()}, "body": body}
                with open(log, "a") as handle:
                    handle.write(json.dumps(entry) + "\n")

        def _send(self, status: int, body: str) -> None:
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self._record(None)
            if self.path.rstrip("/").endswith("/models"):
                self._send(200, json.dumps({"object": "list", "data": [{"id": MODEL_ID, "object": "model"}]}))
            else:
                self._send(404, json.dumps({"error": {"message": f"no route {self.path}"}}))

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            text = self.rfile.read(length).decode("utf-8", "replace")
            try:
                body: Any = json.loads(text)
            except ValueError:
                body = {"_raw": text}
            self._record(body)
            with lock:
                step = steps.pop(0) if steps and self.path.endswith("/chat/completions") else None
            if not self.path.endswith("/chat/completions"):
                self._send(404, json.dumps({"error": {"message": f"no route {self.path}"}}))
                return
            if step is None:
                step = answer(EXHAUSTED)
            kind = step["kind"]
            if kind == "hang":
                stop.wait()
                return
            if kind == "http_error":
                self._send(step["status"], step["body"])
            elif kind == "raw_body":
                self._send(step["status"], step["text"])
            else:
                if step.get("delay"):
                    time.sleep(step["delay"])
                self._send(200, json.dumps(_completion(_assistant_message(step, call_ids), next(completion_ids))))

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=_exit_with_parent, args=(os.getppid(),), daemon=True).start()
    print(f"PORT {server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    finally:
        stop.set()


def _exit_with_parent(parent: int) -> None:
    """A test process that dies without stopping its server (killed, crashed) does not leave it behind."""
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--script", type=Path, required=True)
    parser.add_argument("--log", type=Path, required=True)
    options = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    serve(options.script, options.log)


if __name__ == "__main__":
    main()
