"""The run page shows an approved task's check (apple-code --verify): each round's output and the verdict; and an
escalated run names the run it escalated."""

from __future__ import annotations

from typing import Any

from apple_flow.connectors.events import parse_event
from apple_flow.daemon.running.turn_runner import RunLog
from apple_flow.daemon.store import FinishedTurn
from support.daemon_harness import ANA
from web.conftest import Page


def log_events(page: Page, run_id: str, events: list[dict[str, Any]]) -> None:
    with RunLog(page.store, run_id) as log:
        for event in events:
            log(parse_event(event))


def test_the_run_page_shows_each_check_round_and_the_verdict(page: Page) -> None:
    page.store.runs.start_run("run_c1c1c1", ANA, "approve", "/ws", "fix the parser", approval="req_0000aaaa")
    log_events(page, "run_c1c1c1", [
        {"type": "tool_call", "id": "c1", "name": "editFile", "arguments": {"path": "parser.py"}},
        {"type": "verify", "command": "make test", "passed": False, "rounds": 1, "runs": 1, "exit_code": 2,
         "output_tail": "exit code 2\nFAILED tests/test_parser.py::test_empty - <assert> parse('') == []"},
        {"type": "verify", "command": "make test", "passed": True, "rounds": 1, "runs": 2, "exit_code": 0,
         "output_tail": "exit code 0\n3 passed in 0.02s"},
        {"type": "result", "subtype": "success", "is_error": False, "result": "Fixed.",
         "verify": {"command": "make test", "passed": True, "rounds": 1, "runs": 2, "exit_code": 0,
                    "output_tail": "exit code 0\n3 passed in 0.02s"}},
    ])
    page.store.runs.finish_run("run_c1c1c1", FinishedTurn(None, "done", "Fixed."))
    html = page.logged_in().get("/runs/run_c1c1c1").text
    section = html[html.index('<section class="check">'):]
    section = section[:section.index("</section>")]
    assert "Passed: <code>make test</code> · 1 repair round" in section
    assert "Run 1: <code>make test</code>" in section and "failed (exit 2)" in section
    assert "FAILED tests/test_parser.py::test_empty - &lt;assert&gt; parse(&#39;&#39;) == []" in section  # escaped
    assert "Run 2: <code>make test</code>" in section and "3 passed in 0.02s" in section


def test_a_failed_check_without_round_events_shows_the_results_output(page: Page) -> None:
    page.store.runs.start_run("run_c2c2c2", ANA, "approve", "/ws", "fix it", approval="req_0000aaaa")
    log_events(page, "run_c2c2c2", [
        {"type": "result", "subtype": "error_verify", "is_error": True, "result": "Tried.",
         "verify": {"command": "cargo test", "passed": False, "rounds": 2, "runs": 3, "exit_code": 101,
                    "output_tail": "test result: FAILED"}},
    ])
    page.store.runs.finish_run("run_c2c2c2", FinishedTurn(None, "failed", "Error: the check `cargo test` still fails."))
    html = page.logged_in().get("/runs/run_c2c2c2").text
    assert "Failed</span>: <code>cargo test</code> · 2 repair rounds" in html
    assert "test result: FAILED" in html


def test_a_check_that_never_ran_says_so(page: Page) -> None:
    page.store.runs.start_run("run_c3c3c3", ANA, "approve", "/ws", "fix it", approval="req_0000aaaa")
    log_events(page, "run_c3c3c3", [
        {"type": "result", "subtype": "error_max_turns", "is_error": True, "result": "max turns",
         "verify": {"command": "go test ./...", "passed": False, "rounds": 0, "runs": 0, "output_tail": ""}},
    ])
    page.store.runs.finish_run("run_c3c3c3", FinishedTurn(None, "failed", "Error: max turns"))
    assert "Not run: <code>go test ./...</code>" in page.logged_in().get("/runs/run_c3c3c3").text


def test_a_run_without_a_check_has_no_check_section_and_an_escalation_links_its_run(page: Page) -> None:
    page.store.runs.start_run("run_e1e1e1", ANA, "escalate", "/ws", "fix it", approval="req_0000aaaa",
                              escalated_from="run_c2c2c2")
    page.store.runs.finish_run("run_e1e1e1", FinishedTurn(None, "done", "ok"))
    html = page.logged_in().get("/runs/run_e1e1e1").text
    assert 'class="check"' not in html
    assert 'escalate of <a href="/runs/run_c2c2c2">run_c2c2c2</a>' in html
