"""Benchmark of the daemon: a real `apple-flow run --channel imessage` process on a chat.db with the real Messages
schema, a fake `osascript` on PATH recording the sends, measured three ways.

1. Idle: the daemon (page on) waits for messages for ``--idle`` seconds: its CPU, how often its threads wake
   (voluntary context switches of all its threads, from /proc on Linux: a figure the machine's load does not
   change) and its RSS.
2. Latency: ``--latency`` messages written one at a time (each after the previous reply, after a random pause);
   for each, the time from the row's commit to the agent's start. The agent is a fake `codex` (C, compiled here
   with `cc`; a shell script where there is none) that notes the monotonic clock first thing, run by the real
   codex connector, so this is the daemon's own path: file event, chat.db read, store, scheduling, one spawn.
3. Burst: ``--messages`` from ``--senders`` written as fast as SQLite takes them, answered by an instant
   in-process connector (so the figures are the daemon's own: ingress, store, scheduling, egress). Checks that
   every message is answered exactly once and in order per sender; measures the time to drain and the RSS.
4. Slow confirmation: ``--confirm`` messages from one sender with delivery confirmation on
   (``--confirm-seconds``) and Messages never showing a reply (the fake leaves no row): how long until every reply
   is handed to Messages (the sender's turns do not wait for earlier confirmations) and until each is recorded as
   not delivered.

Writes reports/bench_daemon.md and prints it.

    scripts/bench_daemon [--messages 500] [--senders 5] [--workers 4] [--latency 60] [--idle 60] [--confirm 10]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
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
# The daemon hands the recipient and the text over in private files (their paths in argv, out of the process table):
# the fake reads them back with the shell's own `read` (one line each is all the bench sends), no process more.
FAKE_OSASCRIPT = r"""#!/bin/sh
cat >/dev/null
value() {
    case "${1##*/}" in
        apple-flow-osascript-*) if [ -f "$1" ]; then IFS= read -r v < "$1"; printf %s "$v"; return; fi ;;
    esac
    printf %s "$1"
}
[ -z "$2" ] || printf "%s\t%s\n" "$(value "$2")" "$(value "$3")" >> "$BENCH_SENDS"
"""
# The agent for the latency phase: notes CLOCK_MONOTONIC (time.monotonic() in Python) first thing, then reads its
# prompt and answers. `--version` is the connector's start-up check.
FAKE_CODEX_C = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
int main(int argc, char **argv) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (argc > 1 && strcmp(argv[1], "--version") == 0) { puts("codex-cli 0.0.0 (fake)"); return 0; }
    const char *path = getenv("BENCH_STARTS");
    FILE *out = path ? fopen(path, "a") : NULL;
    if (out) { fprintf(out, "%ld.%09ld\n", (long)now.tv_sec, now.tv_nsec); fclose(out); }
    char buffer[65536];
    while (read(0, buffer, sizeof buffer) > 0) {}
    puts("started");
    return 0;
}
"""
FAKE_CODEX_SH = """#!/bin/sh
[ "$1" = --version ] && { echo "codex-cli 0.0.0 (fake)"; exit 0; }
python3 -c 'import time; print(time.monotonic())' >> "$BENCH_STARTS"
cat >/dev/null
echo started
"""
console = Console(stderr=True)


