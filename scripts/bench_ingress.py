"""The iMessage ingress: time from a row committed to chat.db by another process to the message being yielded,
and the CPU the ingress uses while nothing arrives.

A writer process (the stand-in for Messages) commits one row at a time into a real-schema chat.db in WAL mode,
half of them with the text only in attributedBody, and reports the monotonic time of each commit; the ingress
(exactly as ``build_imessage_channel`` makes it, default settings: file watching plus the 2 s safety-net poll)
runs in this process. Each write waits for the previous message to be yielded, after a random pause, so every
latency is measured on its own. Then nothing is written for ``--idle`` seconds and this process's CPU time is
measured. Targets: median < 100 ms, idle CPU < 1 %.
"""

from __future__ import annotations

import argparse
import os
import platform
import queue
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests")]

import psutil  # noqa: E402
from bench_support import write_report  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.progress import Progress  # noqa: E402

from apple_flow.channels.base import InboundMessage  # noqa: E402
from apple_flow.channels.imessage import build_imessage_channel  # noqa: E402
from apple_flow.config import load_settings  # noqa: E402
from support.chatdb import ChatDbWriter  # noqa: E402

TARGET_MEDIAN_MS = 100.0
TARGET_IDLE_CPU = 1.0

# The writer: one row per input line ("text" or "body"), answering "<rowid> <monotonic time after COMMIT>".
WRITER = """
import sys, time
from pathlib import Path
from support.chatdb import ChatDbWriter, make_body
writer = ChatDbWriter(Path(sys.argv[1]))
for line in sys.stdin:
    n = line.split()
    text = f"benchmark message {n[1]} 👋🏽"
    rowid = writer.message(None, body=make_body(text)) if n[0] == "body" else writer.message(text)
    print(rowid, time.monotonic(), flush=True)
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=120, help="rows to time (at least 100 for the report)")
    parser.add_argument("--idle", type=float, default=60.0, help="seconds of idle CPU measurement")
    parser.add_argument("--report", type=Path, default=ROOT / "reports" / "bench_ingress.md")
    args = parser.parse_args()
    console = Console(stderr=True)

    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "Messages" / "chat.db"
        ChatDbWriter(db).close()  # schema in place before the ingress starts
        settings = load_settings(env_file=None, messages_db_path=db)
        ingress, _ = build_imessage_channel(settings, None)
        yielded: queue.Queue[tuple[InboundMessage, float]] = queue.Queue()
        stop = threading.Event()

        def consume() -> None:
            for message in ingress.messages(0, stop):
                if isinstance(message, InboundMessage):  # the benchmark writes no rows to skip
                    yielded.put((message, time.monotonic()))

        reader = threading.Thread(target=consume, name="ingress", daemon=True)
        reader.start()
        env = {**os.environ, "PYTHONPATH": str(ROOT / "tests")}
        writer = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(db)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
        )
        assert writer.stdin is not None and writer.stdout is not None
        latencies: list[float] = []
        try:
            time.sleep(1.0)  # let the watcher start
            with Progress(console=console, transient=True) as progress:
                task = progress.add_task("rows committed and yielded", total=args.rows)
                for index in range(args.rows):
                    writer.stdin.write(f"{'body' if index % 2 else 'text'} {index}\n")
                    writer.stdin.flush()
                    rowid_text, committed_text = writer.stdout.readline().split()
                    message, seen = yielded.get(timeout=10)
                    assert message.rowid == int(rowid_text), (message.rowid, rowid_text)
                    assert message.text == f"benchmark message {index} 👋🏽", message.text
                    latencies.append((seen - float(committed_text)) * 1000)
                    progress.advance(task)
                    time.sleep(random.uniform(0.05, 0.25))
            watching = "file events (inotify or kqueue)" if ingress.watching else "NOT watching: poll only"
            process = psutil.Process()
            with console.status(f"measuring idle CPU for {args.idle:.0f} s ..."):
                cpu_before = sum(process.cpu_times()[:2])
                wall_before = time.monotonic()
                time.sleep(args.idle)
                idle_cpu = (sum(process.cpu_times()[:2]) - cpu_before) / (time.monotonic() - wall_before) * 100
        finally:
            writer.stdin.close()
            writer.wait(timeout=10)
            stop.set()
            reader.join(timeout=10)

    median = statistics.median(latencies)
    p95 = statistics.quantiles(latencies, n=20)[-1]
    ok = median < TARGET_MEDIAN_MS and idle_cpu < TARGET_IDLE_CPU
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    report = f"""# iMessage ingress (scripts/bench_ingress)

{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {platform.system()} {platform.machine()}, Python {platform.python_version()},
{os.cpu_count()} CPUs, load average at the end {load}.

A writer process commits one row at a time to a real-schema chat.db (WAL; half the rows with the text only in
attributedBody); the ingress from `build_imessage_channel` with default settings ({watching}, safety-net poll
every {settings.imessage.poll_interval_seconds:g} s) yields it in this process.

| measure | value | target |
|---|---|---|
| commit -> yield, median ({len(latencies)} rows) | {median:.1f} ms | < {TARGET_MEDIAN_MS:.0f} ms |
| commit -> yield, p95 | {p95:.1f} ms | |
| commit -> yield, min / max | {min(latencies):.1f} / {max(latencies):.1f} ms | |
| idle CPU over {args.idle:.0f} s (whole process) | {idle_cpu:.2f} % | < {TARGET_IDLE_CPU:.0f} % |

Result: {"meets both targets" if ok else "MISSES a target"}.
"""
    write_report(args.report, report, console)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
