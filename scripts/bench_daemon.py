"""Benchmark of the daemon under a burst: N messages from S senders written to a chat.db (the real Messages schema)
as fast as SQLite takes them, answered by a real `apple-flow run --channel imessage` process whose connector is
instant (so the figures are the daemon's own: ingress, store, scheduling, egress). A fake `osascript` on PATH
records the sends. Checks that every message is answered exactly once and in order per sender; measures the time
to drain and the daemon's RSS. Writes reports/bench_daemon.md and prints it.

    scripts/bench_daemon [--messages 500] [--senders 5] [--workers 4]
"""

from __future__ import annotations

import argparse
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests")]

import psutil  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn  # noqa: E402

REPORT = ROOT / "reports" / "bench_daemon.md"
READY = "apple-flow daemon ready"
# Records "recipient<TAB>text" per send (not the daemon's Automation probe, which has no arguments); a shell script
# so the fake costs little next to the daemon.
FAKE_OSASCRIPT = '#!/bin/sh\ncat >/dev/null\n[ -z "$2" ] || printf "%s\\t%s\\n" "$2" "$3" >> "$BENCH_SENDS"\n'
console = Console(stderr=True)


class InstantConnector:
    """Answers every turn at once with ``echo: <prompt>``: the daemon's cost without an agent's."""

    context_window = 0

    def __init__(self, settings: Any) -> None:
        pass

    def ensure_started(self) -> None:
        pass

    def run(self, request: Any) -> Iterator[Any]:
        from apple_flow.connectors import Status, TurnOutcome

        yield TurnOutcome(Status.ANSWERED, text=f"echo: {request.message}")

    def cancel(self, key: str | None = None) -> int:
        return 0

    def shutdown(self) -> None:
        pass


