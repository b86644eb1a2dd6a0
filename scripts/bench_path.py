"""The path of one message through the daemon, traced: from the chat.db row to the sent reply.

A real daemon in this process (the real chat.db ingress on a chat.db with the real schema, the store, the afm
connector running the fake apple-code of the tests, the iMessage egress with a fake ``osascript`` on PATH), wired
as ``apple-flow run`` wires it. For each kind of message (a chat turn, a ``task:`` planning turn, a fast
``status``) one row is written and every call between apple-flow's modules is recorded until the reply is sent
and the cursor has passed the row. Idle machinery is left out: the file watcher, chat.db reads that find no new
row, and the watchdog thread. Progress is sent for every tool call (``progress_interval_seconds=0``), as it is
in a turn long enough to report progress.

Reported per message: the modules it passes through; the calls from one module into another, how many of them
enter a module the message had already been in, and how many resume a generator (a caller pulling the next item:
the runtime pulls the connector's events, the connector the runner's lines); the calls into the store and its
transactions (each named by the tables it wrote); and the calls back up the layers, each named. Layers, top
down: 0 the runtime (``cli``, ``daemon.running``'s loop, workers, ledgers, sending, and the run log, which sends the
progress lines that ride its writes), 1 the orchestrator and the runtime's helpers (scheduler, cursor, progress
throttle), 2 the parts (connectors, channels), 3 beside everything (store, settings, handles). A call from a lower
layer into code of a higher one (a callback, a closure handed down) is a call back up; closures (functions defined
inside another function) called from another module are counted too, whichever way they go.

    scripts/bench_path [--report reports/bench_path.md] [--before REF]

With ``--before REF`` the same walk is traced through the code of commit REF too (by this script, in a
temporary copy), and the report gives each figure before -> after.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import re
import sqlite3
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# The code traced: this checkout's, or (``--code DIR``, how ``--before`` runs this script) another's.
CODE = Path(sys.argv[sys.argv.index("--code") + 1]).resolve() if "--code" in sys.argv[:-1] else ROOT
sys.path[:0] = [str(CODE / "src"), str(CODE / "tests")]

from rich.console import Console  # noqa: E402

FAKE_APPLE_CODE = CODE / "tests" / "support" / "fake_apple_code.py"
FAKE_OSASCRIPT = "#!/bin/sh\ncat >/dev/null\nexit 0\n"
SENDER = "+15551234567"
KINDS = (("chat", "what does app.py do?"), ("task", "task: add a test for app.py"), ("status", "status"))
console = Console(stderr=True)

# Layer of each module (longest matching prefix wins). Unknown apple_flow modules are an error, so a new module
# cannot skew the count unnoticed.
LAYERS: dict[str, int] = {
    "apple_flow.cli": 0,
    "apple_flow.assemble": 0,
    "apple_flow.daemon.running.runtime": 0,
    "apple_flow.daemon.running.jobs": 0,
    "apple_flow.daemon.running.message_jobs": 0,
    "apple_flow.daemon.running.web_jobs": 0,
    "apple_flow.daemon.running.sending": 0,
    "apple_flow.daemon.running.workers": 0,
    "apple_flow.daemon.running.owner_notices": 0,
    "apple_flow.daemon.deciding.orchestrator": 1,
    "apple_flow.daemon.deciding.decisions": 1,
    "apple_flow.daemon.deciding.state_view": 1,
    "apple_flow.daemon.deciding.status_replies": 1,
    "apple_flow.daemon.deciding.conclusion": 1,
    "apple_flow.daemon.deciding.verify_command": 1,
    "apple_flow.daemon.deciding.escalation": 1,
    "apple_flow.daemon.deciding.catch_up": 1,
    "apple_flow.daemon.deciding.commands": 1,
    "apple_flow.daemon.deciding.policy": 1,
    "apple_flow.daemon.deciding.approvals": 1,
    "apple_flow.daemon.deciding.workspaces": 1,
    "apple_flow.daemon.deciding.failures": 1,
    "apple_flow.daemon.history": 1,
    "apple_flow.daemon.running.scheduler": 1,
    "apple_flow.daemon.running.cursor": 1,
    "apple_flow.daemon.running.progress": 1,  # before the run log throttled progress itself
    "apple_flow.daemon.running.turn_runner": 0,  # a turn, and its run log (which sends its progress lines)
    "apple_flow.daemon.running.run_log": 0,  # the run log before it joined the turn's runner (before that: 1)
    "apple_flow.daemon.running.orphans": 1,
    "apple_flow.daemon.running.lock": 1,
    "apple_flow.daemon.deciding.files_to_send": 1,
    "apple_flow.daemon.running.arrivals": 1,
    "apple_flow.daemon.deciding.reports": 1,
    "apple_flow.connectors": 2,
    "apple_flow.channels": 2,
    "apple_flow.daemon.store": 3,
    "apple_flow.config": 3,
    "apple_flow.sections": 3,
    "apple_flow.check_result": 3,
    "apple_flow.handles": 3,
    "apple_flow.paths": 3,
    "apple_flow.regularfile": 3,
    "apple_flow.privatefile": 3,
    "apple_flow.host": 3,
    "apple_flow.times": 3,
    "apple_flow.filelimit": 3,
    "apple_flow.app_bundle": 3,
    "apple_flow.login_service": 3,
    "apple_flow.health": 0,
    "apple_flow.sizes": 3,
}
# The daemon's modules before its split into deciding/ and running/ (``--before`` a commit of then), in the layer
# of what they became.
LAYERS.update({
    "apple_flow.daemon.runtime": 0, "apple_flow.daemon.work": 0, "apple_flow.daemon.message_work": 0,
    "apple_flow.daemon.web_work": 0, "apple_flow.daemon.outbound": 0, "apple_flow.daemon.turns": 0,
    "apple_flow.daemon.owner_notices": 0, "apple_flow.daemon.orchestrator": 1, "apple_flow.daemon.decisions": 1,
    "apple_flow.daemon.state_view": 1, "apple_flow.daemon.status_replies": 1, "apple_flow.daemon.conclusion": 1,
    "apple_flow.daemon.checks": 1, "apple_flow.daemon.escalation": 1, "apple_flow.daemon.catch_up": 1,
    "apple_flow.daemon.commands": 1, "apple_flow.daemon.policy": 1, "apple_flow.daemon.approvals": 1,
    "apple_flow.daemon.workspaces": 1, "apple_flow.daemon.failures": 1, "apple_flow.daemon.scheduler": 1,
    "apple_flow.daemon.cursor": 1, "apple_flow.daemon.progress": 1, "apple_flow.daemon.run_log": 1,
    "apple_flow.daemon.orphans": 1, "apple_flow.daemon.lock": 1, "apple_flow.daemon.outbox": 1,
    "apple_flow.daemon.arrivals": 1, "apple_flow.daemon.reports": 1,
})
# Packages counted as one module: the store's tables and its database are one part (calls among them are not calls
# between modules).
UNITS = ("apple_flow.daemon.store",)
IDLE_MODULES = ("apple_flow.channels.imessage.watcher",)
IDLE_THREADS = ("watchdog",)
GENERATOR_FLAGS = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR


def layer(module: str) -> int:
    best = max((prefix for prefix in LAYERS if module == prefix or module.startswith(prefix + ".")), key=len,
               default=None)
    if best is None:
        raise SystemExit(f"bench_path: module {module} has no layer; add it to LAYERS")
    return LAYERS[best]


def unit(module: str) -> str:
    return next((package for package in UNITS if module.startswith(package + ".")), module)


def short(module: str) -> str:
    return module.removeprefix("apple_flow.")


@dataclass
class Call:
    caller: str  # module
    callee: str  # module
    where: str  # caller function -> callee function
    resumed: bool = False  # a generator resumed for its next item (pulled), not a new call


@dataclass
class Trace:
    """Cross-module calls recorded while ``on`` is set, per thread, leaving out idle machinery."""

    on: bool = False
    calls: list[Call] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    local: threading.local = field(default_factory=threading.local)
    # Generator frames already started (kept, so an id is not reused while they live): a later call event on one
    # is a resumption.
    generators: dict[int, FrameType] = field(default_factory=dict)

    def profile(self, frame: FrameType, event: str, arg: Any) -> None:
        if event not in ("call", "return"):
            return
        state = self.local.__dict__.setdefault("state", {"idle": 0, "buffers": []})
        code = frame.f_code
        module = unit(frame.f_globals.get("__name__", ""))
        if not module.startswith("apple_flow") or code.co_filename.startswith("<"):
            return
        idle_frame = module in IDLE_MODULES
        reads_rows = code.co_name == "rows_after" and module.endswith("chatdb")
        if event == "return":
            if idle_frame:
                state["idle"] -= 1
            elif reads_rows and state["buffers"]:
                kept = state["buffers"].pop()
                if arg:  # rows were read: part of a message's path
                    self._keep(state, kept)
            return
        if idle_frame:
            state["idle"] += 1
            return
        if state["idle"] or not self.on or threading.current_thread().name.startswith(IDLE_THREADS):
            return
        caller = frame.f_back
        while caller is not None and caller.f_code.co_filename.startswith("<"):
            caller = caller.f_back
        caller_module = unit(caller.f_globals.get("__name__", "")) if caller is not None else ""
        if reads_rows:
            state["buffers"].append([])
        resumed = False
        if code.co_flags & GENERATOR_FLAGS:
            resumed = id(frame) in self.generators
            self.generators[id(frame)] = frame
        if caller_module.startswith("apple_flow") and caller_module != module:
            assert caller is not None
            where = f"{caller.f_code.co_qualname} -> {code.co_qualname}"
            self._keep(state, [Call(caller_module, module, where, resumed)])

    def _keep(self, state: dict[str, Any], calls: list[Call]) -> None:
        if state["buffers"]:
            state["buffers"][-1].extend(calls)
        else:
            with self.lock:
                self.calls.extend(calls)


@dataclass
class Figures:
    kind: str
    modules: list[str]
    calls: int
    resumptions: int
    reentries: int
    store_calls: int
    transactions: Counter[str]  # tables each transaction wrote ("messages+cursor") -> how many
    up: Counter[str]
    closures: Counter[str]


def figures(kind: str, calls: list[Call], transactions: Counter[str]) -> Figures:
    seen: list[str] = []
    reentries = 0
    for call in calls:
        if call.callee in seen:
            reentries += 1
        else:
            seen.append(call.callee)
    modules = list(dict.fromkeys(m for call in calls for m in (call.caller, call.callee)))
    up = Counter(
        f"{short(c.caller)} -> {short(c.callee)}: {c.where}" for c in calls if layer(c.callee) < layer(c.caller)
    )
    closures = Counter(
        f"{short(c.caller)} -> {short(c.callee)}: {c.where}" for c in calls if "<locals>" in c.where.split(" -> ")[1]
    )
    store_calls = sum(1 for c in calls if c.callee == "apple_flow.daemon.store")
    resumptions = sum(1 for c in calls if c.resumed)
    return Figures(kind, modules, len(calls), resumptions, reentries, store_calls, transactions, up, closures)


class Transactions:
    """The store's transactions, each named by the tables it wrote, from the statements SQLite runs."""

    WRITE = re.compile(r"^(?:INSERT(?: OR \w+)? INTO|UPDATE|DELETE FROM)\s+(\w+)", re.IGNORECASE)

    def __init__(self) -> None:
        self.written: Counter[str] = Counter()
        self._tables: list[str] | None = None

    def statement(self, sql: str) -> None:
        word = sql.split(maxsplit=1)[0].upper() if sql.strip() else ""
        if word == "BEGIN":
            self._tables = []
        elif word in ("COMMIT", "ROLLBACK") and self._tables is not None:
            self.written["+".join(self._tables) or "nothing"] += 1
            self._tables = None
        elif self._tables is not None and (match := self.WRITE.match(sql.strip())) and match[1] not in self._tables:
            self._tables.append(match[1])

    def clear(self) -> None:
        self.written.clear()


