"""A newcomer's first session with the console demo, measured: the daemon (`apple-flow run --channel console`, the
demo profile, as ./scripts/run.sh starts it on Linux) on the real local model servers, as run.sh starts them: one for
chat (``--local-model``, by default Qwen2.5-Coder-0.5B) and one for approved tasks (``--task-model``, by default the
1.5B; "" for none), on llama.cpp.

A fixed session, the kind a newcomer types first, is typed into the daemon one message at a time, each after the
reply to the one before; per message it records the time to the reply, the outcome the daemon recorded for the turn
(answered, timed out, no model, failed, ...; commands have none), and for the questions with a checkable answer
whether the answer holds. Every agent reply is also checked for words of ours (apple-code's instructions, the
headings it puts around tool results and history), which a small model tends to echo. Each session starts a
fresh daemon (new database, new copy of examples/workspace); the model servers run for all of them.

Targets: no "no model available", no turn stopped by the timeout, median reply under 10 s on
two cores. Not a test: the figures go to reports/bench_demo.md, whatever they are.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import psutil  # noqa: E402
from bench_support import free_port, write_report  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.progress import Progress  # noqa: E402

from apple_flow.config import DEMO_PROFILE  # noqa: E402
from apple_flow.localmodel import (  # noqa: E402
    DEFAULT_MODEL,
    DEFAULT_TASK_MODEL,
    LocalModelError,
    LocalModelServer,
    model_named,
)

WORKSPACE = ROOT / "examples" / "workspace"
APPLE_CODE = ROOT / "apple_code" / ".build" / "debug" / "apple-code"
MEDIAN_TARGET_S = 10.0
TASK_TARGET_S = 120.0  # an approved task, planned before: fixed and checked
REPLY_WAIT_S = 300.0  # a reply later than this counts as none (the demo profile stops a turn long before)

# Words of ours a reply must not carry: apple-code's built-in instructions, the heading of a tool result folded
# into a user message, the note on a repeated call, the daemon's history framing, and the follow-up wording
# SmolLM2 echoed before.
OUR_WORDS = (
    "You are apple-code", "a coding agent in one workspace", "Use the tools to look before answering",
    "readFile before editFile", "Result of ", "earlier result, not run again", "Earlier conversation (for context)",
    "New message:", "answer in plain words", "without calling tools",
)
FILE_NAME = re.compile(r"\b[\w.-]+\.(?:py|md|txt|json|toml|yaml|yml|js|ts|sh|cfg|ini|csv|html|swift)\b", re.I)


@dataclass(frozen=True)
class Check:
    name: str
    holds: Callable[[str, Path], bool]


def names_real_files_only(reply: str, workspace: Path) -> bool:
    """Names at least one file that is in the workspace and none that is not."""
    named = {match.group(0) for match in FILE_NAME.finditer(reply)}
    real = {path.name for path in workspace.iterdir()}
    return bool(named & real) and named <= real


def says_what_the_project_is(reply: str, workspace: Path) -> bool:
    """README.md: 'Example workspace. A tiny project for trying apple-flow on any machine'."""
    return any(word in reply.lower() for word in ("example", "apple-flow", "trying", "tiny project"))


def says_what_greet_prints(reply: str, workspace: Path) -> bool:
    return "hello, world" in reply.lower()


def lists_commands(reply: str, workspace: Path) -> bool:
    return "task:" in reply and "approve" in reply


def asks_for_approval(reply: str, workspace: Path) -> bool:
    return re.search(r"approve req_[0-9a-f]{8}", reply) is not None


def reports_status(reply: str, workspace: Path) -> bool:
    return bool(reply.strip())


def tally_tests_pass(reply: str, workspace: Path) -> bool:
    """The example's failing test (tally.py's one-line bug) passes now: run, not taken from the reply, and the
    example's own test file (a run that changed the test to pass does not count)."""
    if not (workspace / "tally.py").is_file():
        return False
    with tempfile.TemporaryDirectory(prefix="tally-check-") as tmp:
        shutil.copy(workspace / "tally.py", tmp)
        shutil.copy(WORKSPACE / "test_tally.py", tmp)
        done = subprocess.run([sys.executable, "-B", "-m", "unittest", "-q", "test_tally"], cwd=tmp,
                              capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    return done.returncode == 0


@dataclass(frozen=True)
class Message:
    text: str
    check: Check | None = None


# The session (hi, the files, help, the README, a task, status), with one more question whose answer
# is in a file (greet.py), and the first real task: the example's failing test, planned, approved ({approval} is the
# id the plan's reply gave), fixed and checked.
SESSION = (
    Message("hi"),
    Message("what files are in the workspace?", Check("names a file that is there, invents none",
                                                      names_real_files_only)),
    Message("help", Check("lists the commands", lists_commands)),
    Message("read README.md and tell me what this project is", Check("says it is an example/apple-flow project",
                                                                     says_what_the_project_is)),
    Message("what does greet.py print?", Check('says "Hello, world"', says_what_greet_prints)),
    Message('task: add a line "hello" to notes.txt', Check("a plan and an approval id", asks_for_approval)),
    Message("status", Check("answers", reports_status)),
    Message("task: make test fails; fix the bug in tally.py", Check("a plan and an approval id", asks_for_approval)),
    Message("approve {approval}", Check("tally.py fixed: make test passes", tally_tests_pass)),
)
APPROVAL_ID = re.compile(r"req_[0-9a-f]{8}")


@dataclass
class Reply:
    session: int
    message: Message
    seconds: float | None
    outcome: str
    text: str
    holds: bool | None
    echoes: list[str] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)
    results: list[str] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)


