"""Does apple-code get small coding tasks done, by a check rather than by its own word?

Each task of scripts/bench_task_set.py (fix a failing test, add a command-line flag, rename a function across
files, explain what a function returns, find a bug from a traceback, write a missing test, ...) runs in a fresh
throwaway workspace, once per arm:

- plain: ``apple-code PROMPT``;
- verify: ``apple-code --verify CHECK`` with the workspace's own check (its tests); a question has none, so it
  has no verify run;
- plan: ``apple-code --plan PROMPT``.

After each run the task's checker decides from the workspace (hidden tests of its own, the script's real output,
the real value of the function asked about) whether the task was solved; what the agent says decides nothing.
Reported per run: solved or not (and why), whether apple-code claimed success (exit 0), its model requests
("turns"), seconds and tokens. Also: how often a run claimed success without having solved the task.

The backend is whatever apple-code finds (``--backend auto``: Apple's on-device model on a Mac with Apple
Intelligence), or the server the flags name (``--base-url``, ``--model``, ``--api-key``: any OpenAI-compatible
server); on a machine without Apple's model and no ``--base-url`` it starts the local model server
(``--local-model``, by default Qwen2.5-Coder-0.5B, on llama.cpp; scripts/local-model.sh install). Every run has a time
cap (``--timeout``, apple-code's own, plus a kill margin), and the whole benchmark a budget (``--budget-minutes``):
runs it leaves out are reported as not run.
Not a test: the figures go to reports/bench_tasks.md, whatever they are.

    scripts/bench_tasks [--apple-code PATH] [--base-url URL --model NAME | --local-model NAME]
                        [--arms plain,verify,plan]
                        [--tasks NAME,...] [--timeout 60] [--max-turns N] [--context-tokens N]
                        [--budget-minutes 40] [--report reports/bench_tasks.md]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

SCRIPTS = Path(__file__).resolve().parent
ROOT = SCRIPTS.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(SCRIPTS))

from bench_support import free_port, write_report  # noqa: E402
from bench_task_set import TASKS, Task, make_workspace  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.progress import Progress  # noqa: E402

APPLE_CODE = ROOT / "apple_code" / ".build" / "debug" / "apple-code"
ARMS = ("plain", "verify", "plan")
KILL_MARGIN_S = 15.0  # apple-code stops itself at --timeout and reports; past this margin it is killed
EXIT_NAMES = {0: "success", 1: "failed", 2: "usage error", 3: "no model", 4: "context", 5: "check failed",
              124: "timed out", 130: "interrupted"}


@dataclass
class Outcome:
    task: Task
    arm: str
    ran: bool  # False: not run (no check for a question, the budget spent, --verify unknown to this apple-code)
    note: str = ""  # why it was not run, or what stood out
    solved: bool = False
    why: str = ""  # the checker's finding
    exit_code: int | None = None
    subtype: str = ""
    claimed: bool = False  # apple-code reported success (exit 0) with an answer
    turns: int | None = None
    seconds: float = 0.0
    input_tokens: int | None = None
    output_tokens: int | None = None
    estimated: bool = False
    check: dict[str, Any] | None = None  # the result's verify object
    answer: str = ""

    @property
    def tokens(self) -> int | None:
        if self.input_tokens is None and self.output_tokens is None:
            return None
        return (self.input_tokens or 0) + (self.output_tokens or 0)


@dataclass(frozen=True)
class Backend:
    flags: tuple[str, ...]  # apple-code's backend options
    label: str  # for the report


def version(apple_code: Path) -> str:
    try:
        done = subprocess.run([str(apple_code), "--version"], capture_output=True, text=True, timeout=30,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"--version failed: {exc}"
    return done.stdout.strip() or f"--version exit {done.returncode}"


def supports_verify(apple_code: Path) -> bool:
    try:
        done = subprocess.run([str(apple_code), "--help"], capture_output=True, text=True, timeout=30,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "--verify" in done.stdout + done.stderr


def run_once(
    task: Task, arm: str, apple_code: Path, backend: Backend, folder: Path, args: argparse.Namespace
) -> Outcome:
    """One run of one arm on a fresh copy of the task's workspace, then the task's checker."""
    workspace = make_workspace(task, folder / "ws")
    argv = [str(apple_code), "--cwd", str(workspace), "--output-format", "stream-json",
            "--timeout", f"{args.timeout:g}", *backend.flags]
    if args.max_turns:
        argv += ["--max-turns", str(args.max_turns)]
    if args.context_tokens:
        argv += ["--context-tokens", str(args.context_tokens)]
    if arm == "verify":
        assert task.check is not None
        argv += ["--verify", task.check, "--verify-rounds", str(args.verify_rounds)]
    elif arm == "plan":
        argv.append("--plan")
    argv.append("-")
    env = {k: v for k, v in os.environ.items() if not k.startswith("APPLE_CODE_")}
    started = time.monotonic()
    process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, cwd=workspace, env=env, start_new_session=True)
    try:
        stdout, _ = process.communicate(task.prompt, timeout=args.timeout + KILL_MARGIN_S)
        note = ""
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        stdout, _ = process.communicate()
        note = f"killed: no result {KILL_MARGIN_S:g} s after --timeout"
    seconds = time.monotonic() - started
    result = last_result(stdout)
    answer = result.get("result") if isinstance(result.get("result"), str) else ""
    verdict = task.judge(workspace, answer)
    usage = result.get("usage") if isinstance(result.get("usage"), dict) else {}
    return Outcome(
        task, arm, True, note=note, solved=verdict.solved, why=verdict.why, exit_code=process.returncode,
        subtype=str(result.get("subtype", "")), claimed=process.returncode == 0 and bool(answer.strip()),
        turns=_int(result.get("num_turns")), seconds=seconds, input_tokens=_int(usage.get("input_tokens")),
        output_tokens=_int(usage.get("output_tokens")), estimated=bool(usage.get("estimated")),
        check=result.get("verify") if isinstance(result.get("verify"), dict) else None, answer=answer,
    )


def last_result(stdout: str) -> dict[str, Any]:
    for line in reversed(stdout.splitlines()):
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and event.get("type") == "result":
            return event
    return {}


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


# ----------------------------------------------------------------------------------------------- the report


def one_line(text: str, limit: int = 80) -> str:
    flat = " ".join(text.split()).replace("|", "\\|")
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def cell(outcome: Outcome) -> str:
    if not outcome.ran:
        return f"— ({outcome.note})"
    mark = "**solved**" if outcome.solved else "not solved"
    exit_name = EXIT_NAMES.get(outcome.exit_code or 0, str(outcome.exit_code)) if outcome.exit_code else "exit 0"
    figures = [exit_name]
    if outcome.turns is not None:
        figures.append(f"{outcome.turns} turns")
    figures.append(f"{outcome.seconds:.0f} s")
    if outcome.tokens is not None:
        figures.append(f"{outcome.tokens:,} tok")
    if outcome.check is not None:
        ran = outcome.check.get("runs")
        if ran == 0:
            figures.append("check not run")  # the run ended (its cap, its turns) before a final answer
        else:
            rounds = outcome.check.get("rounds") or 0
            verdict = "passed" if outcome.check.get("passed") else "failed"
            figures.append(f"check {verdict}" + (f" after {rounds} repair round(s)" if rounds else ""))
    return f"{mark}: {', '.join(figures)}"


def arm_summary(outcomes: list[Outcome], arm: str) -> str:
    ran = [o for o in outcomes if o.arm == arm and o.ran]
    if not ran:
        return f"| {arm} | 0 | — | — | — | — | — | — |"
    solved = sum(o.solved for o in ran)
    claimed_unsolved = sum(o.claimed and not o.solved for o in ran)
    turns = [o.turns for o in ran if o.turns is not None]
    tokens = [o.tokens for o in ran if o.tokens is not None]
    exits: dict[str, int] = {}
    for o in ran:
        name = EXIT_NAMES.get(o.exit_code, str(o.exit_code)) if o.exit_code is not None else "killed"
        exits[name] = exits.get(name, 0) + 1
    return (f"| {arm} | {len(ran)} | {solved} | {claimed_unsolved} | "
            f"{statistics.median(turns) if turns else '—'} | {statistics.median(o.seconds for o in ran):.0f} / "
            f"{sum(o.seconds for o in ran):.0f} | {sum(tokens):,} | "
            f"{', '.join(f'{k} {v}' for k, v in sorted(exits.items(), key=lambda kv: -kv[1]))} |")


def report(outcomes: list[Outcome], tasks: list[Task], arms: list[str], backend: Backend, args: argparse.Namespace,
           loads: list[float], wall: float, apple_code: Path, verify_known: bool) -> str:
    cpus = os.cpu_count() or 1
    load_text = ", ".join(f"{load:.1f}" for load in loads)
    busy = max(loads, default=0.0) > cpus
    machine = (f"**The machine was shared with other work** (load average, 1 min, before each task: {load_text}, on "
               f"{cpus} CPUs), so the times are slower than an idle machine would give."
               if busy else f"Load average (1 min) before each task: {load_text}, on {cpus} CPUs.")
    limits = [f"--timeout {args.timeout:g}"]
    if args.max_turns:
        limits.append(f"--max-turns {args.max_turns}")
    if args.context_tokens:
        limits.append(f"--context-tokens {args.context_tokens}")
    limits.append(f"--verify-rounds {args.verify_rounds} (verify arm)")
    rows = []
    for task in tasks:
        cells = []
        for arm in arms:
            found = next((o for o in outcomes if o.task is task and o.arm == arm), None)
            cells.append(cell(found) if found is not None else "—")
        rows.append(f"| {task.name} | {task.kind} | {' | '.join(cells)} |")
    details = []
    for o in outcomes:
        if not o.ran:
            continue
        details.append(f"| {o.task.name} | {o.arm} | {'yes' if o.solved else 'no'} | {one_line(o.why, 70)} | "
                       f"{o.subtype or '-'}{' (' + o.note + ')' if o.note else ''} | {one_line(o.answer, 70)} |")
    skipped = [o for o in outcomes if not o.ran and o.note.startswith("budget")]
    verify_line = "" if verify_known else (
        "\n**This apple-code has no `--verify`** (its `--help` does not list it), so the verify arm was not run.\n")
    left_out = f"; {len(skipped)} run(s) were left out for it" if skipped else ""
    note = f"\n- Note: {args.note}" if args.note else ""
    return f"""# Task success: plain, --verify and --plan (scripts/bench_tasks)