def install(source: Path, target: Path) -> Path:
    body = source.read_text(encoding="utf-8").split("\n", 1)[1]
    target.write_text(f"#!{sys.executable}\n{body}", encoding="utf-8")
    target.chmod(target.stat().st_mode | stat.S_IXUSR)
    return target


def build_daemon(settings: Any, store: Any) -> Any:
    """The daemon as ``apple-flow run --channel imessage`` builds it."""
    try:
        from apple_flow.assemble import assemble
    except ImportError:  # before the composition root: the runtime built its own parts
        pass
    else:
        return assemble(settings, store, "imessage")
    from apple_flow.channels.imessage import build_imessage_channel
    from apple_flow.connectors import build_connector
    try:
        from apple_flow.daemon.running import runtime
    except ImportError:  # before daemon/ was split into deciding/ and running/
        from apple_flow.daemon import runtime  # type: ignore[no-redef]

    connector = build_connector(settings)
    # The store's record of sent texts (before its split into tables: ``store.sent_texts``).
    sent = store.sent.for_channel if hasattr(store, "sent") else store.sent_texts
    imessage = getattr(settings, "imessage", settings)  # its own section since the settings' split
    window = imessage.echo_window_seconds
    try:  # the copies the ingress took, kept in the daemon's store as `apple-flow run` kept them
        from apple_flow.channels.imessage.copies import CopyTable
    except ImportError:  # before the copies were kept
        ingress, egress = build_imessage_channel(settings, sent("imessage", window))
    else:
        ingress, egress = build_imessage_channel(settings, sent("imessage", window), CopyTable(store.db, "imessage"))
    made = getattr(runtime, "Runtime", None) or runtime.Daemon  # named Daemon before the renames
    return made(settings, store, connector, ingress, egress, "imessage")


