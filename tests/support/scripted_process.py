"""The scripted server's process: an HTTP server on 127.0.0.1 replaying a script of steps (``scripted_server``
writes the script, starts this as ``python -m support.scripted_process`` and reads the port it prints)."""

from __future__ import annotations

import argparse
import itertools
import json
import os
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from support.scripted_tokens import Counter, ModelCounter, ScriptedCounter, ServerCounter
from support.scripted_wire import EXHAUSTED, MODEL_ID, Step, assistant_message, completion, stream_chunks, tool_calls


def serve(script: Path, log: Path) -> None:
    loaded = json.loads(script.read_text())
    steps: list[Step] = loaded["steps"]
    streaming: bool = loaded["streaming"]
    models_delay: float = loaded["models_delay"]
    tokenizer: str | None = loaded.get("tokenizer")
    report_usage: bool = loaded.get("count_usage", False)
    counter: Counter = ScriptedCounter()
    if loaded.get("count_model"):
        counter = ModelCounter(loaded["count_model"], loaded["count_context"])
    elif loaded.get("count_with"):
        counter = ServerCounter(loaded["count_with"])
    counting = not isinstance(counter, ScriptedCounter)  # playing the llama-cpp-python server it counts with
    owned_by: str | None = loaded.get("owned_by")  # playing another server: "apple-flow" for the local model's
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
            tokens = counter.count(text)
            counted = {"count": tokens} if path.endswith("/count") else {"tokens": list(range(tokens))}
            self._send(200, json.dumps(counted))
            return True

        def do_GET(self) -> None:
            self._record(None)
            if self.path.rstrip("/").endswith("/models"):
                if models_delay:
                    time.sleep(models_delay)
                listed = {"id": MODEL_ID, "object": "model"}
                if counting:
                    listed["owned_by"] = "me"
                if owned_by:
                    listed["owned_by"] = owned_by
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
                step: Step = steps.pop(0) if steps else {"kind": "answer", "text": EXHAUSTED}
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
                message = assistant_message(step, tool_calls(step, call_ids) if kind == "tool_calls" else [])
                number = next(completion_ids)
                usage = step.get("usage")
                if (report_usage or counting) and usage is None and isinstance(body, dict):
                    completed = counter.count(message.get("content") or "") + sum(
                        counter.count(call["function"]["name"] + call["function"]["arguments"])
                        for call in message.get("tool_calls") or [])
                    prompt, refused = counter.count_prompt(body)
                    write_log({"event": "counted", "prompt_tokens": prompt, "error": refused,
                               "max_tokens": body.get("max_tokens")})
                    if prompt is None:
                        self._send(400, json.dumps({"error": {"message": f"the counting server refused the "
                                                                         f"prompt: {refused}"}}))
                        return
                    # Without count_usage the prompt is counted (and an overflow refused) but not reported.
                    if report_usage:
                        usage = {"prompt_tokens": prompt, "completion_tokens": completed,
                                 "total_tokens": prompt + completed}
                if stream:
                    options = body.get("stream_options") or {}
                    include_usage = isinstance(options, dict) and options.get("include_usage") is True
                    self._stream(stream_chunks(message, number, usage, include_usage), step.get("chunk_delay") or 0)
                else:
                    self._send(200, json.dumps(completion(message, number, usage)))

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
