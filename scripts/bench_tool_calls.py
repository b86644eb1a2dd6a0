"""Do a model's tool calls come back from its server as OpenAI ``tool_calls``, with the right name and arguments?

Ten requests like "Read notes.txt and tell me its first word", each in a workspace of its own holding that file and
two others, sent by the real apple-code exactly as it sends them (its instructions, its seven tools, ``tool_choice``
"auto", temperature 0), against the local model server (started here) or the server ``--base-url`` names. For each,
from apple-code's own trace (``--output-format stream-json --verbose``):

- structured: the first reply carried a ``tool_calls`` entry (apple-code logs it when it had to recover a call
  written as text instead: that counts as not structured);
- right: that first call is ``readFile`` of the file asked about (``./`` and a leading folder of the workspace
  aside);
- answered: the final answer holds the file's real first word.

apple-code's first request to this server requires a call to a tool that looks (``allowed_tools``), so its first
reply is a call by construction; the model's own choice is measured too: each request apple-code sends first is
recorded (by a stand-in server it talks to once) and sent again to the model server with ``tool_choice`` "auto",
unstreamed, and its reply is counted the same way ("auto" columns).

Not a test: the figures go to reports/bench_tool_calls.md.

    scripts/bench_tool_calls [--local-model NAME | --base-url URL --model NAME] [--report PATH]
"""

from __future__ import annotations

import argparse
import contextlib
import http.server
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

SCRIPTS = Path(__file__).resolve().parent
ROOT = SCRIPTS.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(SCRIPTS))

from bench_support import free_port, write_report  # noqa: E402
from rich.console import Console  # noqa: E402

APPLE_CODE = ROOT / "apple_code" / ".build" / "debug" / "apple-code"
OTHERS = {"README.md": "Project notes live here.\n", "main.py": "print('hello')\n"}

# (file, its text, the request): the first word differs each time, and so does the wording.
CASES = (
    ("notes.txt", "Bananas are yellow when ripe.\nApples are red.\n", "Read notes.txt and tell me its first word."),
    ("todo.md", "Laundry first, then the shopping.\n", "What is the first word of todo.md?"),
    ("poem.txt", "Moonlight falls on the quiet lake.\n", "Open poem.txt and tell me the first word in it."),
    ("config.ini", "[server]\nport = 8080\n", "Read config.ini and say what its first word is."),
    ("letter.txt", "Dear Ana, thank you for the book.\n", "Tell me the first word of letter.txt."),
    ("data.csv", "city,population\nLyon,522000\n", "Read data.csv. What is its first word?"),
    ("changelog.txt", "Version 2 adds dark mode.\n", "Look at changelog.txt and tell me its first word."),
    ("recipe.txt", "Whisk two eggs with sugar.\n", "Read recipe.txt and tell me its first word."),
    ("server.log", "Started listening on port 80.\n", "What word does server.log start with?"),
    ("story.txt", "Once upon a time there was a fox.\n", "Read the file story.txt and tell me its first word."),
)


@dataclass
class Outcome:
    file: str
    structured: bool
    right: bool
    answered: bool
    first_call: str
    seconds: float
    note: str = ""
    auto_structured: bool = False
    auto_right: bool = False
    auto_reply: str = ""