def wait(condition: Any, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"bench_path: timed out waiting for {what}")
        time.sleep(0.01)


def measure() -> list[Figures]:
    from apple_flow.config import load_settings
    from apple_flow.daemon.store import Store
    from support.chatdb import ChatDbWriter

    with tempfile.TemporaryDirectory(prefix="bench-path-") as folder:
        tmp = Path(folder)
        (tmp / "bin").mkdir()
        (tmp / "bin" / "osascript").write_text(FAKE_OSASCRIPT)
        (tmp / "bin" / "osascript").chmod(0o755)
        os.environ["PATH"] = f"{tmp / 'bin'}{os.pathsep}{os.environ['PATH']}"
        os.environ["FAKE_APPLE_CODE_MODE"] = "answer"
        workspace = tmp / "ws"
        workspace.mkdir()
        chat = ChatDbWriter(tmp / "chat.db")
        settings = load_settings(
            env_file=None, afm_command=str(install(FAKE_APPLE_CODE, tmp / "bin" / "apple-code")),
            default_workspace=workspace, allowed_workspaces=[workspace], allowed_senders=[SENDER],
            messages_db_path=chat.path, db_path=tmp / "relay.db", poll_interval_seconds=60,
            progress_interval_seconds=0,  # the fake's two tool calls go out as progress, as in a long turn
            send_confirm_seconds=0,  # the shell fake leaves no row in chat.db to confirm a reply by
        )
        store = Store(settings.db_path)
        transactions = Transactions()
        if hasattr(store, "cursors"):
            cursors = store.cursors  # its methods were named ``set`` ... before each table's names became its own
            (cursors.set_cursor if hasattr(cursors, "set_cursor") else cursors.set)("imessage", 0)
            store.db.trace(transactions.statement)
        else:  # before the store's split
            store.set_cursor("imessage", 0)
            store._db.set_trace_callback(transactions.statement)
        trace = Trace()
        threading.setprofile(trace.profile)  # before the daemon starts its worker threads
        daemon = build_daemon(settings, store)
        runner = threading.Thread(target=daemon.run, name="daemon", daemon=True)
        runner.start()
        wait(daemon.ready.is_set, "the daemon to start")
        time.sleep(0.5)  # the ingress reaches its wait
        results = []
        state = sqlite3.connect(settings.db_path)
        for kind, text in KINDS:
            trace.calls.clear()
            transactions.clear()
            trace.on = True
            rowid = chat.message(text, sender=SENDER)
            wait(lambda rowid=rowid: state.execute(  # type: ignore[misc]
                "SELECT last_rowid FROM cursor WHERE channel = 'imessage'").fetchone()[0] >= rowid, f"{kind}'s reply")
            trace.on = False
            found = state.execute("SELECT state FROM messages WHERE rowid = ?", (rowid,)).fetchone()
            assert found == ("sent",), found
            time.sleep(0.3)  # calls still running on other threads are done
            results.append(figures(kind, list(trace.calls), Counter(transactions.written)))
        daemon.request_stop()
        runner.join(30)
        threading.setprofile(None)  # type: ignore[arg-type]
        state.close()
        chat.close()
    return results


