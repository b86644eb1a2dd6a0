"""What apple-code's tools cost inside a whole run: each scenario is a full ``apple-code`` run against the scripted
OpenAI-compatible server with exactly one tool call, measured against a baseline run whose one call is a tiny
listDirectory. Medians over --runs runs (at least 20).

- readFile of line 250,000 in a 50 MB file: time, and peak RSS next to the baseline (the file is streamed, so the
  peak should stay far below 50 MB above the baseline);
- searchContent over 2,000 files of 50 lines each;
- runCommand ``true``, in the OS sandbox this machine offers (bubblewrap on Linux when it works).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import Progress

SCRIPTS = Path(__file__).resolve().parent
ROOT = SCRIPTS.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(SCRIPTS))

from bench_apple_code import ms, peak_rss_kib, release_binary  # noqa: E402

from support.apple_code_run import clean_env  # noqa: E402
from support.scripted_server import ScriptedServer, answer, tool_call  # noqa: E402

console = Console(stderr=True)


def make_workspace(root: Path) -> None:
    """A 50 MB text file (500,000 lines of 100 bytes) and a tree of 2,000 small source files."""
    line = "0123456789" * 9 + "abcdefghi\n"
    block = line * 10_000
    with open(root / "huge.log", "w") as handle:
        for _ in range(50):
            handle.write(block)
    for folder in range(40):
        sub = root / "src" / f"pkg{folder:02d}"
        sub.mkdir(parents=True)
        for index in range(50):
            body = "".join(f"def function_{index}_{n}(value):\n" if n % 10 == 0 else f"    value += {n}\n"
                           for n in range(50))
            (sub / f"module{index:02d}.py").write_text(body)


def measure(binary: Path, workspace: Path, name: str, arguments: dict[str, Any], runs: int,
            progress: Progress) -> tuple[list[float], list[int], str]:
    """Runs apple-code `runs` times (after one warm-up) with one `name` call; wall seconds, peak RSS (KiB) and
    the tool result the model was sent."""
    env = clean_env()
    script = [step for _ in range(runs + 1) for step in (tool_call(name, arguments), answer("ok"))]
    times: list[float] = []
    rss: list[int] = []
    with ScriptedServer(script) as server:
        argv = [str(binary), "--backend", "openai", "--base-url", server.url, "--model", "scripted",
                "--cwd", str(workspace), "--output-format", "stream-json", "Use the tool."]
        peak_rss_kib(argv, env)
        task = progress.add_task(name, total=runs)
        for _ in range(runs):
            elapsed, peak, out, _ = peak_rss_kib(argv, env)
            if b'"subtype":"success"' not in out.splitlines()[-1]:
                raise SystemExit(f"{name} run did not succeed:\n{out.decode(errors='replace')[-800:]}")
            times.append(elapsed)
            rss.append(peak)
            progress.advance(task)
        sent = server.requests()[1]["messages"][-1].get("content") or ""
    return times, rss, str(sent)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--binary", type=Path)
    options = parser.parse_args()
    runs = max(20, options.runs)
    binary = options.binary or release_binary()
    scenarios: dict[str, tuple[str, dict[str, Any]]] = {
        "baseline: listDirectory of a 50-file folder": ("listDirectory", {"path": "src/pkg00", "recursive": False}),
        "readFile at line 250,000 of a 50 MB file": ("readFile", {"path": "huge.log", "startLine": 250000}),
        "searchContent over 2,000 files (100,000 lines)": ("searchContent", {"pattern": "def function_7_",
                                                                               "path": "src"}),
        "runCommand `true`": ("runCommand", {"command": "true"}),
    }
    results: dict[str, tuple[list[float], list[int], str]] = {}
    with tempfile.TemporaryDirectory() as folder, Progress(console=console, transient=True) as progress:
        workspace = Path(folder)
        console.print("[bold]Writing a 50 MB file and 2,000 source files…[/bold]")
        make_workspace(workspace)
        for label, (name, arguments) in scenarios.items():
            results[label] = measure(binary, workspace, name, arguments, runs, progress)

    base_time = statistics.median(results[next(iter(scenarios))][0])
    base_rss = statistics.median(results[next(iter(scenarios))][1])
    rows = []
    for label, (times, rss, sent) in results.items():
        extra = statistics.median(times) - base_time
        rows.append(f"| {label} | {ms(times)} | {extra * 1000:+.1f} ms | {statistics.median(rss) / 1024:.1f} MiB "
                    f"({(statistics.median(rss) - base_rss) / 1024:+.1f}) | {sent.splitlines()[-1][:70]} |")
    report = f"""# apple-code tools benchmark

{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {platform.system()} {platform.machine()}, {os.cpu_count()} cores,
binary `{binary.relative_to(ROOT) if binary.is_relative_to(ROOT) else binary}`, {runs} runs each (median, min, max).
Command: `scripts/bench_tools --runs {runs}`. Each row is a whole apple-code run with one tool call against the
scripted server; "vs baseline" is the median difference to the first row, i.e. roughly what the tool itself cost.

| run with one call | wall time | vs baseline | peak RSS (vs baseline) | last line of the result sent to the model |
|---|---|---|---|---|
{chr(10).join(rows)}
"""
    out_path = ROOT / "reports" / "bench_tools.md"
    out_path.parent.mkdir(exist_ok=True)
    out_path.write_text(report)
    print(report)


if __name__ == "__main__":
    main()
