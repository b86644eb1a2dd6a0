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

The server runs as a separate process (this file
run as a script) so a client that hangs, crashes or is killed cannot take the test process with it; the port is
chosen by the server and reported back on its stdout.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
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


# ---------------------------------------------------------------- the deterministic tokenizer

SPECIAL_TOKENS = ("<|im_start|>", "<|im_end|>")


def count_tokens(text: str) -> int:
    """A quarter token per ASCII byte, half a token per ASCII digit, one token per byte of other characters, rounded
    up (the FoundationModels mirror's scripted tokenizer), and one token for each ChatML marker (a special token in
    real tokenizers). Denser than TokenEstimator on code and text, as real tokenizers are, so a client that budgets
    with it fits more than the estimator lets it; CJK it counts denser than the estimator."""
    specials = sum(text.count(marker) for marker in SPECIAL_TOKENS)
    for marker in SPECIAL_TOKENS:
        text = text.replace(marker, "")
    quarters = 4 * specials
    for byte in text.encode():
        quarters += 4 if byte >= 0x80 else (2 if 0x30 <= byte <= 0x39 else 1)
    return (quarters + 3) // 4


TOOLS_PREAMBLE = "\n\nYou have access to the following functions:\n"
TOOLS_USAGE = ("\n\nTo respond with a function call begin the message with 'functions.<function_name>:', followed by "
               "its arguments as JSON; to respond with a message begin it with 'message:'.")


def render_prompt(body: dict[str, Any]) -> str:
    """The prompt a ChatML chat template makes of a request (as llama.cpp's chatml-function-calling does: the tools'
    names and parameters, without descriptions, in the system message; calls as ``functions.NAME:`` lines)."""
    tools = body.get("tools") or []
    parts = []
    for message in body.get("messages") or []:
        role = message.get("role", "")
        content = message.get("content")
        text = content if isinstance(content, str) else json.dumps(content) if content is not None else ""
        if role == "system" and tools:
            listed = "".join(f"\nfunctions.{tool['function']['name']}:\n"
                             f"{json.dumps(tool['function'].get('parameters'))}\n" for tool in tools)
            text += TOOLS_PREAMBLE + listed + TOOLS_USAGE
        for call in message.get("tool_calls") or []:
            text += f"functions.{call['function']['name']}:\n{call['function']['arguments']}"
        parts.append(f"<|im_start|>{role}\n{text}<|im_end|>\n")
    return "".join(parts) + "<|im_start|>assistant\n"


def prompt_tokens(body: dict[str, Any]) -> int:
    """The request's prompt as the tokenizing scripted server counts it (its ``usage.prompt_tokens``)."""
    return count_tokens(render_prompt(body))


# ---------------------------------------------------------------- the client side (runs in the test process)

class ScriptedServer:
    def __init__(
        self, steps: Sequence[Step], startup_timeout: float = 10.0, streaming: bool = True, models_delay: float = 0.0,
        tokenizer: str | None = None, count_usage: bool = False, count_with: str | None = None,
        count_model: str | None = None, count_context: int = 4096,
    ) -> None:
        if tokenizer not in (None, "llama-cpp-python", "llama.cpp"):
            raise ValueError(f"tokenizer must be None, 'llama-cpp-python' or 'llama.cpp', not {tokenizer!r}")
        self._steps = list(steps)
        self._startup_timeout = startup_timeout
        self._options = {"streaming": streaming, "models_delay": models_delay, "tokenizer": tokenizer,
                         "count_usage": count_usage, "count_with": count_with, "count_model": count_model,
                         "count_context": count_context}
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


# ---------------------------------------------------------------- the server side (runs as its own process)

def _tool_calls(step: Step, ids: itertools.count[int]) -> list[dict[str, Any]]:
    calls = []
    for call in step["calls"]:
        args = call["args"] if isinstance(call["args"], str) else json.dumps(call["args"])
        calls.append({
            "id": call["id"] or f"call_{next(ids)}",
            "type": "function",
            "function": {"name": call["name"], "arguments": args},
        })
    return calls


def _assistant_message(step: Step, calls: list[dict[str, Any]]) -> dict[str, Any]:
    if step["kind"] == "answer":
        return {"role": "assistant", "content": step["text"]}
    # Real servers send content null next to tool calls; clients must cope.
    return {"role": "assistant", "content": step.get("content"), "tool_calls": calls}


def _completion(message: dict[str, Any], number: int, usage: dict[str, int] | None) -> dict[str, Any]:
    body: dict[str, Any] = {
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
    if usage:
        body["usage"] = usage
    return body


def _pieces(text: str, size: int = 4) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)]