ROWS: tuple[tuple[str, Any], ...] = (
    ("modules passed through", lambda f: len(f.modules)),
    ("calls between modules", lambda f: f.calls),
    ("... of which into a module already visited", lambda f: f.reentries),
    ("... of which resume a generator (the caller pulls its next item)", lambda f: f.resumptions),
    ("calls into the store", lambda f: f.store_calls),
    ("store transactions", lambda f: f.transactions.total()),
    ("calls back up the layers", lambda f: sum(f.up.values())),
    ("closures called from another module", lambda f: sum(f.closures.values())),
)


def to_json(results: list[Figures]) -> str:
    return json.dumps([{**vars(f), "transactions": dict(f.transactions), "up": dict(f.up),
                        "closures": dict(f.closures)} for f in results])


def from_json(text: str) -> list[Figures]:
    found = []
    for item in json.loads(text):
        counted = {key: Counter(item[key]) for key in ("transactions", "up", "closures")}
        found.append(Figures(**{**item, **counted}))
    return found


def measure_before(ref: str) -> list[Figures]:
    """The same walk through the code of ``ref`` (a commit of this repository), traced by this script."""
    with tempfile.TemporaryDirectory(prefix="bench-path-before-") as folder:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref], capture_output=True, check=False)
        if archive.returncode != 0:
            raise SystemExit(f"bench_path: cannot read {ref}: {archive.stderr.decode().strip()}")
        subprocess.run(["tar", "-x", "-C", folder], input=archive.stdout, check=True)
        done = subprocess.run([sys.executable, __file__, "--code", folder, "--json"], capture_output=True, text=True,
                              check=False)
        if done.returncode != 0:
            raise SystemExit(f"bench_path: tracing {ref} failed:\n{done.stderr.strip()}")
        return from_json(done.stdout)