def daemon_env(folder: Path, workspace: Path, url: str, overrides: dict[str, str],
               apple_code: Path = APPLE_CODE) -> dict[str, str]:
    """The environment run.sh gives the daemon on Linux, with the database and workspace in ``folder``, and the
    settings of ``--set``."""
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith(("APPLE_FLOW_", "APPLE_CODE_"))}
    env.update({
        "APPLE_FLOW_AFM_COMMAND": str(apple_code),
        "APPLE_FLOW_AFM_BACKEND": "openai",
        "APPLE_FLOW_AFM_BASE_URL": url,
        "APPLE_FLOW_PROFILE": "demo",
        "APPLE_FLOW_DEFAULT_WORKSPACE": str(workspace),
        "APPLE_FLOW_DB_PATH": str(folder / "relay.db"),
        "APPLE_FLOW_WEB_ENABLED": "false",
        "HOME": str(folder / "home"),
    })
    env.update(overrides)
    return env


def describe(kind: str, body: str) -> str:
    """A run event in a few words: ``tool_call:NAME {arguments}`` or ``notice:MESSAGE``."""
    try:
        event = json.loads(body)
    except ValueError:
        return f"{kind}:{body}"
    if kind == "tool_call":
        return f"tool_call:{event.get('name')} {json.dumps(event.get('arguments'), ensure_ascii=False)}"
    if kind == "result":
        return f"result:{event.get('num_turns')} model request(s)"
    return f"notice:{event.get('message', body)}"


