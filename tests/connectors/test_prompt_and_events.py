"""Prompt fitting and progress lines, as plain functions."""

from __future__ import annotations

import re

import pytest

from apple_flow.connectors.base import AgentEvent, Exchange
from apple_flow.connectors.events import EventStream, apple_code_tool_calls, describe_tool_call
from apple_flow.connectors.prompt import cut_end, cut_middle, fit_prompt
from apple_flow.connectors.stream_events import Result, ToolCall


@pytest.mark.parametrize("length", [50, 99, 100, 101, 999, 1000, 1001, 123_456])
@pytest.mark.parametrize("limit", [40, 100, 1000, 3000])
def test_cut_middle_is_exactly_the_limit_and_keeps_both_ends(length: int, limit: int) -> None:
    text = "A" + "m" * (length - 2) + "Z"
    cut = cut_middle(text, limit)
    if length <= limit:
        assert cut == text
    else:
        assert len(cut) == limit
        assert cut.startswith("A") and cut.endswith("Z")
        match = re.search(r"\n\[\.\.\. (\d+) characters cut \.\.\.\]\n", cut)
        assert match is not None
        kept = len(cut) - len(match.group(0))
        assert int(match.group(1)) == length - kept  # the marker tells the truth


def test_cut_end() -> None:
    assert cut_end("  short  ", 10) == "short"
    assert cut_end("one two three", 8) == "one two…"
    assert len(cut_end("x" * 900, 500)) == 500
    assert cut_end("anything", 0) == ""


def test_fit_prompt_without_history_is_the_message() -> None:
    assert fit_prompt("hello", [], 3000) == "hello"


def test_fit_prompt_puts_history_oldest_first_then_the_message() -> None:
    prompt = fit_prompt("now", [Exchange("q1", "a1"), Exchange("q2", "a2")], 3000)
    assert prompt.index("User: q1") < prompt.index("User: q2") < prompt.index("now")
    assert prompt.endswith("New message:\nnow")


def test_fit_prompt_drops_oldest_history_first_and_stays_in_budget() -> None:
    history = [Exchange(f"question {n} " + "q" * 300, f"answer {n} " + "a" * 300) for n in range(5)]
    prompt = fit_prompt("the message", history, 900)
    assert len(prompt) <= 900
    assert "question 4" in prompt
    assert "question 0" not in prompt
    assert prompt.endswith("the message")


def test_fit_prompt_keeps_the_whole_message_before_any_history() -> None:
    message = "m" * 2900
    prompt = fit_prompt(message, [Exchange("old", "older")], 3000)
    assert prompt == message


@pytest.mark.parametrize(
    ("name", "arguments", "line"),
    [
        ("readFile", {"path": "src/app.py"}, "reading src/app.py"),
        ("writeFile", {"path": "b.txt", "content": "x"}, "writing b.txt"),
        ("editFile", {"path": "c.py", "oldText": "a", "newText": "b"}, "editing c.py"),
        ("listDirectory", {}, "listing ."),
        ("searchFiles", {"pattern": "*.py"}, "finding files *.py"),
        ("searchContent", {"pattern": "TODO"}, "searching for TODO"),
        ("runCommand", {"command": "make\n  test"}, "running: make test"),
        ("Bash", {"command": "pytest -q"}, "running: pytest -q"),
        ("mystery", {"x": 1}, "using mystery"),
    ],
)
def test_describe_tool_call(name: str, arguments: dict[str, object], line: str) -> None:
    assert describe_tool_call(name, arguments) == line


def test_long_progress_lines_are_cut() -> None:
    assert len(describe_tool_call("runCommand", {"command": "echo " + "x" * 500})) == 80


def test_event_stream_reads_results_subtasks_and_skips_junk() -> None:
    events: list[AgentEvent] = []
    stream = EventStream(apple_code_tool_calls)
    for line in [
        "not json",
        "[1, 2]",
        "",
        '{"type":"tool_call","id":"c1","name":"readFile","arguments":{"path":"a.py"},"subtask":2}',
        '{"type":"result","subtype":"success","is_error":false,"result":"  done  "}',
    ]:
        events.extend(stream.feed(line))
    assert [event.progress for event in events] == [("[2] reading a.py",), ()]
    assert [type(event.event) for event in events] == [ToolCall, Result]
    assert stream.unparsed_lines == 2
    assert stream.result is not None and stream.result.answer == "done"
    assert not stream.result.failed


def test_event_stream_error_subtype_is_an_error_even_without_is_error() -> None:
    stream = EventStream(apple_code_tool_calls)
    stream.feed('{"type":"result","subtype":"error_max_turns","result":"stopped"}')
    assert stream.result is not None and stream.result.failed


def test_event_stream_reports_the_answer_growing_from_text_events() -> None:
    stream = EventStream(apple_code_tool_calls)
    progress = [
        event.progress
        for line in ['{"type":"text","delta":"The README "}', '{"type":"text","delta":"says hi."}',
                     '{"type":"text","delta":"x","subtask":1}', '{"type":"text","delta":7}']
        for event in stream.feed(line)
    ]
    assert progress == [("writing the answer (11 characters so far)",),
                        ("writing the answer (19 characters so far)",), (), ()]
