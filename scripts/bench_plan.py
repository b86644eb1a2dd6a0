"""Measure what `apple-code --plan` buys on a 4,096-token window.

A task that needs six files of about 150 lines each read to the end, run twice against the scripted
OpenAI-compatible server with the real `apple-code` binary:

- single window: the model reads each file in two windows (lines 1-100, then 101-150), then answers; the
  agent has to condense its history (or fail) to stay in 4,096 tokens;
- --plan: the planner names six subtasks, one file each; each worker reads its file the same way and answers;
  one summary request.

Both scripts issue the same reads, so the difference is only what fits in the window. Each is run twice (issue
17): with the estimator alone (a server that reports no token counts), and with exact counts (the server reports
``usage.prompt_tokens`` and answers llama-cpp-python's tokenize endpoint). The tokens are the local model's: the
scripted server renders every request with llama-cpp-python's own chatml-function-calling handler and counts it with
SmolLM2-135M's tokenizer (what the local server does before it generates), refusing a prompt of 4,096 tokens or
more as that server (`--n_ctx 4096`) refuses it. Without the local
model installed, ``--tokenizer scripted`` uses the scripted server's deterministic tokenizer instead. Reported:
requests made, the largest request in the server's tokens (prompt + answer reserve) and in estimated tokens,
overflows, and whether every line of every file was shown to the model by some request. Writes
reports/bench_plan.md and prints it.

    scripts/bench_plan [--binary apple_code/.build/debug/apple-code] [--tokenizer local|scripted]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

SCRIPTS = Path(__file__).resolve().parent
ROOT = SCRIPTS.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(SCRIPTS))

from bench_support import counting_options  # noqa: E402

from support.apple_code_run import request_tokens  # noqa: E402
from support.plan_runs import Run, lines_seen, run_apple_code, tool_results  # noqa: E402
from support.scripted_server import ScriptedServer, Step, answer, prompt_tokens, tool_call  # noqa: E402

FILE_COUNT = 6
FILE_LINES = 150
CONTEXT_TOKENS = 4096
TASK = ("Each of mod1.py to mod6.py ends with a CHECKSUM line. Read every file to its end and report the six "
        "checksums with one sentence on what each module does.")


def module_text(number: int) -> str:
    """~150 lines of plausible Python whose every line is unique, so 'was this line shown' is a plain search."""
    lines = [f'"""Module {number}: order handling, part {number}."""', ""]
    body = 0
    while len(lines) < FILE_LINES - 1:
        body += 1
        lines += [f"def step_{number}_{body:03d}(order, rate={body}.{number}):",
                  f"    total_{number}_{body} = order.amount * rate + {body * number}  # adjust m{number} s{body}",
                  f"    return round(total_{number}_{body}, 2)  # m{number} s{body} end"]
    lines = [*lines[:FILE_LINES - 1], f"# CHECKSUM mod{number}: {number * 7919 % 10007:05d}"]
    return "\n".join(lines) + "\n"


def read_whole_file(name: str) -> list[Step]:
    return [tool_call("readFile", {"path": name, "startLine": 1, "endLine": 100}),
            tool_call("readFile", {"path": name, "startLine": 101, "endLine": FILE_LINES})]


def single_window_script() -> list[Step]:
    steps: list[Step] = []
    for number in range(1, FILE_COUNT + 1):
        steps += read_whole_file(f"mod{number}.py")
    return [*steps, answer("The six checksums are listed above.")]


def plan_script() -> list[Step]:
    names = [f"mod{number}.py" for number in range(1, FILE_COUNT + 1)]
    plan = "[" + ", ".join(f'"Read {name} to its end and report its CHECKSUM line"' for name in names) + "]"
    steps: list[Step] = [answer(plan)]
    for number, name in enumerate(names, start=1):
        steps += [*read_whole_file(name), answer(f"{name}: CHECKSUM {number * 7919 % 10007:05d}.")]
    return [*steps, answer("All six checksums were read.")]


@dataclass
class Measurement:
    mode: str
    counts: str
    exit_code: int
    subtype: str
    requests: int
    largest_request: int
    largest_real: int
    overflows: int
    total_sent: int
    condensed: int
    files_in_full: int
    lines_shown: int
    checksums_in_view: int

    @property
    def all_read(self) -> str:
        return "yes" if self.files_in_full == FILE_COUNT else f"no ({self.files_in_full} of {FILE_COUNT})"


def measure(binary: Path, mode: str, script: list[Step], options: list[str], exact: bool,
            counting: dict[str, Any]) -> Measurement:
    """One run; ``exact``: the server reports usage and tokenizes; ``counting``: how it counts
    (``counting_options``)."""
    with tempfile.TemporaryDirectory(prefix="bench-plan-") as folder:
        workspace = Path(folder)
        files = {f"mod{n}.py": module_text(n) for n in range(1, FILE_COUNT + 1)}
        for name, text in files.items():
            (workspace / name).write_text(text)
        server_options: dict[str, Any] = dict(counting)
        if exact:
            server_options.update(tokenizer="llama-cpp-python", count_usage=True)
        with ScriptedServer(script, **server_options) as server:
            run: Run = run_apple_code(binary, server.url, workspace, TASK, "--context-tokens", str(CONTEXT_TOKENS),
                                      "--max-turns", "40", "--timeout", "900", *options, timeout=1000)
            requests: list[dict[str, Any]] = server.requests()
            counted = server.counted()
    result = run.result()
    wanted = {name: [line for line in text.splitlines() if line.strip()] for name, text in files.items()}
    seen = {name: lines_seen(lines, requests) for name, lines in wanted.items()}
    full = sum(1 for name, lines in wanted.items() if seen[name] == len(lines))
    # The requests whose reply was an answer: what the model could see when it wrote it (step i answers request i).
    answering = [tool_results(request) for request, step in zip(requests, script, strict=False)
                 if step["kind"] == "answer"]
    checksums = sum(1 for lines in wanted.values() if any(lines[-1] in shown for shown in answering))
    condensed = sum(1 for event in run.events() if event["type"] == "notice" and "condensed" in event["message"])
    if not counting:  # the deterministic tokenizer: counted here, as the scripted server does
        counted = [{"prompt_tokens": prompt_tokens(r), "max_tokens": r.get("max_tokens")} for r in requests]
    real = [int(c["prompt_tokens"]) + int(c["max_tokens"] or 0) for c in counted if c["prompt_tokens"] is not None]
    return Measurement(mode=mode, counts="exact" if exact else "estimated", exit_code=run.returncode,
                       subtype=result["subtype"], requests=len(requests),
                       largest_request=max((request_tokens(r) for r in requests), default=0),
                       largest_real=max(real, default=0),
                       overflows=sum(1 for c in counted if c["prompt_tokens"] is None),
                       total_sent=sum(request_tokens(r) for r in requests), condensed=condensed,
                       files_in_full=full, lines_shown=sum(seen.values()),
                       checksums_in_view=checksums)


def report(rows: list[Measurement], tokenizer: str) -> str:
    total_lines = sum(1 for n in range(1, FILE_COUNT + 1) for line in module_text(n).splitlines() if line.strip())
    counter = ("the local model's (SmolLM2-135M's tokenizer over the prompt llama-cpp-python's chatml-function-calling "
               "handler renders, tools and HTML escaping included; a prompt of 4,096 tokens or more is refused, as "
               "its server with `--n_ctx 4096` refuses it)" if tokenizer == "local"
               else "the scripted server's deterministic tokenizer (a quarter token an ASCII byte, half a digit)")
    out = [
        "# apple-code --plan: six files of 150 lines in a 4,096-token window",
        "",
        f"Task: read {FILE_COUNT} files of {FILE_LINES} lines (about 6 KB each) to their end. Scripted "
        "OpenAI-compatible server, real `apple-code` binary, `--context-tokens 4096`; every run issues the same "
        "reads (lines 1-100, then 101-150 of each file). Counts *estimated*: the server reports nothing, so "
        "apple-code budgets with its estimator (TokenEstimator: an ASCII digit 1 token, a non-ASCII byte 0.7, any "
        "other byte 1/3). Counts *exact*: the server reports `usage.prompt_tokens` and answers "
        "`/extras/tokenize/count`, so from the second request of each run on apple-code budgets in the server's "
        f"tokens. Server tokens: {counter}. A request is its prompt plus the answer reserve `max_tokens` (512); "
        "an overflow is a prompt the server refused.",
        "",
        "| mode | counts | exit | requests | largest request (server tokens) | largest request (est. tokens) | "
        f"context overflows | history condensed (notices) | file lines shown to the model (of {total_lines}) | "
        f"every file read in full | CHECKSUM lines in view when an answer was written (of {FILE_COUNT}) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        out.append(f"| {row.mode} | {row.counts} | {row.exit_code} ({row.subtype}) | {row.requests} | "
                   f"{row.largest_real} | {row.largest_request} | {row.overflows} | {row.condensed} | "
                   f"{row.lines_shown} | {row.all_read} | {row.checksums_in_view} |")
    out += ["", f"Command: `scripts/bench_plan --tokenizer {tokenizer}`", ""]
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", type=Path, default=ROOT / "apple_code" / ".build" / "debug" / "apple-code")
    parser.add_argument("--output", type=Path, default=ROOT / "reports" / "bench_plan.md")
    parser.add_argument("--tokenizer", choices=["local", "scripted"], default="local",
                        help="whose tokens: the local llama.cpp model's (default) or the scripted server's")
    options = parser.parse_args()
    console = Console(stderr=True)
    if not options.binary.is_file():
        console.print(f"[red]{options.binary} is missing: build it with `cd apple_code && swift build` first[/red]")
        raise SystemExit(2)
    rows = []
    runs = [("single window", single_window_script(), []),
            ("--plan", plan_script(), ["--plan", "--max-subtasks", "6"])]
    counting = counting_options(options.tokenizer)
    for mode, script, extra in runs:
        for exact in (False, True):
            with console.status(f"{mode} run, {'exact' if exact else 'estimated'} counts ..."):
                rows.append(measure(options.binary, mode, script, extra, exact, counting))
    text = report(rows, options.tokenizer)
    options.output.parent.mkdir(parents=True, exist_ok=True)
    options.output.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
