"""`apple-code --verify CMD`: "done" is a check apple-code runs, not the model's word. Whole runs of the real binary
with the real tools against the scripted server: a model that breaks a test, is shown the failure and fixes it; one
that never fixes it (exit 5, error_verify); the check after the last step of a plan; the result's `verify` object
when the check never ran."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from support.apple_code_run import run_apple_code, run_scripted, scripted_args
from support.scripted_server import ScriptedServer, answer, http_error, tool_call

CHECK = "python3 -B test_calc.py"  # -B: no .pyc, whose mtime+size key misses an edit within the same second
GOOD = "def add(a, b):\n    return a + b\n"
BAD = "def add(a, b):\n    return a - b\n"
BREAK = {"path": "calc.py", "oldText": "return a + b", "newText": "return a - b"}
FIX = {"path": "calc.py", "oldText": "return a - b", "newText": "return a + b"}


@pytest.fixture
def tested_calc(workspace: Path) -> Path:
    """calc.py with add() right, and a test of it that prints why it fails."""
    (workspace / "calc.py").write_text(GOOD)
    (workspace / "test_calc.py").write_text(
        "from calc import add\n"
        "got = add(2, 3)\n"
        "assert got == 5, f'add(2, 3) returned {got}, expected 5'\n"
        "print('1 passed')\n"
    )
    return workspace


def verify_events(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The checks after an answer (the one before the work left out)."""
    return [{k: v for k, v in e.items() if k != "type"} for e in lines if e["type"] == "verify" and not e.get("before")]


def before_event(lines: list[dict[str, Any]]) -> dict[str, Any]:
    """The check's run before the model's first turn: there is exactly one, and it comes before any tool call."""
    found = [i for i, e in enumerate(lines) if e["type"] == "verify" and e.get("before")]
    assert len(found) == 1, lines
    assert all(e["type"] != "tool_call" for e in lines[:found[0]])
    return {k: v for k, v in lines[found[0]].items() if k != "type"}


def user_texts(body: dict[str, Any]) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "user"]


def test_a_model_that_breaks_the_test_is_shown_the_failure_and_fixes_it(
    apple_code_bin: Path, tested_calc: Path
) -> None:
    script = [
        tool_call("readFile", {"path": "calc.py"}),  # a file is read before it is edited (SeenFiles)
        tool_call("editFile", BREAK),
        answer("Done: add() is simpler now."),
        tool_call("editFile", FIX),
        answer("Fixed add() again; the test passes."),
    ]
    done, lines, requests = run_scripted(apple_code_bin, tested_calc, script, "Tidy up calc.py.", "--verify", CHECK)
    assert done.returncode == 0, done.stderr
    assert (tested_calc / "calc.py").read_text() == GOOD
    result = lines[-1]
    assert result["subtype"] == "success"
    assert result["result"] == "Fixed add() again; the test passes."
    assert result["verify"] == {"command": CHECK, "passed": True, "rounds": 1, "runs": 2, "exit_code": 0,
                                "output_tail": "exit code 0\n1 passed"}
    checks = verify_events(lines)
    assert [(c["passed"], c["rounds"], c["runs"], c.get("exit_code")) for c in checks] == [(False, 1, 1, 1),
                                                                                             (True, 1, 2, 0)]
    assert "AssertionError: add(2, 3) returned -1, expected 5" in checks[0]["output_tail"]
    # It passed before the work, so the task went to the model as it was.
    assert before_event(lines) == {"command": CHECK, "passed": True, "rounds": 0, "runs": 1, "exit_code": 0,
                                   "output_tail": "exit code 0\n1 passed", "before": True}
    # The check ran after each answer: it is not a turn, not a command of the model's.
    assert result["num_turns"] == 5 and result["commands_run"] == 0
    assert result["files_changed"] == ["calc.py"]
    # The failure went back to the model with the tools, after its answer; the task stayed first.
    assert len(requests) == 5
    repair = requests[3]
    assert repair["tools"] and repair["tool_choice"] == "auto"
    users = user_texts(repair)
    assert users[0].startswith("Tidy up calc.py.\n\ncalc.py:\n```\n")  # the task, with the file it names
    assert users[-1].startswith(f"The check `{CHECK}` failed (exit code 1). The end of its output:\n")
    assert "AssertionError: add(2, 3) returned -1, expected 5" in users[-1]
    assert users[-1].endswith("Fix what it shows, using the tools, then answer again.")
    assert repair["messages"][-2] == {"role": "assistant", "content": "Done: add() is simpler now."}


