"""The connector's own overhead per turn: one ``AfmConnector.run`` to its outcome against spawning the same fake
apple-code directly with the same argv and stdin (both wait for it to exit and read all of its output).

The fake (tests/support/fake_apple_code.py in ``quick`` mode) answers at once, so the difference of the two
medians is what the connector adds: prompt fitting, the runner's threads and process group, stream parsing, the
typed outcome. Runs alternate between the two ways so drift in machine load hits both alike. Target: < 25 ms.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from bench_support import write_report  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.progress import Progress  # noqa: E402

from apple_flow.config import load_settings  # noqa: E402
from apple_flow.connectors import AfmConnector, TurnRequest  # noqa: E402

TARGET_MS = 25.0
FAKE = ROOT / "tests" / "support" / "fake_apple_code.py"
PROMPT = "What does greet.py do? Answer in one sentence."


def install_fake(folder: Path) -> Path:
    target = folder / "apple-code"
    body = FAKE.read_text(encoding="utf-8").split("\n", 1)[1]
    target.write_text(f"#!{sys.executable}\n{body}", encoding="utf-8")
    target.chmod(0o755)
    return target


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=60, help="runs of each way (at least 50 for the report)")
    parser.add_argument("--report", type=Path, default=ROOT / "reports" / "bench_connector.md")
    args = parser.parse_args()
    console = Console(stderr=True)
    os.environ["FAKE_APPLE_CODE_MODE"] = "quick"
    os.environ.pop("FAKE_APPLE_CODE_RECORD", None)

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        fake = install_fake(folder)
        workspace = folder / "workspace"
        workspace.mkdir()
        # The fake reads its mode from the environment, which reaches the agent only where the settings pass it.
        settings = load_settings(env_file=None, afm_command=str(fake), default_workspace=workspace,
                                 agent_environment=["FAKE_APPLE_CODE_MODE"])
        connector = AfmConnector(settings)
        request = TurnRequest(PROMPT, workspace)
        argv = connector.invocation(connector.executable(), PROMPT, workspace, request).argv

        def direct() -> None:
            done = subprocess.run(argv, input=PROMPT.encode(), capture_output=True, cwd=workspace, check=False)
            assert done.returncode == 0 and b'"result": "ok"' in done.stdout, done

        def through_connector() -> None:
            outcome = connector.run(request).outcome()
            assert outcome.text == "ok", outcome

        for _ in range(3):  # warm-up: page cache, interpreter start-up
            direct()
            through_connector()
        timings: dict[str, list[float]] = {"direct": [], "connector": []}
        with Progress(console=console, transient=True) as progress:
            task = progress.add_task("benchmarking", total=args.runs)
            for _ in range(args.runs):
                for name, run in (("direct", direct), ("connector", through_connector)):
                    started = time.perf_counter()
                    run()
                    timings[name].append((time.perf_counter() - started) * 1000)
                progress.advance(task)

    direct_ms = statistics.median(timings["direct"])
    connector_ms = statistics.median(timings["connector"])
    overhead = connector_ms - direct_ms
    verdict = "meets" if overhead < TARGET_MS else "MISSES"
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    rows = "\n".join(
        f"| {name} | {statistics.median(values):.1f} | {percentile(values, 0.9):.1f} | {min(values):.1f} |"
        for name, values in timings.items()
    )
    report = f"""# Connector overhead (scripts/bench_connector)

{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {platform.system()} {platform.machine()}, Python {platform.python_version()},
{os.cpu_count()} CPUs, {args.runs} runs of each way, alternating.

A fake `apple-code` that answers at once (stream-json, one `result` event), run with the connector's exact argv
and prompt: directly with `subprocess.run`, and through `AfmConnector.run` to its outcome (prompt fitting, the
runner's own session and reader threads, stream parsing, the typed outcome).

| way | median ms | p90 ms | min ms |
|---|---|---|---|
{rows}

**Overhead of the connector (median difference): {overhead:.1f} ms**, which {verdict} the target
of < {TARGET_MS:.0f} ms. Load average during the run: {load}.
"""
    write_report(args.report, report, console)
    return 0 if overhead < TARGET_MS else 1


if __name__ == "__main__":
    sys.exit(main())