class InstantConnector:
    """Answers every turn at once with ``echo: <prompt>``: the daemon's cost without an agent's."""

    context_window = 0

    def __init__(self, settings: Any) -> None:
        pass

    def ensure_started(self) -> None:
        pass

    def run(self, request: Any) -> Any:
        from apple_flow.connectors import Status, TurnOutcome
        from apple_flow.connectors.base import EndedTurn

        return EndedTurn(TurnOutcome(Status.ANSWERED, text=f"echo: {request.message}"))

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
    parser.add_argument("--latency", type=int, default=60, help="messages timed one at a time (0: skip)")
    parser.add_argument("--idle", type=float, default=60, help="seconds of idle measurement (0: skip)")
    parser.add_argument("--confirm", type=int, default=10, help="messages of the slow-confirmation phase (0: skip)")
    parser.add_argument("--confirm-seconds", type=float, default=2, help="APPLE_FLOW_SEND_CONFIRM_SECONDS there")
    parser.add_argument("--timeout", type=float, default=300, help="give up after this many seconds")
    parser.add_argument("--report", type=Path, default=REPORT)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve()
        return 0
    from support.chatdb import ChatDbWriter

    senders = [f"+1555010{i:04d}" for i in range(args.senders)]
    result: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-daemon-") as folder:
        tmp = Path(folder)
        bin_dir = tmp / "bin"
        bin_dir.mkdir()
        (bin_dir / "osascript").write_text(FAKE_OSASCRIPT)
        (bin_dir / "osascript").chmod(0o755)
        result["agent"] = make_fake_codex(bin_dir)
        env = {
            **os.environ,
            "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
            "PYTHONPATH": str(ROOT / "src"),
            "APPLE_FLOW_ALLOWED_SENDERS": ",".join(senders),
            "APPLE_FLOW_MAX_MESSAGES_PER_MINUTE": str(args.messages * 10),
            "APPLE_FLOW_MAX_CONCURRENT_AI_CALLS": str(args.workers),
            "APPLE_FLOW_SEND_RETRIES": "0",
            "APPLE_FLOW_WEB_PORT": "0",  # the page on, as users run it, on a free port
            # The shell fake leaves no row in chat.db for a reply, so delivery is not confirmed from it here.
            "APPLE_FLOW_SEND_CONFIRM_SECONDS": "0",
            # An agent sees only the variables its connector declares: the fake codex needs where to note its start.
            "APPLE_FLOW_AGENT_ENVIRONMENT": "BENCH_STARTS",
        }
        if args.idle > 0 or args.latency > 0:
            with daemon_in(tmp / "latency", env, {"APPLE_FLOW_CONNECTOR": "codex-cli",
                                                  "APPLE_FLOW_CODEX_COMMAND": str(bin_dir / "codex")}) as d:
                if args.idle > 0:
                    result["idle"] = measure_idle(d.process, args.idle)
                if args.latency > 0:
                    result["latency"] = measure_latency(d, senders[0], args.latency, ChatDbWriter)
        with daemon_in(tmp / "burst", env, {"APPLE_FLOW_POLL_INTERVAL_SECONDS": "0.2"}, instant=True) as d:
            result.update(run(args, senders, ChatDbWriter(d.chat_db), d.sends, d.process))
        result["db"] = tally(tmp / "burst" / "relay.db")
        if args.confirm > 0:
            confirming = {"APPLE_FLOW_SEND_CONFIRM_SECONDS": f"{args.confirm_seconds:g}",
                          "APPLE_FLOW_POLL_INTERVAL_SECONDS": "0.2"}
            with daemon_in(tmp / "confirm", env, confirming, instant=True) as d:
                result["confirm"] = measure_confirm(args, senders[0], d, ChatDbWriter(d.chat_db),
                                                    tmp / "confirm" / "relay.db")
            result["ok"] = result["ok"] and result["confirm"]["ok"]
    text = report(args, result)
    args.report.parent.mkdir(exist_ok=True)
    args.report.write_text(text)
    print(text)
    return 0 if result["ok"] else 1


@dataclass
class Daemon:
    process: psutil.Process
    chat_db: Path
    sends: Path
    starts: Path