def serve() -> None:
    """The daemon process: `apple-flow run --channel imessage` with the instant connector in afm's place."""
    from apple_flow.cli import app
    from apple_flow.connectors.registry import REGISTRY

    REGISTRY["afm"] = InstantConnector  # type: ignore[assignment]
    app(["run", "--channel", "imessage"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=500)
    parser.add_argument("--senders", type=int, default=5)
    parser.add_argument("--workers", type=int, default=4, help="APPLE_FLOW_MAX_CONCURRENT_AI_CALLS")
    parser.add_argument("--timeout", type=float, default=300, help="give up after this many seconds")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve()
        return 0
    from support.chatdb import ChatDbWriter

    senders = [f"+1555010{i:04d}" for i in range(args.senders)]
    with tempfile.TemporaryDirectory(prefix="bench-daemon-") as folder:
        tmp = Path(folder)
        bin_dir = tmp / "bin"
        bin_dir.mkdir()
        (bin_dir / "osascript").write_text(FAKE_OSASCRIPT)
        (bin_dir / "osascript").chmod(0o755)
        sends = tmp / "sends.tsv"
        chat = ChatDbWriter(tmp / "chat.db")
        workspace = tmp / "ws"
        workspace.mkdir()
        env = {
            **os.environ,
            "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
            "PYTHONPATH": str(ROOT / "src"),
            "BENCH_SENDS": str(sends),
            "APPLE_FLOW_MESSAGES_DB_PATH": str(chat.path),
            "APPLE_FLOW_DB_PATH": str(tmp / "relay.db"),
            "APPLE_FLOW_ALLOWED_SENDERS": ",".join(senders),
            "APPLE_FLOW_DEFAULT_WORKSPACE": str(workspace),
            "APPLE_FLOW_MAX_MESSAGES_PER_MINUTE": str(args.messages * 10),
            "APPLE_FLOW_MAX_CONCURRENT_AI_CALLS": str(args.workers),
            "APPLE_FLOW_POLL_INTERVAL_SECONDS": "0.2",
            "APPLE_FLOW_SEND_RETRIES": "0",
            "APPLE_FLOW_WEB_PORT": "0",  # the page on, as users run it, on a free port
            # The shell fake leaves no row in chat.db for a reply, so delivery is not confirmed from it here.
            "APPLE_FLOW_SEND_CONFIRM_SECONDS": "0",
        }
        log_path = tmp / "daemon.log"
        with log_path.open("wb") as log:
            daemon = subprocess.Popen(
                [sys.executable, __file__, "--serve"], env=env, cwd=tmp, stdin=subprocess.DEVNULL,
                stdout=log, stderr=log,
            )
        try:
            result = run(args, senders, chat, sends, daemon, log_path)
        finally:
            if daemon.poll() is None:
                daemon.send_signal(signal.SIGTERM)
                daemon.wait(30)
        result["db"] = tally(tmp / "relay.db")
    text = report(args, result)
    REPORT.parent.mkdir(exist_ok=True)
    REPORT.write_text(text)
    print(text)
    return 0 if result["ok"] else 1


def run(
    args: argparse.Namespace, senders: list[str], chat: Any, sends: Path, daemon: subprocess.Popen[bytes],
    log_path: Path,
) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while READY not in log_path.read_text(errors="replace"):
        if daemon.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"the daemon did not start:\n{log_path.read_text(errors='replace')}")
        time.sleep(0.05)
    process = psutil.Process(daemon.pid)
    rss_idle = process.memory_info().rss
    expected = {s: [f"echo: {s} #{i}" for i in range(args.messages // len(senders))] for s in senders}
    total = sum(len(v) for v in expected.values())

    began = time.monotonic()
    for i in range(total // len(senders)):
        for sender in senders:
            chat.message(f"{sender} #{i}", sender=sender)
    written = time.monotonic() - began
    rss_peak = rss_idle
    with Progress(TextColumn("answering"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=True) as bar:
        task = bar.add_task("answering", total=total)
        done = 0
        while done < total and time.monotonic() - began < args.timeout:
            rss_peak = max(rss_peak, process.memory_info().rss)
            done = count_lines(sends)
            bar.update(task, completed=done)
            time.sleep(0.05)
    drained = time.monotonic() - began
    time.sleep(0.5)  # anything sent twice would arrive now
    rss_end = process.memory_info().rss
    got: dict[str, list[str]] = {s: [] for s in senders}
    for line in sends.read_text().splitlines() if sends.exists() else []:
        recipient, _, text = line.partition("\t")
        got.setdefault(recipient, []).append(text)
    answered = sum(len(v) for v in got.values())
    unique = len({(r, t) for r, texts in got.items() for t in texts})
    in_order = all(got[s] == expected[s] for s in senders)
    return {
        "ok": answered == total and unique == total and in_order,
        "total": total, "answered": answered, "twice": answered - unique, "in_order": in_order,
        "written": written, "drained": drained, "rss_idle": rss_idle, "rss_peak": rss_peak, "rss_end": rss_end,
    }


def count_lines(path: Path) -> int:
    try:
        with path.open("rb") as handle:
            return sum(1 for _ in handle)
    except FileNotFoundError:
        return 0


def tally(db_path: Path) -> dict[str, int]:
    with sqlite3.connect(db_path) as db:
        return dict(db.execute("SELECT state, COUNT(*) FROM messages GROUP BY state").fetchall())


def report(args: argparse.Namespace, r: dict[str, Any]) -> str:
    mb = 1024 * 1024
    verdict = "PASS" if r["ok"] else "FAIL"
    rate = r["total"] / r["drained"]
    return f"""# Daemon burst benchmark ({verdict})

`scripts/bench_daemon --messages {args.messages} --senders {args.senders} --workers {args.workers}`, \
{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} CPUs, Python {sys.version.split()[0]}.

A real `apple-flow run --channel imessage` process; {r['total']} messages from {args.senders} senders written to a
chat.db (real schema, WAL) in a burst; an instant in-process connector (so this measures the daemon: chat.db
reads, the SQLite store, scheduling, and one fake `osascript` process per reply).

| what | result |
|---|---|
| answered | {r['answered']} of {r['total']} |
| answered twice | {r['twice']} |
| order kept per sender | {'yes' if r['in_order'] else 'NO'} |
| burst written in | {r['written']:.2f} s |
| drain time (first message written -> last reply sent) | {r['drained']:.2f} s ({rate:.0f} messages/s) |
| daemon RSS idle / peak / after | {r['rss_idle'] / mb:.1f} / {r['rss_peak'] / mb:.1f} / {r['rss_end'] / mb:.1f} MiB |
| store: messages by state | {', '.join(f'{k} {v}' for k, v in sorted(r['db'].items()))} |
"""


if __name__ == "__main__":
    sys.exit(main())