class Session:
    """One daemon on the console channel, fed one message at a time; replies read from its database."""

    def __init__(self, folder: Path, url: str, overrides: dict[str, str], apple_code: Path) -> None:
        self.folder = folder
        self.workspace = folder / "workspace"
        shutil.copytree(WORKSPACE, self.workspace)
        (folder / "home").mkdir()
        self.db = folder / "relay.db"
        self.log = open(folder / "daemon.log", "w")  # noqa: SIM115 - closed in close()
        self.process = subprocess.Popen(
            [str(ROOT / ".venv" / "bin" / "apple-flow"), "run", "--channel", "console"],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=self.log, text=True, cwd=folder,
            env=daemon_env(folder, self.workspace, url, overrides, apple_code), start_new_session=True,
        )
        self.sent = 0

    def ask(self, text: str) -> tuple[float | None, str, str, list[str]]:
        """Sends ``text``; returns the seconds to its reply (None: none came), the reply, the outcome, and the
        run's events (tool calls, notices)."""
        assert self.process.stdin is not None
        self.process.stdin.write(text + "\n")
        self.process.stdin.flush()
        self.sent += 1
        started = time.monotonic()
        while time.monotonic() - started < REPLY_WAIT_S:
            found = self._reply(self.sent)
            if found is not None:
                seconds = time.monotonic() - started
                return (seconds, *found)
            if self.process.poll() is not None:
                return None, "", "daemon exited", []
            time.sleep(0.05)
        return None, "", "no reply", []

    def _reply(self, rowid: int) -> tuple[str, str, list[str]] | None:
        if not self.db.exists():
            return None
        try:
            with contextlib.closing(sqlite3.connect(f"file:{self.db}?mode=ro", uri=True, timeout=5)) as db:
                row = db.execute(
                    "SELECT channel, state, reply FROM messages WHERE channel LIKE 'console:%' AND rowid = ?",
                    (rowid,),
                ).fetchone()
                if row is None or row[1] not in ("sent", "send_failed", "ignored"):
                    return None
                channel, _, reply = row
                run = db.execute(
                    "SELECT id, outcome FROM runs WHERE message = ? ORDER BY started_at DESC LIMIT 1",
                    (f"{channel}:{rowid}",),
                ).fetchone()
                if run is None:
                    return reply or "", "command", []
                events = [describe(kind, body) for kind, body in db.execute(
                    "SELECT type, body FROM run_events WHERE run_id = ? AND type IN ('tool_call', 'notice', 'result') "
                    "ORDER BY seq", (run[0],))]
                return reply or "", run[1] or "unknown", events
        except sqlite3.Error:
            return None  # the daemon is writing; look again

    def cpu_seconds(self) -> tuple[float, float]:
        """CPU seconds so far of the daemon itself and of its finished children (the apple-code runs)."""
        try:
            times = psutil.Process(self.process.pid).cpu_times()
        except psutil.Error:
            return 0.0, 0.0
        return times.user + times.system, times.children_user + times.children_system

    def close(self) -> None:
        if self.process.stdin is not None:
            with contextlib.suppress(OSError):
                self.process.stdin.close()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)
        self.log.close()


def run_session(number: int, folder: Path, url: str, overrides: dict[str, str], apple_code: Path,
                on_reply: Callable[[Reply], None], cpu: dict[str, float]) -> list[Reply]:
    """The session's replies; the CPU seconds of its daemon and apple-code runs are added to ``cpu``."""
    session = Session(folder, url, overrides, apple_code)
    replies = []
    try:
        approval = ""
        for message in SESSION:
            seconds, text, outcome, events = session.ask(message.text.replace("{approval}", approval))
            found = APPROVAL_ID.search(text)
            approval = found.group(0) if found else approval
            agent = outcome != "command"
            echoes = [w for w in OUR_WORDS if w.lower() in text.lower()] if agent else []
            holds = message.check.holds(text, session.workspace) if message.check and seconds is not None else None
            reply = Reply(number, message, seconds, outcome, text, holds, echoes,
                          calls=[e.split(":", 1)[1] for e in events if e.startswith("tool_call:")],
                          notices=[e.split(":", 1)[1] for e in events if e.startswith("notice:")],
                          results=[e.split(":", 1)[1] for e in events if e.startswith("result:")])
            replies.append(reply)
            on_reply(reply)
        daemon, children = session.cpu_seconds()
        cpu["daemon"] = cpu.get("daemon", 0.0) + daemon
        cpu["apple-code"] = cpu.get("apple-code", 0.0) + children
    finally:
        session.close()
    return replies