def report(results: list[Figures], before: list[Figures] | None = None, ref: str = "") -> str:
    head = "| | " + " | ".join(f.kind for f in results) + " |"

    def cell(index: int, value: Any) -> str:
        return str(value(results[index])) if before is None else f"{value(before[index])} -> {value(results[index])}"

    rows = [(name, [cell(i, value) for i in range(len(results))]) for name, value in ROWS]
    table = "\n".join([head, "|---" * (len(results) + 1) + "|"] + [f"| {n} | " + " | ".join(v) + " |" for n, v in rows])
    if before is not None:
        table = f"Before ({ref}) -> after (this checkout):\n\n{table}"
    details = []
    for f in results:
        details.append(f"**{f.kind}**: " + " -> ".join(short(m) for m in f.modules))
        details.append("- transactions (tables written): " + ", ".join(
            f"{tables} {count}" for tables, count in sorted(f.transactions.items(), key=lambda item: -item[1])))
        for where, count in sorted(f.up.items()):
            details.append(f"- up: `{where}`" + (f" ({count}x)" if count > 1 else ""))
        for where, count in sorted(f.closures.items()):
            details.append(f"- closure: `{where}`" + (f" ({count}x)" if count > 1 else ""))
    return (
        f"# The path of one message (scripts/bench_path)\n\n{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, Python "
        f"{sys.version.split()[0]}. One message of each kind from a chat.db row to the sent reply, traced in a "
        "real daemon (chat.db ingress, store, afm connector with the tests' fake apple-code, iMessage egress with "
        f"a fake osascript).\n\n{table}\n\n" + "\n".join(details) + "\n"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--report", type=Path, default=ROOT / "reports" / "bench_path.md")
    parser.add_argument("--before", metavar="REF", help="also trace commit REF and report both, before -> after")
    parser.add_argument("--code", type=Path, help=argparse.SUPPRESS)  # trace another tree (see CODE)
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)  # figures as JSON, no report
    args = parser.parse_args()
    if args.json:
        print(to_json(measure()))
        return 0
    before = None
    if args.before:
        with console.status(f"tracing one message of each kind through {args.before}"):
            before = measure_before(args.before)
    with console.status("tracing one message of each kind"):
        results = measure()
    text = report(results, before, args.before or "")
    args.report.parent.mkdir(parents=True, exist_ok=True)
    args.report.write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