class _Recorder(http.server.BaseHTTPRequestHandler):
    """A stand-in server apple-code talks to once: it lists one model and keeps the first chat request's body."""

    bodies: ClassVar[list[dict[str, Any]]] = []

    def do_GET(self) -> None:
        self._answer(200, {"object": "list", "data": [{"id": "recorder", "owned_by": "apple-flow"}]})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.bodies.append(json.loads(self.rfile.read(length)))
        self._answer(400, {"error": {"message": "recorded"}})

    def _answer(self, status: int, value: dict[str, Any]) -> None:
        data = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def first_request(apple_code: Path, folder: Path, prompt: str) -> dict[str, Any]:
    """The first chat request apple-code sends for ``prompt`` in ``folder``, as it sends it."""
    _Recorder.bodies = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        subprocess.run([str(apple_code), "--backend", "openai", "--base-url",
                        f"http://127.0.0.1:{server.server_address[1]}/v1", "--cwd", str(folder), "--timeout", "30",
                        prompt], capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
    finally:
        server.shutdown()
    if not _Recorder.bodies:
        raise SystemExit("apple-code sent no chat request to the recording server")
    return _Recorder.bodies[0]


def auto_choice(url: str, body: dict[str, Any], model: str | None, name: str) -> tuple[bool, bool, str]:
    """The same request with tool_choice "auto", unstreamed: (structured, right call, what came back)."""
    sent = {**body, "tool_choice": "auto", "stream": False}
    sent.pop("stream_options", None)
    if model:
        sent["model"] = model
    request = urllib.request.Request(f"{url}/chat/completions", data=json.dumps(sent).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=300) as response:
        message = json.load(response)["choices"][0]["message"]
    calls = message.get("tool_calls") or []
    if not calls:
        return False, False, "text: " + (message.get("content") or "")[:60]
    function = calls[0]["function"]
    try:
        path = str(json.loads(function.get("arguments") or "{}").get("path", ""))
    except ValueError:
        path = ""
    right = function.get("name") == "readFile" and path.removeprefix("./") == name
    return True, right, f"{function.get('name')}({function.get('arguments')})"[:80]


def first_word(text: str) -> str:
    return text.replace("[", " ").replace(",", " ").split()[0].strip(".,").lower()


def run_case(case: tuple[str, str, str], folder: Path, apple_code: Path, backend: list[str],
             timeout: float, url: str, model: str | None) -> Outcome:
    name, text, prompt = case
    folder.mkdir(parents=True)
    for file, content in {**OTHERS, name: text}.items():
        (folder / file).write_text(content, encoding="utf-8")
    auto = auto_choice(url, first_request(apple_code, folder, prompt), model, name)
    started = time.monotonic()
    done = subprocess.run(
        [str(apple_code), *backend, "--cwd", str(folder), "--output-format", "stream-json", "--verbose",
         "--max-turns", "3", "--timeout", str(timeout), prompt],
        capture_output=True, text=True, timeout=timeout + 30, stdin=subprocess.DEVNULL)
    seconds = time.monotonic() - started
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    calls = [event for event in events if event.get("type") == "tool_call"]
    result = next((event for event in events if event.get("type") == "result"), {})
    recovered = "reply 1: the model wrote a" in done.stderr
    first = calls[0] if calls else None
    path = str((first or {}).get("arguments", {}).get("path", "")) if isinstance(
        (first or {}).get("arguments"), dict) else ""
    right = bool(first and first.get("name") == "readFile"
                 and path.removeprefix("./").removeprefix(folder.name + "/") in (name, f"{folder}/{name}"))
    shown = f"{first['name']}({json.dumps(first.get('arguments'))})" if first else "no call"
    answer = str(result.get("result", ""))
    ended = str(result.get("subtype", f"exit {done.returncode}"))
    return Outcome(name, structured=bool(first) and not recovered, right=right,
                   answered=first_word(text) in answer.lower(), first_call=shown[:80], seconds=seconds,
                   note="" if ended == "success" else ended, auto_structured=auto[0], auto_right=auto[1],
                   auto_reply=auto[2])


def report(outcomes: list[Outcome], backend: str, args: argparse.Namespace, wall: float, load: float) -> str:
    structured_right = sum(o.structured and o.right for o in outcomes)
    recovered = sum(o.first_call != "no call" and not o.structured for o in outcomes)
    lines = [
        "# Tool calls as the server returns them (scripts/bench_tool_calls)",
        "",
        f"- When and where: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {platform.system()} {platform.machine()}, "
        f"{os.cpu_count()} CPUs, load average {load:.1f} at the start; it took {wall:.0f} s.",
        f"- Backend: {backend}.",
        f"- apple-code: `{args.apple_code}`, its real requests (instructions, 7 tools, temperature 0; the first one "
        "to apple-flow's server requires a call to a tool that looks, `allowed_tools`), `--max-turns 3`.",
        f"- Command: `scripts/bench_tool_calls {' '.join(args.argv)}`".rstrip() + "`" if args.argv else
        "- Command: `scripts/bench_tool_calls`",
        "",
        "## Result",
        "",
        f"**{structured_right} of {len(outcomes)}** first replies were a structured `tool_calls` entry naming "
        "`readFile` with the file asked about.",
        "",
        "| | count |",
        "|---|---|",
        f"| structured `tool_calls` in the first reply | {sum(o.structured for o in outcomes)} |",
        f"| ... and the right call (`readFile` of the file asked about) | {structured_right} |",
        f"| a call recovered by apple-code from text | {recovered} |",
        f"| the final answer gives the file's first word | {sum(o.answered for o in outcomes)} |",
        f"| the same first request with `tool_choice` \"auto\": structured `tool_calls` | "
        f"{sum(o.auto_structured for o in outcomes)} |",
        f"| ... and the right call | {sum(o.auto_structured and o.auto_right for o in outcomes)} |",
        f"| median seconds per request | {statistics.median(o.seconds for o in outcomes):.1f} |",
        "",
        "## Per request",
        "",
        "| file | structured | right call | answered | first call | seconds | note | \"auto\": reply |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for o in outcomes:
        mark = {True: "yes", False: "no"}
        lines.append(f"| {o.file} | {mark[o.structured]} | {mark[o.right]} | {mark[o.answered]} | "
                     f"`{o.first_call}` | {o.seconds:.1f} | {o.note} | `{o.auto_reply.replace('|', '/')}` |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--apple-code", type=Path, default=APPLE_CODE)
    parser.add_argument("--base-url", help="an OpenAI-compatible server (default: start the local model)")
    parser.add_argument("--model", help="the server's model")
    parser.add_argument("--local-model", default="qwen2.5-coder-0.5b", help="apple-flow model list")
    parser.add_argument("--timeout", type=float, default=120)
    parser.add_argument("--report", type=Path, default=ROOT / "reports" / "bench_tool_calls.md")
    args = parser.parse_args(argv)
    args.argv = list(argv if argv is not None else sys.argv[1:])
    console = Console(stderr=True)
    load = os.getloadavg()[0]
    started = time.monotonic()
    with contextlib.ExitStack() as stack:
        if args.base_url:
            flags = ["--backend", "openai", "--base-url", args.base_url]
            flags += ["--model", args.model] if args.model else []
            url, model_name = args.base_url, args.model
            backend = f"the server at {args.base_url}" + (f", model {args.model}" if args.model else "")
        else:
            from apple_flow.localmodel import LocalModelServer, model_named

            model = model_named(args.local_model)
            folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-calls-server-")))
            server = LocalModelServer(port=free_port(), state_dir=folder, model=model)
            console.print(f"starting {model.title} on llama.cpp")
            server.start(wait_seconds=180)
            stack.callback(server.stop)
            flags = ["--backend", "openai", "--base-url", server.url, "--model", model.name]
            url, model_name = server.url, model.name
            backend = (f"{model.title} on llama-cpp-python 0.3.36 with apple-flow's tool-call handler "
                       f"(apple_flow.localmodel.serve), {server.context_tokens:,}-token window")
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-calls-")))
        outcomes = []
        for index, case in enumerate(CASES):
            outcome = run_case(case, work / f"ws{index}", args.apple_code, flags, args.timeout, url, model_name)
            console.print(f"{case[0]}: structured={outcome.structured} right={outcome.right} "
                          f"answered={outcome.answered} {outcome.first_call} {outcome.seconds:.1f}s; auto: "
                          f"{outcome.auto_reply}")
            outcomes.append(outcome)
    write_report(args.report, report(outcomes, backend, args, time.monotonic() - started, load), console)
    return 0


if __name__ == "__main__":
    sys.exit(main())