def test_a_model_that_never_fixes_it_ends_with_exit_5(apple_code_bin: Path, tested_calc: Path) -> None:
    script = [tool_call("readFile", {"path": "calc.py"}), tool_call("editFile", BREAK), answer("Done."),
              answer("Done, really."), answer("It is fine.")]
    done, lines, requests = run_scripted(apple_code_bin, tested_calc, script, "Tidy up calc.py.", "--verify", CHECK)
    assert done.returncode == 5, done.stderr
    result = lines[-1]
    assert result["subtype"] == "error_verify" and result["is_error"] is True
    # The partial answer (the last one), then the message with the check's last line.
    assert result["result"].startswith("It is fine.\n\n(the check `python3 -B test_calc.py` still fails after 2 repair "
                                       "rounds, exit code 1: AssertionError: add(2, 3) returned -1, expected 5)")
    assert result["files_changed"] == ["calc.py"]
    assert result["verify"]["passed"] is False
    assert (result["verify"]["rounds"], result["verify"]["runs"], result["verify"]["exit_code"]) == (2, 3, 1)
    assert [c["rounds"] for c in verify_events(lines)] == [1, 2, 2]
    assert before_event(lines)["passed"] is True
    assert len(requests) == 5
    # Each round's request holds the newest failure whole and the earlier one as a line.
    last = user_texts(requests[-1])
    assert last[-1].startswith(f"The check `{CHECK}` failed")
    assert last[-2] == f"The check `{CHECK}` failed (exit code 1). The end of its output: (its output is replaced " \
                       "by a newer run below)"
    assert "apple-code: error_verify: the check `python3 -B test_calc.py` still fails" in done.stderr


def test_verify_rounds_0_checks_without_repairing(apple_code_bin: Path, tested_calc: Path) -> None:
    (tested_calc / "calc.py").write_text(BAD)
    done, lines, requests = run_scripted(apple_code_bin, tested_calc, [answer("All good.")], "Check calc.py.",
                                         "--verify", CHECK, "--verify-rounds", "0")
    assert done.returncode == 5
    assert len(requests) == 1
    assert lines[-1]["verify"]["runs"] == 1 and lines[-1]["verify"]["rounds"] == 0


def test_max_turns_leaves_no_room_for_a_repair(apple_code_bin: Path, tested_calc: Path) -> None:
    (tested_calc / "calc.py").write_text(BAD)
    script = [tool_call("readFile", {"path": "calc.py"}), answer("Looks right.")]
    done, lines, requests = run_scripted(apple_code_bin, tested_calc, script, "Check calc.py.", "--verify", CHECK,
                                         "--max-turns", "3")
    assert done.returncode == 5
    assert len(requests) == 2
    assert "after 0 repair rounds (--max-turns 3 leaves no turns for another)" in lines[-1]["result"]


def test_the_result_says_so_when_the_check_never_ran(apple_code_bin: Path, tested_calc: Path) -> None:
    done, lines, _ = run_scripted(apple_code_bin, tested_calc, [http_error(500)], "Tidy up.", "--verify", CHECK)
    assert done.returncode == 1
    assert lines[-1]["verify"] == {"command": CHECK, "passed": False, "rounds": 0, "runs": 0, "output_tail": ""}
    assert verify_events(lines) == []
    assert before_event(lines)["passed"] is True  # the run before the work is not counted in the result


def test_a_check_that_fails_before_the_work_goes_with_the_task(apple_code_bin: Path, tested_calc: Path) -> None:
    (tested_calc / "calc.py").write_text(BAD)
    script = [tool_call("readFile", {"path": "calc.py"}), tool_call("editFile", FIX), answer("add() adds now.")]
    done, lines, requests = run_scripted(apple_code_bin, tested_calc, script, "Fix calc.py.", "--verify", CHECK)
    assert done.returncode == 0, done.stderr
    before = before_event(lines)
    assert (before["passed"], before["rounds"], before["runs"], before["exit_code"]) == (False, 0, 1, 1)
    # The first request holds the task, then how the check fails now: the model starts from the failure.
    first = user_texts(requests[0])
    assert len(first) == 1
    task, shown, failure = first[0].split("\n\n", 2)
    assert task == "Fix calc.py."
    assert shown == "calc.py:\n```\n" + BAD.rstrip("\n") + "\n```"  # the file the task names, as it is
    assert failure.startswith(f"The check `{CHECK}` fails now (exit code 1); it must pass when you are done. The end "
                              "of its output:\n")
    assert "AssertionError: add(2, 3) returned -1, expected 5" in failure
    # The result's verify object counts the checks after an answer only: one, passed, no repair round.
    assert lines[-1]["verify"]["runs"] == 1 and lines[-1]["verify"]["rounds"] == 0
    assert lines[-1]["verify"]["passed"] is True


