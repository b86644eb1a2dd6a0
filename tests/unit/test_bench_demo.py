"""scripts/bench_demo's own judgements: the tally fix is judged on the example's test file, not on one a run
edited, and the report gives chat's median apart from the task plans (the 10 s target is chat's)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import bench_demo  # noqa: E402


def workspace(tmp_path: Path) -> Path:
    copy = tmp_path / "ws"
    shutil.copytree(ROOT / "examples" / "workspace", copy)
    return copy


def test_the_tally_fix_counts_only_against_the_examples_own_test(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    assert not bench_demo.tally_tests_pass("", ws)  # the bug as shipped
    # A run that "fixed" it by changing the test: its own workspace passes, the example's test does not.
    test = ws / "test_tally.py"
    test.write_text(test.read_text().replace('"the cat saw the dog"), "the"', '"the cat saw the dog"), "cat"'))
    assert "cat\")" in test.read_text()
    assert not bench_demo.tally_tests_pass("", ws)
    tally = ws / "tally.py"
    tally.write_text(tally.read_text().replace("return min(", "return max("))
    assert bench_demo.tally_tests_pass("I fixed nothing", ws)  # the workspace decides, not the words
    tally.unlink()
    assert not bench_demo.tally_tests_pass("", ws)


def reply(message: str, seconds: float, outcome: str = "answered") -> bench_demo.Reply:
    return bench_demo.Reply(1, bench_demo.Message(message), seconds, outcome, "text", None, [])


def test_the_report_gives_chat_apart_from_the_task_plans() -> None:
    replies = [reply("hi", 8.0), reply("what files are in the workspace?", 9.0),
               reply("what does greet.py print?", 10.0), reply("task: fix it", 30.0), reply("task: more", 40.0),
               reply("help", 0.1, "command"), reply("approve req_1", 50.0, "check_failed")]
    text = bench_demo.report(replies, 1, [(1.0, 1.0, 1.0)], 100.0, {"prompt eval": (1.0, 10), "eval": (1.0, 5)},
                             {}, {}, bench_demo.APPLE_CODE, "a model")
    assert "median chat reply under 10 s: met (9.0 s;" in text  # the plans (30 s, 40 s) and the approval left out
    assert "with the task plans 10.0 s" in text
    assert "| ... task plans (`task:`): median / max | 35.0 / 40.0 |" in text
