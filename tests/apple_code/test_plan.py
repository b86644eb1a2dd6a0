"""`apple-code --plan` end to end: the real binary against the scripted OpenAI-compatible server, with real files.

The server answers requests in order, so each script below is the planner's reply, then each worker's tool calls
and answer, then the summary, exactly in the order a sequential plan run asks for them."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from support.plan_runs import (
    READ_ONLY_TOOLS,
    Run,
    run_apple_code,
    tool_names,
    tool_results,
    user_text,
)
from support.scripted_server import ScriptedServer, answer, hang, http_error, tool_call

TASK = "Fix the greeting typos in a.py, b.py and c.py."
FILES = {
    "a.py": "def greet_a():\n    return 'helo from A'  # CONTENT-A\n",
    "b.py": "def greet_b():\n    return 'helo from B'  # CONTENT-B\n",
    "c.py": "def greet_c():\n    return 'helo from C'  # CONTENT-C\n",
}


@pytest.fixture(autouse=True)
def plan_files(workspace: Path) -> None:
    """The files every plan here works on, in the workspace."""
    for name, text in FILES.items():
        (workspace / name).write_text(text)


def fix_file(name: str) -> list[dict[str, object]]:
    """One worker: read the file, fix it, say so."""
    letter = name[0].upper()
    return [
        tool_call("readFile", {"path": name}),
        tool_call("editFile", {"path": name, "oldText": f"'helo from {letter}'", "newText": f"'hello from {letter}'"}),
        answer(f"Fixed the typo in {name}."),
    ]


def subtask_events(run: Run, kind: str) -> list[tuple[int | None, str]]:
    return [(event.get("subtask"), event.get("name", "")) for event in run.events() if event["type"] == kind]


def notices(run: Run) -> list[str]:
    return [event["message"] for event in run.events() if event["type"] == "notice"]


def test_three_workers_each_edit_a_file_in_a_fresh_window(apple_code_bin: Path, workspace: Path) -> None:
    plan = '["Fix the typo in a.py", "Fix the typo in b.py", "Fix the typo in c.py"]'
    script = [answer(plan), *fix_file("a.py"), *fix_file("b.py"), *fix_file("c.py"),
              answer("All three greetings are fixed.")]
    with ScriptedServer(script) as server:
        run = run_apple_code(apple_code_bin, server.url, workspace, TASK, "--plan")
        requests = server.requests()

    assert run.returncode == 0, run.stderr
    result = run.result()
    assert result["subtype"] == "success" and result["is_error"] is False
    text = result["result"]
    positions = [text.index(f"{n}. Fix the typo in {name}\nFixed the typo in {name}.")
                 for n, name in enumerate(FILES, start=1)]
    assert positions == sorted(positions)
    assert text.rstrip().endswith("Summary: All three greetings are fixed.")
    assert result["files_changed"] == ["a.py", "b.py", "c.py"]
    for name in FILES:
        letter = name[0].upper()
        assert f"'hello from {letter}'" in (workspace / name).read_text()

    assert len(requests) == 1 + 3 * 3 + 1
    planner, summary = requests[0], requests[-1]
    assert tool_names(planner) <= READ_ONLY_TOOLS
    assert TASK in user_text(planner)
    for number, first in enumerate((1, 4, 7), start=1):
        window = requests[first:first + 3]
        # A fresh window: it starts with no tool results, and only its own file is ever shown in it.
        assert tool_results(window[0]) == ""
        assert f"Your subtask: Fix the typo in {'abc'[number - 1]}.py" in user_text(window[0])
        assert {"writeFile", "editFile"} <= tool_names(window[0])
        shown = "".join(tool_results(request) for request in window)
        for other, name in enumerate(FILES, start=1):
            assert (f"CONTENT-{name[0].upper()}" in shown) == (other == number)
    # Later workers get a one-line digest of earlier ones, not their transcripts.
    third = user_text(requests[7])
    assert "1. Fix the typo in a.py: Fixed the typo in a.py. (changed: a.py)" in third
    assert "2. Fix the typo in b.py: Fixed the typo in b.py. (changed: b.py)" in third
    assert not tool_names(summary)
    assert "3. Fix the typo in c.py: Fixed the typo in c.py. (changed: c.py)" in user_text(summary)

    # Events of workers carry their subtask id; the planner's do not.
    assert [subtask for subtask, name in subtask_events(run, "tool_call")] == [1, 1, 2, 2, 3, 3]
    assert result["num_turns"] >= 1 + 3 * 3 + 1


def test_garbage_plan_runs_the_task_directly(apple_code_bin: Path, workspace: Path) -> None:
    script = [answer("Sure! I think this is a fine task."), tool_call("readFile", {"path": "a.py"}),
              answer("a.py greets with a typo.")]
    with ScriptedServer(script) as server:
        run = run_apple_code(apple_code_bin, server.url, workspace, TASK, "--plan")
        requests = server.requests()

    assert run.returncode == 0, run.stderr
    assert run.result()["result"] == "a.py greets with a typo."
    assert "plan: the planner's reply held no subtasks; running the task directly" in notices(run)
    assert len(requests) == 3
    assert TASK in user_text(requests[1]) and "Your subtask" not in user_text(requests[1])
    assert {"writeFile", "editFile"} <= tool_names(requests[1])


def test_a_failing_worker_is_reported_and_the_run_goes_on(apple_code_bin: Path, workspace: Path) -> None:
    plan = '["Fix the typo in a.py", "Fix the typo in b.py", "Fix the typo in c.py"]'
    script = [answer(plan), *fix_file("a.py"), http_error(400, '{"error":{"message":"scripted refusal"}}'),
              *fix_file("c.py"), answer("a.py and c.py fixed; b.py failed.")]
    with ScriptedServer(script) as server:
        run = run_apple_code(apple_code_bin, server.url, workspace, TASK, "--plan")
        requests = server.requests()

    assert run.returncode == 0, run.stderr
    result = run.result()
    assert "2. Fix the typo in b.py\nFAILED (error_backend)" in result["result"]
    assert "3. Fix the typo in c.py\nFixed the typo in c.py." in result["result"]
    assert result["files_changed"] == ["a.py", "c.py"]
    assert "'helo from B'" in (workspace / "b.py").read_text()
    assert "'hello from C'" in (workspace / "c.py").read_text()
    assert "2. Fix the typo in b.py: FAILED (error_backend)" in user_text(requests[5])
    assert any(message.startswith("subtask 2 failed (error_backend)") for message in notices(run))


def test_max_subtasks_caps_the_plan(apple_code_bin: Path, workspace: Path) -> None:
    plan = '["Fix a.py", "Fix b.py", "Fix c.py", "Run the tests"]'
    script = [answer(plan), answer("did a.py"), answer("did b.py, c.py and the tests"), answer("All done.")]
    with ScriptedServer(script) as server:
        run = run_apple_code(apple_code_bin, server.url, workspace, TASK, "--plan", "--max-subtasks", "2")
        requests = server.requests()

    assert run.returncode == 0, run.stderr
    assert "at most 2 subtasks" in user_text(requests[0])
    assert len(requests) == 1 + 2 + 1
    assert "Your subtask: Fix b.py; then Fix c.py; then Run the tests" in user_text(requests[2])
    assert run.result()["result"].startswith("Plan: 2 subtasks.")


def test_max_turns_bounds_every_request_of_the_plan(apple_code_bin: Path, workspace: Path) -> None:
    """--max-turns 3 pays for the planner, one worker and the summary: five subtasks become one worker."""
    plan = '["Fix a.py", "Fix b.py", "Fix c.py", "Run the tests", "Report"]'
    script = [answer(plan), answer("did all five"), answer("All done."),
              *(answer(f"extra {n}") for n in range(6))]
    with ScriptedServer(script) as server:
        run = run_apple_code(apple_code_bin, server.url, workspace, TASK, "--plan", "--max-turns", "3")
        requests = server.requests()

    assert run.returncode == 0, run.stderr
    assert len(requests) == 3
    assert run.result()["num_turns"] == 3
    assert "at most 1 subtask." in user_text(requests[0])
    assert "Your subtask: Fix a.py; then Fix b.py; then Fix c.py; then Run the tests; then Report" in user_text(
        requests[1])
    assert tool_names(requests[2]) == set()
    assert run.result()["result"].startswith("Plan: 1 subtask.")
    assert run.result()["result"].rstrip().endswith("Summary: All done.")
    assert any("pays for 1 worker" in message for message in notices(run))


def test_max_subtasks_above_the_hard_cap_is_held_to_twenty(apple_code_bin: Path, workspace: Path) -> None:
    with ScriptedServer([answer("no plan here"), answer("done directly")]) as server:
        # 40 turns pay for 20 workers (the default 16 pays for 11: see the --max-turns test above).
        run = run_apple_code(apple_code_bin, server.url, workspace, TASK, "--plan", "--max-subtasks", "50",
                             "--max-turns", "40")
        requests = server.requests()
    assert run.returncode == 0, run.stderr
    assert "at most 20 subtasks" in user_text(requests[0])


def test_timeout_in_the_middle_of_a_worker_exits_124_with_the_partial_answer(
    apple_code_bin: Path, workspace: Path
) -> None:
    plan = '["Fix the typo in a.py", "Fix the typo in b.py"]'
    script = [answer(plan), *fix_file("a.py"), tool_call("readFile", {"path": "b.py"}), hang()]
    started = time.monotonic()
    with ScriptedServer(script) as server:
        run = run_apple_code(apple_code_bin, server.url, workspace, TASK, "--plan", "--timeout", "4",
                             output_format="json", timeout=30)
    elapsed = time.monotonic() - started

    assert run.returncode == 124, run.stderr
    result = run.result()
    assert result["subtype"] == "error_timeout" and result["is_error"] is True
    assert "1. Fix the typo in a.py\nFixed the typo in a.py." in result["result"]
    assert "2. Fix the typo in b.py\nFAILED (error_timeout)" in result["result"]
    assert "Summary:" not in result["result"]
    assert result["files_changed"] == ["a.py"]
    assert "'hello from A'" in (workspace / "a.py").read_text()
    assert elapsed < 15


@pytest.mark.skipif(sys.platform == "darwin", reason="on a Mac the framework exists")
def test_plan_on_a_missing_on_device_model_exits_3_without_running_anything(
    apple_code_bin: Path, workspace: Path
) -> None:
    run = run_apple_code(apple_code_bin, "http://127.0.0.1:9/v1", workspace, TASK, "--plan", "--backend", "fm",
                         output_format="json")
    assert run.returncode == 3, run.stderr
    assert run.result()["subtype"] == "error_model_unavailable"
    assert sorted(path.name for path in workspace.iterdir()) == sorted(FILES)


def test_parallel_read_only_workers_get_no_digest_and_the_run_combines_them(
    apple_code_bin: Path, workspace: Path
) -> None:
    # Workers run at once, so which one gets which scripted reply is not fixed: they all get the same one.
    plan = '["Describe a.py", "Describe b.py", "Describe c.py"]'
    script = [answer(plan), answer("It greets."), answer("It greets."), answer("It greets."), answer("Three greeters.")]
    with ScriptedServer(script) as server:
        run = run_apple_code(apple_code_bin, server.url, workspace, "Describe the modules.", "--plan", "--parallel",
                             "--read-only")
        requests = server.requests()

    assert run.returncode == 0, run.stderr
    assert len(requests) == 5
    workers = requests[1:4]
    assert sorted(user_text(r).split("Your subtask: ")[1].splitlines()[0] for r in workers) == [
        "Describe a.py", "Describe b.py", "Describe c.py"]
    assert all("Earlier subtasks" not in user_text(r) and tool_names(r) <= READ_ONLY_TOOLS for r in workers)
    text = run.result()["result"]
    assert text.index("1. Describe a.py\nIt greets.") < text.index("3. Describe c.py\nIt greets.")
    assert text.rstrip().endswith("Summary: Three greeters.")


def test_parallel_without_read_only_is_a_usage_error(apple_code_bin: Path, workspace: Path) -> None:
    run = run_apple_code(apple_code_bin, "http://127.0.0.1:9/v1", workspace, TASK, "--plan", "--parallel",
                         output_format="json")
    assert run.returncode == 2
    assert "--read-only" in run.result()["result"]