def test_a_check_that_passed_before_asks_once_for_a_change_then_the_answer_stands(
        apple_code_bin: Path, tested_calc: Path) -> None:
    with ScriptedServer([answer("Nothing to do."), answer("Nothing to do, really.")]) as server:
        args = scripted_args(server.url, tested_calc, "--verify", CHECK, "--output-format", "text")
        done = run_apple_code(apple_code_bin, *args, "Check calc.py.")
        requests = server.requests()
    assert len(requests) == 2
    assert user_texts(requests[1])[-1].startswith("No file has changed, and the check `python3 -B test_calc.py` "
                                                  "passed before the work too")
    assert done.returncode == 0
    assert done.stdout == "Nothing to do, really.\n"
    assert "verify: `python3 -B test_calc.py` passed" in done.stderr


def test_text_output_of_a_failing_check_is_the_partial_answer(apple_code_bin: Path, tested_calc: Path) -> None:
    (tested_calc / "calc.py").write_text(BAD)
    with ScriptedServer([answer("All good.")]) as server:
        args = scripted_args(server.url, tested_calc, "--verify", CHECK, "--verify-rounds", "0",
                             "--output-format", "text")
        done = run_apple_code(apple_code_bin, *args, "Check calc.py.")
    assert done.returncode == 5
    assert done.stdout == "All good.\n"
    said = "apple-code: error_verify: the check `python3 -B test_calc.py` still fails after 0 repair rounds"
    assert said in done.stderr


def test_a_plan_runs_the_check_after_its_last_step_and_repairs_in_a_new_worker(apple_code_bin: Path,
                                                                                tested_calc: Path) -> None:
    (tested_calc / "calc.py").write_text(BAD)
    script = [
        answer('["Read calc.py and describe add()"]'),  # the planner
        tool_call("readFile", {"path": "calc.py"}),  # worker 1 reads, fixes nothing
        answer("add() subtracts."),
        tool_call("readFile", {"path": "calc.py"}),  # the repair worker, after the check failed: a fresh window
        tool_call("editFile", FIX),
        answer("add() adds now."),
        answer("Fixed add()."),  # the summary
    ]
    done, lines, requests = run_scripted(apple_code_bin, tested_calc, script, "Make calc.py right.", "--plan",
                                         "--verify", CHECK)
    assert done.returncode == 0, done.stderr
    assert (tested_calc / "calc.py").read_text() == GOOD
    checks = verify_events(lines)
    assert [(c["passed"], c["rounds"]) for c in checks] == [(False, 1), (True, 1)]
    assert "subtask" not in checks[0]
    # The failure before the work went to the planner with the task.
    assert before_event(lines)["passed"] is False
    assert "returned -1, expected 5" in user_texts(requests[0])[0]
    result = lines[-1]
    assert result["verify"]["passed"] is True and result["verify"]["runs"] == 2
    assert "make the check `python3 -B test_calc.py` pass (repair round 1)" in result["result"]
    assert result["result"].endswith("Summary: Fixed add().")
    # The repair worker started in a fresh window with the check's failure as its subtask.
    repair_task = user_texts(requests[3])[0]
    assert "Your subtask: The check `python3 -B test_calc.py` failed (exit code 1)" in repair_task
    assert "returned -1, expected 5" in repair_task
    assert any(e["type"] == "tool_call" and e.get("subtask") == 2 for e in lines)


def test_a_plan_whose_check_still_fails_ends_with_exit_5(apple_code_bin: Path, tested_calc: Path) -> None:
    (tested_calc / "calc.py").write_text(BAD)
    script = [answer('["Look at calc.py"]'), answer("Seen it."), answer("Still seen it.")]
    done, lines, _ = run_scripted(apple_code_bin, tested_calc, script, "Make calc.py right.", "--plan",
                                  "--verify", CHECK, "--verify-rounds", "1")
    assert done.returncode == 5, done.stderr
    result = lines[-1]
    assert result["subtype"] == "error_verify"
    assert result["result"].startswith("Plan: 2 subtasks.")
    assert result["verify"]["rounds"] == 1 and result["verify"]["runs"] == 2
