"""scripts/bench_tasks: its checkers decide from the workspace, not from the agent's words, and
the benchmark runs the real apple-code against an OpenAI-compatible server (here the scripted one) and reports."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from support.scripted_server import ScriptedServer, answer, tool_call

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

from bench_task_set import CALC, TASKS, Task, apply_solution, make_workspace  # noqa: E402

CLAIM = "Done: I fixed it and all the tests pass. The answer is 7. See net/client.py and headers.py."


def test_there_are_at_least_twenty_tasks_of_as_many_kinds() -> None:
    assert len(TASKS) >= 20
    assert len({task.name for task in TASKS}) == len(TASKS)
    assert len({task.kind for task in TASKS}) >= 20
    assert all(task.solution or task.answer for task in TASKS)


@pytest.mark.parametrize("task", TASKS, ids=lambda task: task.name)
def test_a_checker_is_not_fooled_by_a_claim_and_accepts_real_work(task: Task, tmp_path: Path) -> None:
    workspace = make_workspace(task, tmp_path / "ws")
    untouched = task.judge(workspace, CLAIM)
    assert not untouched.solved, untouched.why
    apply_solution(task, workspace)
    solved = task.judge(workspace, task.answer or "Done.")
    assert solved.solved, solved.why


@pytest.mark.parametrize("task", [t for t in TASKS if t.check is not None], ids=lambda task: task.name)
def test_the_workspace_check_given_to_verify_passes_on_real_work(task: Task, tmp_path: Path) -> None:
    workspace = make_workspace(task, tmp_path / "ws")
    apply_solution(task, workspace)
    assert task.check is not None
    done = subprocess.run(task.check, shell=True, cwd=workspace, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_test_edited_to_pass_does_not_solve_the_task(tmp_path: Path) -> None:
    """The agent that "fixes" the failing test instead of the code: the workspace's tests pass, the task is not
    solved (the checker runs its own copy of the tests)."""
    task = next(t for t in TASKS if t.name == "fix-failing-test")
    workspace = make_workspace(task, tmp_path / "ws")
    (workspace / "test_calc.py").write_text("import unittest\n\n\nclass T(unittest.TestCase):\n"
                                            "    def test_ok(self):\n        pass\n")
    assert subprocess.run(task.check or "", shell=True, cwd=workspace, capture_output=True).returncode == 0
    assert not task.judge(workspace, CLAIM).solved


def test_the_benchmark_runs_apple_code_against_a_server_and_reports_what_the_checkers_found(
    apple_code_bin: Path, tmp_path: Path
) -> None:
    script = [
        tool_call("readFile", {"path": "calc.py"}),  # a file is read before it is written (SeenFiles)
        tool_call("writeFile", {"path": "calc.py", "content": CALC.replace("a - b", "a + b")}),
        answer("Fixed calc.py."),
        answer("mystery returns 44."),  # wrong, but said with confidence
    ]
    report = tmp_path / "bench_tasks.md"
    with ScriptedServer(script) as server:
        done = subprocess.run(
            [sys.executable, str(ROOT / "scripts" / "bench_tasks.py"), "--apple-code", str(apple_code_bin),
             "--base-url", server.url, "--model", "scripted", "--tasks", "fix-failing-test,explain-return",
             "--arms", "plain", "--timeout", "30", "--report", str(report)],
            capture_output=True, text=True, timeout=180,
        )
    assert done.returncode == 0, done.stderr
    text = report.read_text()
    assert "Backend: OpenAI-compatible server at http://127.0.0.1:" in text and "model scripted" in text
    # 2 runs, 1 solved, 1 claimed success without having solved it.
    assert "| plain | 2 | 1 | 1 |" in text
    assert "| fix-failing-test | fix a failing test | **solved**: exit 0, 3 turns" in text
    assert "| explain-return | explain what a function returns | not solved: exit 0, 1 turns" in text
    assert "the value is 45; the answer gives 44" in text


def test_the_verify_arm_runs_the_workspace_check_and_the_model_repairs_after_seeing_it(
    apple_code_bin: Path, tmp_path: Path
) -> None:
    script = [
        answer("Fixed calc.py."),  # claimed, not done: the check fails and goes back to the model
        tool_call("writeFile", {"path": "calc.py", "content": CALC.replace("a - b", "a + b")}),
        answer("Now it is fixed."),
    ]
    report = tmp_path / "bench_tasks.md"
    with ScriptedServer(script) as server:
        done = subprocess.run(
            [sys.executable, str(ROOT / "scripts" / "bench_tasks.py"), "--apple-code", str(apple_code_bin),
             "--base-url", server.url, "--model", "scripted", "--tasks", "fix-failing-test,explain-return",
             "--arms", "verify", "--timeout", "30", "--report", str(report)],
            capture_output=True, text=True, timeout=180,
        )
        requests = server.requests()
    assert done.returncode == 0, done.stderr
    text = report.read_text()
    assert "| fix-failing-test | fix a failing test | **solved**: exit 0, 3 turns" in text and "check passed" in text
    assert "| explain-return | explain what a function returns | — (a question: nothing to check) |" in text
    assert "| verify | 1 | 1 | 0 |" in text
    assert "FAILED" in str(requests[1]["messages"])  # the model saw the failing check


def test_bad_arms_or_tasks_are_refused_with_what_is_accepted(tmp_path: Path) -> None:
    for flag, value, expected in (("--arms", "plain,fast", "--arms takes plain, verify, plan"),
                                  ("--tasks", "nope", "unknown task(s): nope")):
        done = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench_tasks.py"), flag, value],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 2 and expected in done.stderr, done.stderr