PERF = re.compile(r"llama_perf_context_print:\s+(prompt eval|eval) time =\s+([\d.]+) ms /\s+(\d+) (?:tokens|runs)")


def server_work(log: Path) -> dict[str, tuple[float, int]]:
    """From llama.cpp's timing lines in the server log: seconds and tokens of prompt processing and of generation,
    summed over every completion it finished."""
    totals = {"prompt eval": (0.0, 0), "eval": (0.0, 0)}
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return totals
    for kind, ms, count in PERF.findall(text):
        seconds, tokens = totals[kind]
        totals[kind] = (seconds + float(ms) / 1000, tokens + int(count))
    return totals


def server_cpu(server: LocalModelServer) -> float:
    """CPU seconds the model server (with its children) has used so far."""
    pid = server.status().pid
    if pid is None:
        return 0.0
    try:
        process = psutil.Process(pid)
        return sum(sum(p.cpu_times()[:2]) for p in [process, *process.children(recursive=True)])
    except psutil.Error:
        return 0.0


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def one_line(text: str, limit: int = 90) -> str:
    flat = " ".join(text.split()).replace("|", "\\|")
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def load_sentence(loads: list[tuple[float, float, float]]) -> str:
    """How busy the machine was: the times are only comparable with the load they were taken under."""
    text = ", ".join(f"{one:.1f}" for one, _, _ in loads)
    if max((one for one, _, _ in loads), default=0.0) > (os.cpu_count() or 1):
        return (f"**The machine was shared with other work while this ran** (load average, 1 min, at each "
                f"session's start: {text}), so the times are slower than an idle machine would give.")
    return f"The machine was otherwise idle (load average, 1 min, at each session's start: {text})."