- When and where: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {platform.system()} {platform.machine()}, {cpus} CPUs,
  Python {platform.python_version()}.
- Backend: {backend.label}.
- apple-code: `{apple_code}` ({version(apple_code)}).
- Limits per run: {', '.join(limits)}; killed {KILL_MARGIN_S:g} s after `--timeout` if it has not ended.
- Budget: {args.budget_minutes:g} minutes for the whole benchmark; it took {wall / 60:.1f} minutes{left_out}.
- Command: `scripts/bench_tasks {shlex.join(args.argv)}`{note}

{machine}
{verify_line}
Each task runs in a fresh throwaway workspace per arm. "Solved" is the task's checker's verdict on the workspace
the run left (hidden tests kept by the benchmark, the script's real output, the real value asked about), never the
agent's word; "claimed" is apple-code ending with success (exit 0) and an answer. Tokens are apple-code's `usage`
(input + output; estimated by apple-code where the server reports none).

## Per arm

| arm | runs | solved | claimed success, not solved | median turns | seconds: median / total | tokens | how runs ended |
|---|---|---|---|---|---|---|---|
{chr(10).join(arm_summary(outcomes, arm) for arm in arms)}

## Per task

| task | kind | {' | '.join(arms)} |
|---|---|{'---|' * len(arms)}
{chr(10).join(rows)}

## What each checker found, and what the agent said

| task | arm | solved | checker | result subtype | answer (start) |
|---|---|---|---|---|---|
{chr(10).join(details)}

Run again with `scripts/bench_tasks` (on a Mac: `scripts/check-macos.sh --bench`); `--help` lists the flags.
"""


# ----------------------------------------------------------------------------------------------- running


def pick_backend(args: argparse.Namespace, console: Console, stack: contextlib.ExitStack) -> Backend:
    """The backend flags for apple-code: the server the flags name, the local model server (started here, where
    there is no Apple model and no server was named), or apple-code's own choice."""
    if args.base_url:
        flags = ["--backend", "openai", "--base-url", args.base_url]
        if args.model:
            flags += ["--model", args.model]
        if args.api_key:
            flags += ["--api-key", args.api_key]
        return Backend(tuple(flags), f"OpenAI-compatible server at {args.base_url}"
                       + (f", model {args.model}" if args.model else ""))
    if args.backend != "auto" or platform.system() == "Darwin" or args.no_local_model:
        return Backend(("--backend", args.backend), f"`--backend {args.backend}` (whatever apple-code finds)"
                       if args.backend == "auto" else f"`--backend {args.backend}`")
    from apple_flow.localmodel import LocalModelError, LocalModelServer, model_named

    model = model_named(args.local_model)
    folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-tasks-server-")))
    server = LocalModelServer(port=free_port(), state_dir=folder, model=model,
                              context_tokens=args.served_context_tokens)
    console.print(f"starting the local model server ({model.title} on llama.cpp)")
    try:
        server.start(wait_seconds=180)
    except LocalModelError as exc:
        raise SystemExit(f"{exc}\nInstall it with scripts/local-model.sh install --model {model.name}, or pass "
                         "--base-url.") from exc
    stack.callback(server.stop)
    return Backend(("--backend", "openai", "--base-url", server.url, "--model", model.name),
                   f"the local model server started for this run: {model.name} ({model.title}) on "
                   f"llama-cpp-python 0.3.36 with apple-flow's tool-call handler, {args.served_context_tokens:,}-token "
                   "window")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--apple-code", type=Path, default=APPLE_CODE, help="the binary (default: the debug build)")
    parser.add_argument("--backend", default="auto", choices=("auto", "fm", "openai"))
    parser.add_argument("--base-url", help="an OpenAI-compatible server, e.g. http://127.0.0.1:11434/v1")
    parser.add_argument("--model", help="the server's model")
    parser.add_argument("--api-key", help="the server's bearer token")
    parser.add_argument("--no-local-model", action="store_true",
                        help="do not start the local model server where there is no Apple model")
    parser.add_argument("--local-model", default="qwen2.5-coder-0.5b",
                        help="the local model to start (apple-flow model list)")
    parser.add_argument("--served-context-tokens", type=int, default=8192,
                        help="the local model server's window (llama.cpp's n_ctx)")
    parser.add_argument("--arms", default=",".join(ARMS), help="comma-separated: plain, verify, plan")
    parser.add_argument("--tasks", default="", help="comma-separated task names (default: all)")
    parser.add_argument("--timeout", type=float, default=120, help="apple-code --timeout per run, seconds")
    parser.add_argument("--max-turns", type=int, default=None, help="apple-code --max-turns (default: its own)")
    parser.add_argument("--context-tokens", type=int, default=None, help="apple-code --context-tokens")
    parser.add_argument("--verify-rounds", type=int, default=2, help="apple-code --verify-rounds (verify arm)")
    parser.add_argument("--budget-minutes", type=float, default=60,
                        help="for the whole benchmark; runs that would start later are reported as not run")
    parser.add_argument("--report", type=Path, default=ROOT / "reports" / "bench_tasks.md")
    parser.add_argument("--note", default="", help="a sentence for the report on how it was run (which build, why)")
    args = parser.parse_args(argv)
    args.argv = list(argv if argv is not None else sys.argv[1:])
    args.arm_list = [a.strip() for a in args.arms.split(",") if a.strip()]
    unknown = [a for a in args.arm_list if a not in ARMS]
    if unknown or not args.arm_list:
        parser.error(f"--arms takes {', '.join(ARMS)} (got {args.arms!r})")
    names = [t.strip() for t in args.tasks.split(",") if t.strip()]
    known = {task.name for task in TASKS}
    if [n for n in names if n not in known]:
        parser.error(f"unknown task(s): {', '.join(n for n in names if n not in known)}; known: {', '.join(known)}")
    args.task_list = [task for task in TASKS if not names or task.name in names]
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    console = Console(stderr=True)
    if not args.apple_code.exists():
        console.print(f"[red]no apple-code at {args.apple_code}[/red]: run scripts/setup.sh first (or --apple-code)")
        return 2
    verify_known = supports_verify(args.apple_code)
    outcomes: list[Outcome] = []
    loads: list[float] = []
    started = time.monotonic()
    deadline = started + args.budget_minutes * 60
    with contextlib.ExitStack() as stack:
        backend = pick_backend(args, console, stack)
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-tasks-")))
        plan = [(task, arm) for task in args.task_list for arm in args.arm_list]
        with Progress(console=console) as progress:
            bar = progress.add_task("runs", total=len(plan))
            for index, (task, arm) in enumerate(plan):
                if arm == args.arm_list[0]:
                    loads.append(os.getloadavg()[0])
                if arm == "verify" and task.check is None:
                    outcome = Outcome(task, arm, False, note="a question: nothing to check")
                elif arm == "verify" and not verify_known:
                    outcome = Outcome(task, arm, False, note="this apple-code has no --verify")
                elif time.monotonic() + args.timeout + KILL_MARGIN_S > deadline:
                    outcome = Outcome(task, arm, False, note="budget spent")
                else:
                    outcome = run_once(task, arm, args.apple_code, backend, folder / f"{index:03d}", args)
                outcomes.append(outcome)
                if outcome.ran:
                    progress.console.print(f"{task.name} [{arm}]: {cell(outcome)} — {one_line(outcome.why, 60)}")
                progress.advance(bar)
    wall = time.monotonic() - started
    text = report(outcomes, args.task_list, args.arm_list, backend, args, loads, wall, args.apple_code, verify_known)
    write_report(args.report, text, console)
    return 0


if __name__ == "__main__":
    sys.exit(main())