def _stream_chunks(
    message: dict[str, Any], number: int, usage: dict[str, int] | None, include_usage: bool
) -> list[dict[str, Any]]:
    """The chunks OpenAI streams for ``message``: role, text pieces, each tool call's head then its argument
    pieces, the finish reason, then (when asked for) the usage with no choices."""
    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"id": f"chatcmpl-{number}", "object": "chat.completion.chunk", "created": int(time.time()),
                "model": MODEL_ID, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    chunks = [chunk({"role": "assistant", "content": ""})]
    chunks += [chunk({"content": piece}) for piece in _pieces(message.get("content") or "")]
    for index, call in enumerate(message.get("tool_calls") or []):
        head = {"index": index, "id": call["id"], "type": "function",
                "function": {"name": call["function"]["name"], "arguments": ""}}
        chunks.append(chunk({"tool_calls": [head]}))
        for piece in _pieces(call["function"]["arguments"], 8):
            chunks.append(chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}))
    chunks.append(chunk({}, "tool_calls" if message.get("tool_calls") else "stop"))
    if include_usage:
        chunks.append({"id": f"chatcmpl-{number}", "object": "chat.completion.chunk", "created": int(time.time()),
                       "model": MODEL_ID, "choices": [], "usage": usage})
    return chunks


def serve(script: Path, log: Path) -> None:
    loaded = json.loads(script.read_text())
    steps: list[Step] = loaded["steps"]
    streaming: bool = loaded["streaming"]
    models_delay: float = loaded["models_delay"]
    tokenizer: str | None = loaded.get("tokenizer")
    report_usage: bool = loaded.get("count_usage", False)
    count_with: str | None = loaded.get("count_with")
    local = _LocalCounter(loaded["count_model"], loaded["count_context"]) if loaded.get("count_model") else None
    if local is not None:
        count_with = None

    def count(text: str) -> int:
        if local is not None:
            return local.count(text)
        if count_with is None:
            return count_tokens(text)
        return int(_post_json(f"{count_with}/extras/tokenize/count", {"input": text})[1]["count"])

    def count_prompt(body: dict[str, Any]) -> tuple[int | None, str | None]:
        """The prompt's tokens, or None and the counting server's error (a prompt over its context)."""
        if local is not None:
            return local.count_prompt(body)
        if count_with is None:
            return prompt_tokens(body), None
        probe = {key: value for key, value in body.items() if key not in ("model", "stream", "stream_options")}
        probe.update(stream=False, max_tokens=1, temperature=0)
        if probe.get("tools"):
            probe["tool_choice"] = {"type": "function", "function": {"name": probe["tools"][0]["function"]["name"]}}
        status, answer = _post_json(f"{count_with}/v1/chat/completions", probe)
        if status != 200:
            return None, json.dumps(answer)
        return int(answer["usage"]["prompt_tokens"]), None
    lock = threading.Lock()
    call_ids = itertools.count(1)
    completion_ids = itertools.count(1)
    stop = threading.Event()

    def write_log(entry: dict[str, Any]) -> None:
        with lock, open(log, "a") as handle:
            handle.write(json.dumps(entry) + "\n")

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _record(self, body: Any) -> None:
            write_log({"method": self.command, "path": self.path, "time": time.time(),
                       "headers": {k.lower(): v for k, v in self.headers.items()}, "body": body})

        def _send(self, status: int, body: str) -> None:
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _start_stream(self) -> None:
            # No Content-Length: the stream ends when the server closes the connection.
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream; charset=utf-8")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True

        def _stream(self, chunks: list[dict[str, Any]], chunk_delay: float) -> None:
            self._start_stream()
            events = [json.dumps(chunk) for chunk in chunks] + ["[DONE]"]
            for sent, event in enumerate(events):
                try:
                    self.wfile.write(f"data: {event}\n\n".encode())
                    self.wfile.flush()
                except OSError:  # the client closed the connection: stop generating, as real servers do
                    write_log({"event": "disconnected", "time": time.time(), "chunks": sent, "total": len(events)})
                    return
                if chunk_delay and stop.wait(chunk_delay):
                    return

        def _tokenize(self, body: Any) -> bool:
            """Answers a tokenize request of the server kind being played; False for any other path."""
            path = self.path.rstrip("/")
            routes = {"/extras/tokenize": "input", "/extras/tokenize/count": "input"} \
                if tokenizer == "llama-cpp-python" else {"/tokenize": "content"}
            if path not in routes:
                return False
            text = body.get(routes[path]) if isinstance(body, dict) else None
            if not isinstance(text, str):
                self._send(422, json.dumps({"error": {"message": f"{routes[path]} must be a string"}}))
                return True
            tokens = count(text)
            answer = {"count": tokens} if path.endswith("/count") else {"tokens": list(range(tokens))}
            self._send(200, json.dumps(answer))
            return True

        def do_GET(self) -> None:
            self._record(None)
            if self.path.rstrip("/").endswith("/models"):
                if models_delay:
                    time.sleep(models_delay)
                listed = {"id": MODEL_ID, "object": "model"}
                if count_with or local:  # playing the llama-cpp-python server it counts as
                    listed["owned_by"] = "me"
                self._send(200, json.dumps({"object": "list", "data": [listed]}))
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
            if tokenizer is not None and self._tokenize(body):
                return
            if not self.path.endswith("/chat/completions"):
                self._send(404, json.dumps({"error": {"message": f"no route {self.path}"}}))
                return
            stream = streaming and isinstance(body, dict) and body.get("stream") is True
            with lock:
                while steps and steps[0]["kind"] == "empty_stream" and not stream:
                    steps.pop(0)
                step = steps.pop(0) if steps else answer(EXHAUSTED)
            kind = step["kind"]
            if kind == "hang":
                stop.wait()
                return
            if kind == "http_error":
                self._send(step["status"], step["body"])
            elif kind == "raw_body":
                self._send(step["status"], step["text"])
            elif kind == "empty_stream":
                self._start_stream()
            else:
                if step.get("delay"):
                    time.sleep(step["delay"])
                message = _assistant_message(step, _tool_calls(step, call_ids) if kind == "tool_calls" else [])
                number = next(completion_ids)
                usage = step.get("usage")
                if (report_usage or count_with or local) and usage is None and isinstance(body, dict):
                    completion = count(message.get("content") or "") + sum(
                        count(call["function"]["name"] + call["function"]["arguments"])
                        for call in message.get("tool_calls") or [])
                    prompt, refused = count_prompt(body)
                    write_log({"event": "counted", "prompt_tokens": prompt, "error": refused,
                               "max_tokens": body.get("max_tokens")})
                    if prompt is None:
                        self._send(400, json.dumps({"error": {"message": f"the counting server refused the "
                                                                         f"prompt: {refused}"}}))
                        return
                    if not report_usage:
                        usage = None
                    usage = {"prompt_tokens": prompt, "completion_tokens": completion,
                             "total_tokens": prompt + completion}
                if stream:
                    options = body.get("stream_options") or {}
                    include_usage = isinstance(options, dict) and options.get("include_usage") is True
                    self._stream(_stream_chunks(message, number, usage, include_usage), step.get("chunk_delay") or 0)
                else:
                    self._send(200, json.dumps(_completion(message, number, usage)))

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=_exit_with_parent, args=(os.getppid(),), daemon=True).start()
    print(f"PORT {server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    finally:
        stop.set()


class _LocalCounter:
    """llama-cpp-python's counts without its server: the model's tokenizer, and the prompt its chatml-function-calling
    handler renders for a request (the handler runs until it would generate, then is stopped)."""

    class _Rendered(Exception):
        pass

    def __init__(self, model: str, context: int) -> None:
        from llama_cpp import Llama

        self.llama = Llama(model_path=model, vocab_only=True, verbose=False)
        self.context = context

    def count(self, text: str) -> int:
        # As the server's /extras/tokenize/count does.
        return len(self.llama.tokenize(text.encode(), special=True))

    def render(self, body: dict[str, Any]) -> str:
        from llama_cpp import llama_chat_format

        prompts: list[str] = []
        rendered = self._Rendered

        class Capture:
            verbose = False

            def create_completion(self, prompt: str, **_: Any) -> Any:
                prompts.append(prompt)
                raise rendered

        with contextlib.suppress(rendered):
            llama_chat_format.chatml_function_calling(llama=Capture(), messages=body.get("messages") or [],
                                                      tools=body.get("tools"), tool_choice=body.get("tool_choice"))
        return prompts[0]

    def count_prompt(self, body: dict[str, Any]) -> tuple[int | None, str | None]:
        tokens = self.count(self.render(body))
        if tokens >= self.context:  # llama.cpp refuses a prompt that fills its context
            return None, f"Requested tokens ({tokens}) exceed context window of {self.context}"
        return tokens, None


def _post_json(url: str, body: Any) -> tuple[int, Any]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=300) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        text = error.read().decode("utf-8", "replace")
        try:
            return error.code, json.loads(text)
        except ValueError:
            return error.code, {"error": text}


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