def report(replies: list[Reply], sessions: int, loads: list[tuple[float, float, float]], wall: float,
           work: dict[str, tuple[float, int]], cpu: dict[str, float], overrides: dict[str, str],
           apple_code: Path, model_title: str) -> str:
    approved = [r for r in replies if r.message.text.startswith("approve")]
    fixed_in_time = [r for r in approved if r.holds and r.seconds is not None and r.seconds <= TASK_TARGET_S]
    task_times = ", ".join(f"{r.seconds:.0f} s" if r.seconds is not None else "no reply" for r in approved)
    agent = [r for r in replies if r.outcome != "command" and r not in approved]
    times = [r.seconds for r in replies if r.seconds is not None]
    agent_times = [r.seconds for r in agent if r.seconds is not None]
    outcomes = Counter(r.outcome for r in replies)
    no_model = sum(r.outcome == "no_model" or "no model" in r.text.lower() for r in replies)
    timed_out = sum(r.outcome == "timed_out" for r in replies)
    echoes = [r for r in agent if r.echoes]
    median = statistics.median(agent_times) if agent_times else float("nan")
    p90 = percentile(agent_times, 0.9) if agent_times else float("nan")
    slowest = max(agent_times) if agent_times else float("nan")
    # A `task:` reply is a plan (on the task model when one is served), not chat: the 10 s target is chat's.
    chat_times = [r.seconds for r in agent if r.seconds is not None and not r.message.text.startswith("task:")]
    plan_times = [r.seconds for r in agent if r.seconds is not None and r.message.text.startswith("task:")]
    chat_median = statistics.median(chat_times) if chat_times else float("nan")
    chat_p90 = percentile(chat_times, 0.9) if chat_times else float("nan")
    plans = (f"{statistics.median(plan_times):.1f} / {max(plan_times):.1f}" if plan_times else "none")
    rows = []
    for r in replies:
        seconds = f"{r.seconds:.1f}" if r.seconds is not None else "-"
        check = "" if r.holds is None else ("yes" if r.holds else "**no**")
        notes = []
        notes += [one_line(call, 50) for call in r.calls]
        notes += [one_line(n, 60) for n in r.results]
        notes += [one_line(n, 60) for n in r.notices]
        if r.echoes:
            notes.append("**echoes our words**: " + ", ".join(f"'{w}'" for w in r.echoes))
        rows.append(f"| {r.session} | `{one_line(r.message.text, 50)}` | {seconds} | {r.outcome} | {check} | "
                    f"{one_line(r.text)} | {'; '.join(notes)} |")
    checks = []
    for message in SESSION:
        if message.check is None:
            continue
        results = [r.holds for r in replies if r.message == message and r.holds is not None]
        checks.append(f"| `{message.text}` | {message.check.name} | {sum(results)} of {len(results)} |")
    (prompt_s, prompt_tokens), (eval_s, eval_tokens) = work["prompt eval"], work["eval"]
    work_text = (f"prompt processing {prompt_s:.0f} s for {prompt_tokens} tokens; generation {eval_s:.0f} s for "
                 f"{eval_tokens} tokens")
    cpu_text = "; ".join(f"{name} {seconds:.1f} s" for name, seconds in cpu.items())
    verdicts = [
        f"no 'no model available': {'met' if no_model == 0 else f'MISSED ({no_model})'}",
        f"no turn stopped by the timeout: {'met' if timed_out == 0 else f'MISSED ({timed_out})'}",
        f"median chat reply under {MEDIAN_TARGET_S:.0f} s: {'met' if chat_median < MEDIAN_TARGET_S else 'MISSED'} "
        f"({chat_median:.1f} s; p90 {chat_p90:.1f} s; with the task plans {median:.1f} s)",
        f"the approved task on the example's failing test fixed and checked within {TASK_TARGET_S:.0f} s: "
        f"{'met' if approved and len(fixed_in_time) == len(approved) else 'MISSED'} ({len(fixed_in_time)} of "
        f"{len(approved)}; {task_times or 'not run'})",
    ]
    binary = ("the debug build of apple-code as run.sh uses it" if apple_code == APPLE_CODE
              else f"apple-code {apple_code}")
    return f"""# A newcomer's first session on the console demo (scripts/bench_demo)

{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {platform.system()} {platform.machine()}, {os.cpu_count()} CPUs, Python
{platform.python_version()}. {sessions} session(s) of {len(SESSION)} messages, {wall:.0f} s in all. The daemon
(`apple-flow run --channel console`) with the demo profile ({', '.join(f'{k}={v}' for k, v in DEMO_PROFILE.items())}){
f"; set for this run: {', '.join(f'{k}={v}' for k, v in overrides.items())}" if overrides else ""},
{binary}, {model_title} on llama-cpp-python's server (apple_flow.localmodel.serve); a fresh daemon,
database and copy of examples/workspace per session, the same servers for all. {load_sentence(loads)}

## Targets

- {verdicts[0]}
- {verdicts[1]}
- {verdicts[2]}
- {verdicts[3]}

## Figures

| measure | figure |
|---|---|
| replies | {len(times)} of {len(replies)} messages |
| outcomes | {', '.join(f'{name} {count}' for name, count in outcomes.most_common())} |
| agent turns: median / p90 / max seconds to the reply | {median:.1f} / {p90:.1f} / {slowest:.1f} |
| ... chat replies (not `task:`): median / p90 | {chat_median:.1f} / {chat_p90:.1f} |
| ... task plans (`task:`): median / max | {plans} |
| all messages (commands too): median seconds | {statistics.median(times) if times else float('nan'):.1f} |
| agent replies that echo words of ours | {len(echoes)} of {len(agent)} |
| agent turns with a repeated-call or answer-request notice | {sum(bool(r.notices) for r in agent)} of {len(agent)} |
| the server's work (llama.cpp timings, completions it finished) | {work_text} |
| CPU seconds used, in all (wall time {wall:.0f} s) | {cpu_text} |

## Checkable answers (hit rates)

| message | the answer holds when it | held |
|---|---|---|
{chr(10).join(checks)}

## Every message

| session | message | seconds | outcome | holds | reply (start) | what the run did |
|---|---|---|---|---|---|---|
{chr(10).join(rows)}
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=3, help="sessions to run (default 3)")
    parser.add_argument("--local-model", default=DEFAULT_MODEL, help="the model to serve (apple-flow model list)")
    parser.add_argument("--task-model", default=DEFAULT_TASK_MODEL,
                        help='the model approved tasks run on, served beside the first ("": the same server)')
    parser.add_argument("--report", type=Path, default=ROOT / "reports" / "bench_demo.md")
    parser.add_argument("--apple-code", type=Path, default=APPLE_CODE,
                        help="the apple-code binary (default: the debug build run.sh uses), e.g. an older build")
    parser.add_argument("--set", action="append", default=[], metavar="APPLE_FLOW_NAME=VALUE",
                        help="a daemon setting for this run, e.g. APPLE_FLOW_CHAT_READ_ONLY=false (repeatable)")
    args = parser.parse_args()
    overrides = dict(item.split("=", 1) for item in args.set if "=" in item)
    if len(overrides) != len(args.set) or not all(name.startswith("APPLE_FLOW_") for name in overrides):
        parser.error("--set takes APPLE_FLOW_NAME=VALUE")
    console = Console(stderr=True)
    if not args.apple_code.exists():
        console.print(f"[red]no apple-code at {args.apple_code}[/red]: run scripts/setup.sh --local-model first")
        return 2
    replies: list[Reply] = []
    loads: list[tuple[float, float, float]] = []
    with tempfile.TemporaryDirectory(prefix="bench-demo-") as tmp:
        folder = Path(tmp)
        model = model_named(args.local_model)
        task_model = model_named(args.task_model) if args.task_model and args.task_model != model.name else None
        servers = [LocalModelServer(port=free_port(), state_dir=folder / "server", model=chosen)
                   for chosen in (model, task_model) if chosen is not None]
        try:
            for server in servers:
                console.print(f"starting a local model server ({server.model.title} on llama.cpp)")
                server.start(wait_seconds=180)
        except LocalModelError as exc:
            console.print(f"[red]{exc}[/red]\nInstall it with scripts/local-model.sh install, then run this again.")
            for server in servers:
                server.stop()
            return 2
        settings = dict(overrides)
        if task_model is not None:  # as run.sh gives it
            settings.setdefault("APPLE_FLOW_AFM_TASK_BASE_URL", servers[1].url)
        title = model.title + (f" for chat, {task_model.title} for tasks (plans and work)" if task_model else "")
        started = time.monotonic()
        cpu: dict[str, float] = {}
        try:
            with Progress(console=console) as progress:
                task = progress.add_task("messages", total=args.sessions * len(SESSION))

                def shown(reply: Reply) -> None:
                    seconds = f"{reply.seconds:.1f} s" if reply.seconds is not None else "no reply"
                    check = "" if reply.holds is None else (" holds" if reply.holds else " does NOT hold")
                    progress.console.print(f"session {reply.session}: {reply.message.text!r}: {seconds}, "
                                           f"{reply.outcome}{check}: {one_line(reply.text, 70)}")
                    progress.advance(task)

                for number in range(1, args.sessions + 1):
                    loads.append(os.getloadavg())
                    session_folder = folder / f"session-{number}"
                    session_folder.mkdir()
                    replies += run_session(number, session_folder, servers[0].url, settings, args.apple_code, shown,
                                           cpu)
            for server in servers:
                cpu[f"{server.model.name} server"] = server_cpu(server)
        finally:
            for server in servers:
                server.stop()
        wall = time.monotonic() - started
        works = [server_work(server.log_file) for server in servers]
        work = {kind: (sum(w[kind][0] for w in works), sum(w[kind][1] for w in works)) for kind in works[0]}
    text = report(replies, args.sessions, loads, wall, work, cpu, overrides, args.apple_code, title)
    write_report(args.report, text, console)
    return 0


if __name__ == "__main__":
    sys.exit(main())