@contextlib.contextmanager
def daemon_in(folder: Path, env: dict[str, str], extra: dict[str, str], instant: bool = False) -> Iterator[Daemon]:
    """A daemon process on a fresh chat.db and store in ``folder``, ready; stopped (SIGTERM) afterwards."""
    from support.chatdb import ChatDbWriter

    folder.mkdir()
    (folder / "ws").mkdir()
    # chat.db in a folder of its own, as in ~/Library/Messages: the store's writes are no chat.db events.
    chat_db = folder / "Messages" / "chat.db"
    ChatDbWriter(chat_db).close()
    env = {
        **env, **extra,
        "BENCH_SENDS": str(folder / "sends.tsv"),
        "BENCH_STARTS": str(folder / "starts.txt"),
        "APPLE_FLOW_MESSAGES_DB_PATH": str(chat_db),
        "APPLE_FLOW_DB_PATH": str(folder / "relay.db"),
        "APPLE_FLOW_DEFAULT_WORKSPACE": str(folder / "ws"),
    }
    log_path = folder / "daemon.log"
    command = [sys.executable, __file__, "--serve"] if instant else [sys.executable, "-m", "apple_flow", "run",
                                                                     "--channel", "imessage"]
    with log_path.open("wb") as log:
        daemon = subprocess.Popen(command, env=env, cwd=folder, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 30
        while READY not in log_path.read_text(errors="replace"):
            if daemon.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the daemon did not start:\n{log_path.read_text(errors='replace')}")
            time.sleep(0.05)
        yield Daemon(psutil.Process(daemon.pid), chat_db, folder / "sends.tsv", folder / "starts.txt")
    finally:
        if daemon.poll() is None:
            daemon.send_signal(signal.SIGTERM)
            daemon.wait(30)


def make_fake_codex(bin_dir: Path) -> str:
    """The fake agent in ``bin_dir``: compiled C, or a shell script where no C compiler is found."""
    target = bin_dir / "codex"
    compiler = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if compiler is not None:
        source = bin_dir / "codex.c"
        source.write_text(FAKE_CODEX_C)
        if subprocess.run([compiler, "-O2", "-o", str(target), str(source)], capture_output=True).returncode == 0:
            return "a fake `codex` in C"
    target.write_text(FAKE_CODEX_SH)
    target.chmod(0o755)
    return "a fake `codex` shell script (no C compiler: its start includes a Python start-up)"


def measure_idle(process: psutil.Process, seconds: float) -> dict[str, float]:
    """CPU (all threads), wake-ups per second (voluntary context switches of all threads) and RSS of the waiting
    daemon, after a short settle."""
    time.sleep(2.0)
    with console.status(f"measuring the idle daemon for {seconds:.0f} s ..."):
        cpu_before, switches_before, wall_before = sum(process.cpu_times()[:2]), wakeups(process), time.monotonic()
        time.sleep(seconds)
        wall = time.monotonic() - wall_before
        cpu = sum(process.cpu_times()[:2]) - cpu_before
        switches = wakeups(process)
    return {
        "cpu": cpu / wall * 100,
        "wakeups": (switches - switches_before) / wall if switches >= 0 and switches_before >= 0 else -1,
        "threads": process.num_threads(),
        "rss": process.memory_info().rss,
        "seconds": wall,
    }


def wakeups(process: psutil.Process) -> int:
    """Voluntary context switches of all the process's threads so far (-1 where /proc does not tell)."""
    total = 0
    try:
        for task in Path(f"/proc/{process.pid}/task").iterdir():
            for line in (task / "status").read_text().splitlines():
                if line.startswith("voluntary_ctxt_switches"):
                    total += int(line.split()[1])
    except OSError:
        return -1
    return total


def measure_latency(daemon: Daemon, sender: str, count: int, writer_class: Any) -> list[float]:
    """Milliseconds from each row's commit to the agent's start, one message at a time."""
    chat = writer_class(daemon.chat_db)
    latencies: list[float] = []
    with Progress(TextColumn("latency"), BarColumn(), MofNCompleteColumn(), console=console, transient=True) as bar:
        task = bar.add_task("latency", total=count)
        for index in range(count):
            started = count_lines(daemon.starts)
            replied = count_lines(daemon.sends)
            chat.message(f"latency #{index}", sender=sender)
            committed = time.monotonic()
            deadline = committed + 10
            while count_lines(daemon.starts) == started:
                if time.monotonic() > deadline:
                    raise SystemExit(f"message {index} did not start its agent within 10 s")
                time.sleep(0.002)
            latencies.append((float(daemon.starts.read_text().split()[started]) - committed) * 1000)
            while count_lines(daemon.sends) == replied and time.monotonic() < deadline:
                time.sleep(0.01)
            bar.advance(task)
            time.sleep(random.uniform(0.05, 0.25))
    chat.close()
    return latencies


def run(
    args: argparse.Namespace, senders: list[str], chat: Any, sends: Path, process: psutil.Process,
) -> dict[str, Any]:
    rss_idle = process.memory_info().rss
    expected = {s: [f"echo: {s} #{i}" for i in range(args.messages // len(senders))] for s in senders}
    total = sum(len(v) for v in expected.values())

    cpu_before = sum(process.cpu_times()[:2])
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
            time.sleep(0.01)
    drained = time.monotonic() - began
    cpu = sum(process.cpu_times()[:2]) - cpu_before
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
        "written": written, "drained": drained, "cpu": cpu,
        "rss_idle": rss_idle, "rss_peak": rss_peak, "rss_end": rss_end,
    }


def measure_confirm(
    args: argparse.Namespace, sender: str, daemon: Daemon, chat: Any, db_path: Path
) -> dict[str, Any]:
    """``--confirm`` messages from one sender, no reply ever confirmed: seconds from the first row written to the
    last reply handed to Messages, and to the last recorded as not delivered."""
    count = args.confirm
    deadline = time.monotonic() + count * args.confirm_seconds + 60
    began = time.monotonic()
    for i in range(count):
        chat.message(f"{sender} #{i}", sender=sender)
    handed = recorded = None
    with console.status(f"{count} replies with confirmation on and never confirmed ..."):
        while time.monotonic() < deadline and recorded is None:
            now = time.monotonic()
            if handed is None and count_lines(daemon.sends) >= count:
                handed = now - began
            if tally(db_path).get("send_failed", 0) >= count:
                recorded = now - began
            time.sleep(0.01)
    chat.close()
    texts = [line.partition("\t")[2] for line in daemon.sends.read_text().splitlines()] if daemon.sends.exists() else []
    in_order = texts == [f"echo: {sender} #{i}" for i in range(count)]
    return {"ok": handed is not None and recorded is not None and in_order, "count": count, "handed": handed,
            "recorded": recorded, "in_order": in_order, "states": tally(db_path)}


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
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    text = f"""# Daemon benchmark ({verdict})

`scripts/bench_daemon --messages {args.messages} --senders {args.senders} --workers {args.workers} \
--latency {args.latency} --idle {args.idle:g}`, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} CPUs,
Python {sys.version.split()[0]}, load average at the end {load}.

Real `apple-flow run --channel imessage` processes on chat.dbs with the real schema (WAL), the page on, a fake
`osascript` recording the sends, delivery confirmation off (the fake writes no row to confirm) but in the
last phase.
"""
    idle = r.get("idle")
    if idle is not None:
        wakeups = f"{idle['wakeups']:.1f} per second" if idle["wakeups"] >= 0 else "not measured here (no /proc)"
        text += f"""
## Idle (page on, no messages, {idle['seconds']:.0f} s)

| what | result |
|---|---|
| CPU | {idle['cpu']:.2f} % |
| wake-ups (voluntary context switches, all {idle['threads']} threads) | {wakeups} |
| RSS | {idle['rss'] / mb:.1f} MiB |
"""
    latencies = r.get("latency")
    if latencies:
        p95 = statistics.quantiles(latencies, n=20)[-1] if len(latencies) >= 20 else max(latencies)
        text += f"""
## Row committed -> agent started ({len(latencies)} messages, one at a time; {r['agent']})

| what | result |
|---|---|
| median | {statistics.median(latencies):.1f} ms |
| p95 | {p95:.1f} ms |
| min / max | {min(latencies):.1f} / {max(latencies):.1f} ms |
"""
    text += f"""
## Burst ({r['total']} messages from {args.senders} senders, instant in-process connector)

Written as fast as SQLite takes them; the instant connector makes this the daemon's own cost: chat.db reads, the
SQLite store, scheduling, and one fake `osascript` process per reply.

| what | result |
|---|---|
| answered | {r['answered']} of {r['total']} |
| answered twice | {r['twice']} |
| order kept per sender | {'yes' if r['in_order'] else 'NO'} |
| burst written in | {r['written']:.2f} s |
| drain time (first message written -> last reply sent) | {r['drained']:.2f} s ({rate:.0f} messages/s) |
| daemon CPU (user + system, its own threads) per message | {r['cpu'] / r['total'] * 1000:.2f} ms |
| daemon RSS idle / peak / after | {r['rss_idle'] / mb:.1f} / {r['rss_peak'] / mb:.1f} / {r['rss_end'] / mb:.1f} MiB |
| store: messages by state | {', '.join(f'{k} {v}' for k, v in sorted(r['db'].items()))} |
"""
    confirm = r.get("confirm")
    if confirm is not None:
        def seconds(value: float | None) -> str:
            return "not within the time allowed" if value is None else f"{value:.2f} s"

        text += f"""
## Slow confirmation ({confirm['count']} messages from one sender, confirmation on, never confirmed)

Delivery confirmation on (`APPLE_FLOW_SEND_CONFIRM_SECONDS={args.confirm_seconds:g}`) and Messages never showing a
reply (the fake leaves no row), as when Messages is slow or broken: each reply's confirmation waits its whole
window, then the reply is recorded as not delivered.

| what | result |
|---|---|
| first message written -> last reply handed to Messages | {seconds(confirm['handed'])} |
| first message written -> last reply recorded as not delivered | {seconds(confirm['recorded'])} |
| replies in order | {'yes' if confirm['in_order'] else 'NO'} |
| store: messages by state | {', '.join(f'{k} {v}' for k, v in sorted(confirm['states'].items()))} |
"""
    return text


if __name__ == "__main__":
    sys.exit(main())
