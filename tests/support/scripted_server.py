"""A scripted OpenAI-compatible server for integration tests: a real HTTP server in its own process on 127.0.0.1
speaking the real ``/v1/chat/completions`` wire format, replaying a script of steps and recording every request
body.

    from support.scripted_server import ScriptedServer, tool_call, tool_calls, answer, http_error, hang, raw_body
    with ScriptedServer([tool_call("listDirectory", {"path": "."}), answer("done")]) as server:
        server.url          # "http://127.0.0.1:PORT/v1"
        server.requests()   # recorded chat request bodies (dicts), in order

Each step answers one chat request; when the script runs out it answers "(script exhausted)". A request with
``"stream": true`` is answered as OpenAI streams: server-sent events (``data: {chunk}``), the text in small
``delta.content`` pieces, each tool call as a first delta (index, id, name) then argument pieces, a chunk with
``finish_reason``, a ``usage`` chunk when ``stream_options.include_usage`` asks for it, then ``data: [DONE]``.
``ScriptedServer(steps, streaming=False)`` is a server that ignores ``stream`` and always answers one JSON body.
When a client closes a stream before its end, the log records it (``disconnects()``). ``GET /v1/models`` answers
a one-model list (after ``models_delay`` seconds: a busy server).

Servers that count tokens are played with a deterministic tokenizer (``count_tokens``: a quarter token per ASCII
byte, half per digit, one per other byte, rounded up): ``tokenizer="llama-cpp-python"`` answers llama-cpp-python's
``POST /extras/tokenize`` and ``/extras/tokenize/count``, ``tokenizer="llama.cpp"`` llama.cpp's ``POST /tokenize``;
``count_usage=True`` reports ``usage.prompt_tokens`` of every request (streamed too, when asked for) as that
tokenizer counts the prompt the server's chat template (``render_prompt``: ChatML, the tools in the system message)
makes of it, unless the step has a ``usage`` of its own. ``prompt_tokens(body)`` is that figure for a recorded
request. ``count_with=ROOT`` (the root URL of a llama-cpp-python server running chatml-function-calling, for the
local-model tests and benchmarks) counts with that server instead: its ``/extras/tokenize/count`` for texts, and
for a chat request the request itself sent there without streaming, with ``max_tokens`` 1 and, when it offers
tools, a named ``tool_choice`` (so the server renders the prompt with its own template and tools, and generates
one token): its ``usage.prompt_tokens`` is the count, and a prompt over that server's context is its real error,
answered to the client as the server answered it (``counted()``: the server's count of each chat request's prompt,
None where it refused it). ``count_model=GGUF`` counts the same way without a server, in this process: the model
file's tokenizer (llama-cpp-python, ``vocab_only``) over the prompt llama-cpp-python's chatml-function-calling
handler renders (its own function, stopped before it generates); a prompt is refused when it reaches
``count_context`` tokens, as that server refuses it. Either way its ``/models`` then says ``owned_by: "me"``, as
llama-cpp-python's does. Without ``count_usage`` the prompts are still counted that way (and an overflow refused),
only not reported.

The server runs as a separate process (``scripted_process``) so a client that hangs, crashes or is killed cannot
take the test process with it; the port is chosen by the server and reported back on its stdout. The wire format is
in ``scripted_wire``, the counting in ``scripted_tokens``; this module is the test's side: the steps and the
server's handle.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from support.scripted_tokens import count_tokens, prompt_tokens, render_prompt
from support.scripted_wire import EXHAUSTED, MODEL_ID, Step

__all__ = [
    "EXHAUSTED", "MODEL_ID", "ScriptedServer", "Step", "answer", "count_tokens", "empty_stream", "hang",
    "http_error", "prompt_tokens", "raw_body", "render_prompt", "tool_call", "tool_calls",
]
TESTS = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------- steps (plain dicts: they cross the process line)

def tool_call(name: str, args: dict[str, Any] | str, id: str | None = None) -> Step:
    """One assistant message with one tool call. ``args`` as a dict is sent JSON-encoded; as a str it is sent
    verbatim (to script malformed arguments)."""
    return {"kind": "tool_calls", "calls": [{"name": name, "args": args, "id": id}]}


def tool_calls(*calls: Step, content: str | None = None) -> Step:
    """One assistant message carrying several tool calls (each made with ``tool_call``), optionally with text."""
    merged = [call for step in calls for call in step["calls"]]
    return {"kind": "tool_calls", "calls": merged, "content": content}


def answer(text: str, delay: float = 0.0, chunk_delay: float = 0.0, usage: dict[str, int] | None = None) -> Step:
    """A plain assistant answer (no tool calls), optionally after ``delay`` seconds; streamed with ``chunk_delay``
    seconds between chunks (a slow generation); ``usage`` is sent as the server's token counts."""
    return {"kind": "answer", "text": text, "delay": delay, "chunk_delay": chunk_delay, "usage": usage}


def empty_stream() -> Step:
    """A stream request answered with HTTP 200, an event-stream content type and no event at all, then closed:
    what llama-cpp-python's chatml-function-calling does when it cannot stream an automatic tool choice. A
    request without ``stream`` is answered by the next step instead (this one is used up)."""
    return {"kind": "empty_stream"}


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
    def __init__(
        self, steps: Sequence[Step], startup_timeout: float = 10.0, streaming: bool = True, models_delay: float = 0.0,
        tokenizer: str | None = None, count_usage: bool = False, count_with: str | None = None,
        count_model: str | None = None, count_context: int = 4096, owned_by: str | None = None,
    ) -> None:
        if tokenizer not in (None, "llama-cpp-python", "llama.cpp"):
            raise ValueError(f"tokenizer must be None, 'llama-cpp-python' or 'llama.cpp', not {tokenizer!r}")
        self._steps = list(steps)
        self._startup_timeout = startup_timeout
        self._options = {"streaming": streaming, "models_delay": models_delay, "tokenizer": tokenizer,
                         "count_usage": count_usage, "count_with": count_with, "count_model": count_model,
                         "count_context": count_context, "owned_by": owned_by}
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
        script.write_text(json.dumps({"steps": self._steps, **self._options}))
        path = os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")]))
        self._process = subprocess.Popen(
            [sys.executable, "-m", "support.scripted_process", "--script", str(script), "--log", str(self._log)],
            env={**os.environ, "PYTHONPATH": path},
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
        return [entry["body"] for entry in self._requests() if entry["path"].endswith("/chat/completions")]

    def tokenize_requests(self) -> list[tuple[str, Any]]:
        """The tokenize requests (path, body), in arrival order, answered or not."""
        return [(entry["path"], entry["body"]) for entry in self._requests() if "tokenize" in entry["path"]]

    def counted(self) -> list[dict[str, Any]]:
        """With ``count_usage``: per chat request, ``prompt_tokens`` as counted (None when the counting server
        refused the prompt, with its ``error``) and the ``max_tokens`` asked for."""
        return [entry for entry in self._entries() if entry.get("event") == "counted"]

    def request_log(self) -> list[dict[str, Any]]:
        """Every request: method, path, headers (lower-case names), body, time (``time.time()``) it arrived."""
        return self._requests()

    def disconnects(self) -> list[dict[str, Any]]:
        """Streams the client closed before their end: ``time`` it was noticed, ``chunks`` sent, ``total``."""
        return [entry for entry in self._entries() if entry.get("event") == "disconnected"]

    def _requests(self) -> list[dict[str, Any]]:
        return [entry for entry in self._entries() if "event" not in entry]
